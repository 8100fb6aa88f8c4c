"""`opgen build`: compile a project's C++/CUDA sources with ninja.

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

import os
import re
import shlex
import shutil
import subprocess
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

from .api.cpp import target_version_hex
from .api.fastpath import refuses_backward_in_cpp
from .errors import Diagnostic, OpgenError
from .fs import ProjectFiles
from .generate import GenerateResult
from .generate import generate as run_generate
from .project import Project, load_project
from .targets.cpp import (
    AUTOGRAD_REGISTRATION,
    KERNEL_DIRS,
    PYBIND_SOURCE,
    REGISTRATION,
    device_registration,
    library_file,
    library_path,
    op_header,
)

__all__ = [
    "Toolchain",
    "BuildPlan",
    "BuildResult",
    "ProjectBuild",
    "build_project",
    "find_toolchain",
    "plan_build",
    "write_ninja",
    "run_build",
    "foreign_symbols",
    "BUILD_DIR",
]

BUILD_DIR = "build"
_CXX_FLAGS = ["-O3", "-fopenmp", "-fPIC", "-std=c++17", "-DNDEBUG"]
_NVCC_FLAGS = [
    "-O3",
    "-DNDEBUG",
    "-std=c++17",
    "-Xcompiler",
    "-fPIC",
    "-DUSE_CUDA",
    "--expt-relaxed-constexpr",
]
_CUDA_ARCH = "-arch=sm_90"
_FOREIGN = ("at::", "c10::", "torch::", "caffe2::")


@dataclass(frozen=True)
class Toolchain:
    """The tools a build uses and what the installed torch was built with."""

    cxx: str
    nvcc: str | None
    ninja: str
    torch_dir: Path
    torch_cuda: bool
    cxx11_abi: bool

    @property
    def cuda_enabled(self) -> bool:
        return self.nvcc is not None and self.torch_cuda


def find_toolchain() -> Toolchain:
    """The compiler, ninja, nvcc (if any) and the installed torch; raises OpgenError for what is missing."""
    import torch

    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    ninja = shutil.which("ninja")
    if ninja is None:
        try:
            import ninja as ninja_pkg  # the PyPI wheel ships the binary

            ninja = str(Path(ninja_pkg.BIN_DIR) / "ninja")
        except ImportError:
            pass
    problems = []
    if cxx is None:
        problems.append(
            Diagnostic(
                None,
                None,
                "no C++ compiler found (g++ or $CXX)",
                "install g++ (e.g. apt-get install g++)",
            )
        )
    if ninja is None:
        problems.append(Diagnostic(None, None, "ninja was not found", "pip install ninja"))
    if problems:
        raise OpgenError(problems)
    nvcc = os.environ.get("NVCC") or shutil.which("nvcc")
    if nvcc is None and Path("/usr/local/cuda/bin/nvcc").is_file():
        nvcc = "/usr/local/cuda/bin/nvcc"
    return Toolchain(
        cxx=cxx,  # type: ignore[arg-type]
        nvcc=nvcc,
        ninja=ninja,  # type: ignore[arg-type]
        torch_dir=Path(torch.__file__).parent,
        torch_cuda=torch.version.cuda is not None,
        cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    )


@dataclass
class BuildPlan:
    """The ninja file of a build and what it compiles and links."""

    ninja_text: str
    library: str  # project-relative
    cpp_sources: list[str] = field(default_factory=list)
    cuda_sources: list[str] = field(default_factory=list)
    cuda_linked: bool = False
    pybind_module: str | None = None
    notes: list[str] = field(default_factory=list)


def _q(path: str) -> str:
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


_OP_HEADER = re.compile(r'#include\s+"\.\./(\w+)\.h"')


def _sources(root: Path, folder: str, suffix: str, orphans: list[str]) -> list[str]:
    """Every source under `folder`, less kernels of removed ops (their header is gone; listed in `orphans`)."""
    base = root / folder
    if not base.is_dir():
        return []
    found: list[str] = []
    for path in sorted(p for p in base.rglob(f"*{suffix}") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        headers = _OP_HEADER.findall(path.read_text(encoding="utf-8", errors="replace"))
        if any(not (root / op_header(h)).is_file() for h in headers):
            orphans.append(rel)
            continue
        found.append(rel)
    return found


def _cuda_arch_flags(cuda_linked: bool) -> list[str]:
    """Real builds target the GPUs this torch supports; compile checks target Hopper."""
    if not cuda_linked:
        return [_CUDA_ARCH]
    import torch

    listed = os.environ.get("TORCH_CUDA_ARCH_LIST")
    archs = (
        [a.replace(".", "").replace("+PTX", "") for a in listed.replace(";", " ").split()]
        if listed
        else [a.removeprefix("sm_") for a in torch.cuda.get_arch_list() if a.startswith("sm_")]
    )
    return [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs] or [_CUDA_ARCH]


def plan_build(project: Project, tools: Toolchain, check_cuda: bool = False) -> BuildPlan:
    """The ninja file for this project and toolchain; no side effects."""
    config = project.config
    root = project.root
    stable = config.cpp_target == "stable"
    cpp_ops = [op for op in project.ops if op.backend == "cpp"]
    devices = {d for op in cpp_ops for d in op.devices}
    include = tools.torch_dir / "include"
    defines = [f"-D_GLIBCXX_USE_CXX11_ABI={int(tools.cxx11_abi)}"]
    if stable:
        defines.append(f"-DTORCH_TARGET_VERSION={target_version_hex(config.torch_target_version)}")
    includes = [f"-isystem {shlex.quote(str(include))}"]
    if not stable:
        includes.append(f"-isystem {shlex.quote(str(include / 'torch/csrc/api/include'))}")
    cuda_linked = "cuda" in devices and tools.cuda_enabled
    if cuda_linked:
        defines.append("-DUSE_CUDA")
    lib_dir = tools.torch_dir / "lib"
    libs = ["-lc10", "-ltorch_cpu", "-ltorch"]
    if cuda_linked:
        cuda_home = Path(tools.nvcc).resolve().parent.parent  # type: ignore[arg-type]
        libs += [
            "-lc10_cuda",
            "-ltorch_cuda",
            f"-L{shlex.quote(str(cuda_home / 'lib64'))}",
            "-lcudart",
        ]
    library = library_path(config)
    nvcc_defines = [d for d in defines if d != "-DUSE_CUDA"]
    if not stable:
        nvcc_defines.append("-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE")
    lines = [
        "# @generated by opgen build: the compile of this project; rewritten on every `opgen build`.",
        "ninja_required_version = 1.3",
        f"builddir = {BUILD_DIR}",
        f"cxx = {shlex.quote(tools.cxx)}",
        f"nvcc = {shlex.quote(tools.nvcc) if tools.nvcc else 'nvcc'}",
        f"cflags = {' '.join(_CXX_FLAGS + defines + includes)}",
        f"nvcc_flags = {' '.join(_NVCC_FLAGS + _cuda_arch_flags(cuda_linked) + nvcc_defines + includes)}",
        f"ldflags = -shared -fopenmp -Wl,--no-undefined -L{shlex.quote(str(lib_dir))} {' '.join(libs)}",
        "",
        "rule cxx",
        "  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = CXX $in",
        "",
        "rule nvcc",
        "  command = $nvcc -MD -MF $out.d $nvcc_flags -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = NVCC $in",
        "",
        "rule link",
        "  command = $cxx $in -o $out $ldflags",
        "  description = LINK $out",
        "",
    ]
    cpp_sources = [REGISTRATION]
    if any(refuses_backward_in_cpp(op) for op in cpp_ops):  # Note [Backward refusal]
        cpp_sources.append(AUTOGRAD_REGISTRATION)
    orphans: list[str] = []
    if "cpu" in devices:
        cpp_sources += [device_registration("cpu")] + _sources(root, *KERNEL_DIRS["cpu"], orphans)
    cuda_sources = _sources(root, *KERNEL_DIRS["cuda"], orphans)
    objects: list[str] = []
    kernel_objects: list[str] = []
    for source in cpp_sources + ([device_registration("cuda")] if cuda_linked else []):
        obj = f"{BUILD_DIR}/obj/{source}.o"
        lines.append(f"build {_q(obj)}: cxx {_q(source)}")
        objects.append(obj)
        if "/registration" not in source:
            kernel_objects.append(obj)
    for source in cuda_sources:
        obj = f"{BUILD_DIR}/{'obj' if cuda_linked else 'cuda_check'}/{source}.o"
        lines.append(f"build {_q(obj)}: nvcc {_q(source)}")
        if cuda_linked:
            objects.append(obj)
    lines.append(f"build {_q(library)}: link {' '.join(map(_q, objects))}")
    pybind_module = None
    if any(op.pybind for op in cpp_ops):
        pybind_module = f"{config.package}/_pybind{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
        lines += _pybind_lines(tools, includes, defines, kernel_objects, pybind_module, lib_dir)
    check_objects = (
        [f"{BUILD_DIR}/cuda_check/{s}.o" for s in cuda_sources] if not cuda_linked else []
    )
    lines.append(f"build check_cuda: phony {' '.join(map(_q, check_objects))}")
    defaults = [library] + ([pybind_module] if pybind_module else [])
    lines.append(f"default {' '.join(map(_q, defaults))}")
    notes = [
        f"not built: {o} (it includes the header of an op whose spec is gone)" for o in orphans
    ]
    return BuildPlan(
        "\n".join(lines) + "\n",
        library,
        cpp_sources,
        cuda_sources,
        cuda_linked,
        pybind_module,
        notes,
    )


def _pybind_lines(
    tools: Toolchain,
    includes: list[str],
    defines: list[str],
    kernel_objects: list[str],
    output: str,
    lib_dir: Path,
) -> list[str]:
    import torch

    python_include = sysconfig.get_paths()["include"]
    flags = [
        f"-isystem {shlex.quote(python_include)}",
        "-DTORCH_EXTENSION_NAME=_pybind",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
    ]
    for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
        value = getattr(torch._C, f"_PYBIND11_{name}", None)
        if value is not None:
            flags.append(f"-DPYBIND11_{name}='\"{value}\"'")
    obj = f"{BUILD_DIR}/obj/{PYBIND_SOURCE}.o"
    return [
        f"build {_q(obj)}: cxx {_q(PYBIND_SOURCE)}",
        f"  cflags = $cflags {' '.join(flags)}",
        f"build {_q(output)}: link {_q(obj)} {' '.join(map(_q, kernel_objects))}",
        # an extension module: libpython's symbols come from the interpreter, so no --no-undefined
        f"  ldflags = -shared -fopenmp -L{shlex.quote(str(lib_dir))} -lc10 -ltorch_cpu -ltorch -ltorch_python",
    ]


def write_ninja(root: Path, plan: BuildPlan) -> Path:
    """Write `build/build.ninja` when its text changed (ninja rebuilds what its rules changed)."""
    files = ProjectFiles(root)
    rel = f"{BUILD_DIR}/build.ninja"
    if files.read_text(rel) != plan.ninja_text:
        files.write_text(rel, plan.ninja_text)
    return files.path(rel)


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
    project: Project, jobs: int = 2, check_cuda: bool = False, verbose: bool = False
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
    tools = find_toolchain()
    plan = plan_build(project, tools, check_cuda)
    ninja_file = write_ninja(root, plan)
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
        generated, run_build(load_project(root), jobs=jobs, check_cuda=check_cuda, verbose=verbose)
    )
