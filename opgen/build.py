"""`opgen build`: compile a project's C++/CUDA sources with ninja (planned in ninja.py).

Note [Build layout]
opgen writes `build/build.ninja` (from the sources on disk and the toolchain
found now) and runs ninja from the project root, so compiler messages name
project-relative paths such as `csrc/cpu/foo.cpp:12:3`. One translation unit
per file: touching one kernel recompiles that file and relinks. The library
lands in `<package>/_C.abi3.so` (stable ABI) or `<package>/_C.so` (classic),
where `<package>/_library.py` loads it.

CPU code is compiled with -O3 -fopenmp and no -march flags: kernels that want
AVX2 use function multiversioning (`__attribute__((target("avx2,fma")))`)
behind a runtime CPU check, so the library runs on any x86-64.

CUDA sources are compiled with the toolkit of Note [CUDA toolchain] and
linked as Note [CUDA build modes] decides (planned in ninja.py).

CUDA sources are compiled and linked only when nvcc is present and torch was
built with CUDA. Otherwise `--check-cuda` still compile-checks every `.cu`
with nvcc (no GPU needed) and nothing CUDA is linked.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import Diagnostic, OpgenError
from .fs import ProjectFiles
from .generate import GenerateResult
from .generate import generate as run_generate
from .ninja import BUILD_DIR, BuildPlan, CudaMode, find_toolchain, plan_build, write_ninja
from .project import Project, load_project
from .targets.cpp import (
    REGISTRATION,
    library_file,
)

__all__ = [
    "BuildResult",
    "ProjectBuild",
    "build_project",
    "run_build",
    "foreign_symbols",
    "ninja_outputs",
    "confine_outputs",
]

_FOREIGN = ("at::", "c10::", "torch::", "caffe2::")


def foreign_symbols(library: Path) -> list[str]:
    """Undefined C++ symbols of torch's C++ API (at::, c10::, torch::) in `library`."""
    nm = subprocess.run(
        ["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True, check=True
    )
    names = [line.split()[-1] for line in nm.stdout.splitlines() if line.strip()]
    demangled = subprocess.run(
        ["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return [
        d
        for d in demangled
        if any(d.startswith(p) or f" {p}" in d or f"({p}" in d or f"<{p}" in d for p in _FOREIGN)
    ]


@dataclass
class BuildResult:
    """Whether the compile succeeded, the line that says so, and notes (skipped CUDA, orphan kernels)."""

    ok: bool
    summary: str
    plan: BuildPlan | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def run_build(
    project: Project,
    jobs: int = 2,
    check_cuda: bool = False,
    verbose: bool = False,
    cpu_only: bool = False,
) -> BuildResult:
    """Write build.ninja, run ninja (compiler output goes straight to the terminal), check the result."""
    start = time.perf_counter()
    if not any(op.backend == "cpp" for op in project.ops):
        return BuildResult(True, 'nothing to build: the project has no backend = "cpp" ops')
    root = project.root
    missing = [p for p in (REGISTRATION,) if not (root / p).is_file()]
    if missing:
        raise OpgenError(
            Diagnostic(
                root / missing[0], None, "generated C++ sources are missing", "run `opgen generate`"
            )
        )
    wants_cuda = any("cuda" in op.devices for op in project.ops if op.backend == "cpp")
    tools = find_toolchain(cuda=wants_cuda and not cpu_only)
    plan = plan_build(project, tools, check_cuda, cpu_only)
    ninja_file = write_ninja(root, plan)
    confine_outputs(ProjectFiles(root), plan.ninja_text)
    targets = ["check_cuda"] if plan.cuda_mode is CudaMode.CHECK else []
    command = [tools.ninja, "-f", ninja_file.relative_to(root).as_posix(), f"-j{jobs}"]
    if verbose:
        command.append("-v")
    # -k 0: report every file that fails to compile, not only the first.
    status = subprocess.call(command + ["-k", "0"] + _default_and(targets, plan), cwd=root)
    seconds = time.perf_counter() - start
    notes = plan.notes
    if status != 0:
        return BuildResult(
            False,
            f"build failed ({seconds:.1f} s): see the compiler messages above",
            plan,
            notes,
            seconds,
        )
    files = ProjectFiles(root)
    library = files.path(plan.library)
    other = library.with_name(
        library_file("classic" if project.config.cpp_target == "stable" else "stable")
    )
    files.unlink(other)  # left by a build for the other cpp_target
    if project.config.cpp_target == "stable":
        bad = foreign_symbols(library)
        if bad:
            files.unlink(library)
            shown = "\n    ".join(bad[:10]) + ("\n    ..." if len(bad) > 10 else "")
            return BuildResult(
                False,
                f"{plan.library} uses torch C++ symbols, so it is not stable-ABI (removed it):\n    {shown}\n"
                '  hint: use only torch/csrc/stable and torch/headeronly headers, or set cpp_target = "classic"',
                plan,
                notes,
                seconds,
            )
    return BuildResult(True, f"built {plan.library} ({seconds:.1f} s)", plan, notes, seconds)


_BUILD_LINE = re.compile(r"build ((?:[^:$\n]|\$.)+):\s*(\S+)")


def ninja_outputs(ninja_text: str) -> list[str]:
    """Every file a ninja file makes ninja write: its outputs, and the depfiles of compile rules."""
    outputs: list[str] = []
    for match in _BUILD_LINE.finditer(ninja_text):
        names, rule = match.groups()
        if rule == "phony":
            continue
        for name in re.split(r"(?<!\$) ", names.strip()):
            path = re.sub(r"\$(.)", r"\1", name)
            outputs.append(path)
            if rule in ("cxx", "nvcc"):
                outputs.append(f"{path}.d")
    return outputs


def confine_outputs(files: ProjectFiles, ninja_text: str) -> None:
    """Before ninja runs: every file it writes is a regular file (or none yet) in real folders.

    ninja and the compilers it runs write outside opgen's confined path
    (Note [Confined writes] in confined.py), so their outputs are checked
    first: `build/` and every folder on the way to an output are made here
    (refusing a symlink), and an output that is a symlink, a folder or a FIFO
    stops the build with a diagnostic. A symlink swapped in while ninja runs
    is out of scope.
    """
    for rel in [f"{BUILD_DIR}/.ninja_log", f"{BUILD_DIR}/.ninja_deps", *ninja_outputs(ninja_text)]:
        folder = rel.rpartition("/")[0]
        if folder:
            files.mkdir(folder)
        files.exists(rel)  # refuses a symlink, folder or FIFO in the output's place


def _default_and(extra: list[str], plan: BuildPlan) -> list[str]:
    if not extra:
        return []
    return [plan.library] + ([plan.pybind_module] if plan.pybind_module else []) + extra


@dataclass
class ProjectBuild:
    """`opgen build` as a library call returns it: the generate run (if any) and the build."""

    generated: GenerateResult | None
    build: BuildResult

    @property
    def ok(self) -> bool:
        return self.build.ok


def build_project(
    root: Path,
    *,
    jobs: int = 2,
    check_cuda: bool = False,
    verbose: bool = False,
    generate: bool = True,
    cpu_only: bool = False,
) -> ProjectBuild:
    """Regenerate the project at `root` (unless `generate` is False), then compile its C++/CUDA ops.

    A generate run that fails (a conflict, an edited file) stops before the
    compile. Raises OpgenError for an invalid project or a missing toolchain.
    """
    generated = run_generate(root) if generate else None
    if generated is not None and generated.failed:
        return ProjectBuild(
            generated,
            BuildResult(False, "`opgen generate` failed; fix the files above, then build again"),
        )
    return ProjectBuild(
        generated,
        run_build(
            load_project(root), jobs=jobs, check_cuda=check_cuda, verbose=verbose, cpu_only=cpu_only
        ),
    )
