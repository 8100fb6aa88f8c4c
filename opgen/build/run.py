"""`opgen build`: compile a project's C++/CUDA sources with ninja (planned in build/ninja.py).

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
linked as Note [CUDA build modes] decides (planned in build/ninja.py).

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

from ..errors import Diagnostic, OpgenError
from ..generate import GenerateResult
from ..generate import generate as run_generate
from ..project.load import Project, load_project
from ..spec.backends import backend_of
from ..targets.cpp import (
    REGISTRATION,
    library_file,
)
from ..write.project_files import ProjectFiles
from .ninja import BUILD_DIR, BuildPlan, CudaMode, find_toolchain, plan_build, write_ninja
from .stamp import (
    Watched,
    collect_inputs,
    remove_stamp,
    size_and_mtime,
    stale_reason,
    write_stamp,
)
from .toolchain.compiler_output import missing_header_hints, run_ninja

__all__ = [
    "BuildResult",
    "ProjectBuild",
    "build_project",
    "run_build",
    "foreign_symbols",
    "ninja_outputs",
    "confine_outputs",
    "UP_TO_DATE",
]

_FOREIGN = ("at::", "c10::", "torch::", "caffe2::")
UP_TO_DATE = "up to date: nothing changed since the last build"


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
    up_to_date: bool = False  # nothing changed since the last build: nothing ran
    hints: list[str] = field(default_factory=list)  # after a failure: what to change


def run_build(
    project: Project,
    jobs: int = 2,
    check_cuda: bool = False,
    verbose: bool = False,
    cpu_only: bool = False,
    stamp: bool = True,
) -> BuildResult:
    """Write build.ninja, run ninja (compiler output goes straight to the terminal), check the result.

    `stamp`: record a successful build in the build stamp (Note [Build stamp]);
    a build of files that generate may not have brought up to date passes False.
    """
    start = time.perf_counter()
    root = project.root
    if not any(backend_of(op).compiles_cpp for op in project.ops):
        if stamp:
            write_stamp(root, collect_inputs(root), [], None, check_cuda)
        return BuildResult(True, 'nothing to build: the project has no backend = "cpp" ops')
    missing = [p for p in (REGISTRATION,) if not (root / p).is_file()]
    if missing:
        raise OpgenError(
            Diagnostic(
                root / missing[0], None, "generated C++ sources are missing", "run `opgen generate`"
            )
        )
    wants_cuda = any("cuda" in op.devices for op in project.ops if backend_of(op).compiles_cpp)
    tools = find_toolchain(cuda=wants_cuda and not cpu_only)
    plan = plan_build(project, tools, check_cuda, cpu_only)
    ninja_file = write_ninja(root, plan)
    confine_outputs(ProjectFiles(root), plan.ninja_text)
    # Taken before compiling: a file edited during the build makes the next check stale.
    watched = Watched(plan.user.sources, plan.user.environment)
    inputs = collect_inputs(root, watched)
    remove_stamp(root)
    files = ProjectFiles(root)
    library = files.path(plan.library)
    linked = size_and_mtime(library)
    targets = ["check_cuda"] if plan.cuda_mode is CudaMode.CHECK else []
    command = [tools.ninja, "-f", ninja_file.relative_to(root).as_posix(), f"-j{jobs}"]
    if verbose:
        command.append("-v")
    # -k 0: report every file that fails to compile, not only the first.
    status, output = run_ninja(command + ["-k", "0"] + _default_and(targets, plan), root)
    seconds = time.perf_counter() - start
    notes = plan.notes
    if status != 0:
        return BuildResult(
            False,
            f"build failed ({seconds:.1f} s): see the compiler messages above",
            plan,
            notes,
            seconds,
            hints=missing_header_hints(output),
        )
    notes = notes + plan.outcome_notes
    other = library.with_name(
        library_file("classic" if project.config.cpp_target == "stable" else "stable")
    )
    files.unlink(other)  # left by a build for the other cpp_target
    relinked = size_and_mtime(library) != linked
    if project.config.cpp_target == "stable" and relinked:
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
    if stamp:
        outputs = [plan.library] + ([plan.pybind_module] if plan.pybind_module else [])
        write_stamp(root, inputs, outputs, tools.ninja, check_cuda, watched)
    summary = f"built {plan.library}" if relinked else f"{plan.library} is up to date"
    return BuildResult(True, f"{summary} ({seconds:.1f} s)", plan, notes, seconds)


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
            if rule in ("cxx", "cxx_imported", "nvcc"):
                outputs.append(f"{path}.d")
    return outputs


def confine_outputs(files: ProjectFiles, ninja_text: str) -> None:
    """Before ninja runs: every file it writes is a regular file (or none yet) in real folders.

    ninja and the compilers it runs write outside opgen's confined path
    (Note [Confined writes] in write/confined.py), so their outputs are checked
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
    if_stale: bool = True,
) -> ProjectBuild:
    """Regenerate the project at `root` (unless `generate` is False), then compile its C++/CUDA ops.

    With `if_stale`, nothing runs when the build stamp shows nothing changed
    since the last build (Note [Build stamp]); the result then says up to date.
    A generate run that fails (a conflict, an edited file) stops before the
    compile. Raises OpgenError for an invalid project or a missing toolchain.
    A `cpu_only` build is never stamped: its library lacks the CUDA kernels a
    plain build links, so the next plain build (or `opgen test`) rebuilds.
    """
    if if_stale and not cpu_only and stale_reason(root, check_cuda) is None:
        return ProjectBuild(None, BuildResult(True, UP_TO_DATE, up_to_date=True))
    generated = run_generate(root) if generate else None
    if generated is not None and generated.failed:
        return ProjectBuild(
            generated,
            BuildResult(False, "`opgen generate` failed; fix the files above, then build again"),
        )
    built = run_build(
        load_project(root),
        jobs=jobs,
        check_cuda=check_cuda,
        verbose=verbose,
        cpu_only=cpu_only,
        stamp=generate and not cpu_only,
    )
    return ProjectBuild(generated, built)
