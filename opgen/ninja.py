"""Plan a project's compile: the toolchain found now, and the `build/build.ninja` it gets.

See Note [Build layout] in build.py; paths and file names come from `targets.cpp`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from .api.cpp import target_version_hex
from .api.fastpath import cpp_autograd
from .errors import Diagnostic, OpgenError
from .fs import ProjectFiles
from .project import Project
from .targets.cpp import (
    AUTOGRAD_REGISTRATION,
    KERNEL_DIRS,
    PYBIND_SOURCE,
    REGISTRATION,
    device_registration,
    library_path,
    op_header,
)

__all__ = ["Toolchain", "BuildPlan", "find_toolchain", "plan_build", "write_ninja", "BUILD_DIR"]

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
    if any(cpp_autograd(op) for op in cpp_ops):  # Note [Backward refusal]
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
