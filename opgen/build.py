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

CUDA sources are compiled and linked only when nvcc is present and torch was
built with CUDA. Otherwise `--check-cuda` still compile-checks every `.cu`
with nvcc (no GPU needed) and nothing CUDA is linked.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import Diagnostic, OpgenError
from .fs import ProjectFiles
from .generate import GenerateResult
from .generate import generate as run_generate
from .ninja import BuildPlan, Toolchain, find_toolchain, plan_build, write_ninja
from .project import Project, load_project
from .stamp import collect_inputs, remove_stamp, stale_reason, write_stamp
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


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns


def run_build(
    project: Project,
    jobs: int = 2,
    check_cuda: bool = False,
    verbose: bool = False,
    stamp: bool = True,
) -> BuildResult:
    """Write build.ninja, run ninja (compiler output goes straight to the terminal), check the result.

    `stamp`: record a successful build in the build stamp (Note [Build stamp]);
    a build of files that generate may not have brought up to date passes False.
    """
    start = time.perf_counter()
    root = project.root
    if not any(op.backend == "cpp" for op in project.ops):
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
    tools = find_toolchain()
    plan = plan_build(project, tools, check_cuda)
    ninja_file = write_ninja(root, plan)
    # Taken before compiling: a file edited during the build makes the next check stale.
    inputs = collect_inputs(root)
    remove_stamp(root)
    files = ProjectFiles(root)
    library = files.path(plan.library)
    linked = _stat(library)
    targets = (
        ["check_cuda"]
        if check_cuda and plan.cuda_sources and tools.nvcc and not plan.cuda_linked
        else []
    )
    command = [tools.ninja, "-f", ninja_file.relative_to(root).as_posix(), f"-j{jobs}"]
    if verbose:
        command.append("-v")
    # -k 0: report every file that fails to compile, not only the first.
    status = subprocess.call(command + ["-k", "0"] + _default_and(targets, plan), cwd=root)
    seconds = time.perf_counter() - start
    notes = plan.notes + _cuda_notes(plan, tools, check_cuda)
    if status != 0:
        return BuildResult(
            False,
            f"build failed ({seconds:.1f} s): see the compiler messages above",
            plan,
            notes,
            seconds,
        )
    other = library.with_name(
        library_file("classic" if project.config.cpp_target == "stable" else "stable")
    )
    files.unlink(other)  # left by a build for the other cpp_target
    relinked = _stat(library) != linked
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
        write_stamp(root, inputs, outputs, tools.ninja, check_cuda)
    summary = f"built {plan.library}" if relinked else f"{plan.library} is up to date"
    return BuildResult(True, f"{summary} ({seconds:.1f} s)", plan, notes, seconds)


def _default_and(extra: list[str], plan: BuildPlan) -> list[str]:
    if not extra:
        return []
    return [plan.library] + ([plan.pybind_module] if plan.pybind_module else []) + extra


def _cuda_notes(plan: BuildPlan, tools: Toolchain, check_cuda: bool) -> list[str]:
    if not plan.cuda_sources or plan.cuda_linked:
        return []
    why = "nvcc was not found" if tools.nvcc is None else "torch was built without CUDA"
    if check_cuda and tools.nvcc:
        return [
            f"CUDA: {why}; compile-checked {len(plan.cuda_sources)} .cu file(s) with nvcc, linked none"
        ]
    hint = " (pass --check-cuda to compile-check them with nvcc)" if tools.nvcc else ""
    return [f"CUDA skipped: {why}; {len(plan.cuda_sources)} .cu file(s) not built{hint}"]


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
    if_stale: bool = True,
) -> ProjectBuild:
    """Regenerate the project at `root` (unless `generate` is False), then compile its C++/CUDA ops.

    With `if_stale`, nothing runs when the build stamp shows nothing changed
    since the last build (Note [Build stamp]); the result then says up to date.
    A generate run that fails (a conflict, an edited file) stops before the
    compile. Raises OpgenError for an invalid project or a missing toolchain.
    """
    if if_stale and stale_reason(root, check_cuda) is None:
        return ProjectBuild(None, BuildResult(True, UP_TO_DATE, up_to_date=True))
    generated = run_generate(root) if generate else None
    if generated is not None and generated.failed:
        return ProjectBuild(
            generated,
            BuildResult(False, "`opgen generate` failed; fix the files above, then build again"),
        )
    built = run_build(
        load_project(root), jobs=jobs, check_cuda=check_cuda, verbose=verbose, stamp=generate
    )
    return ProjectBuild(generated, built)
