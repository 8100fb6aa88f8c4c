"""Plan a project's compile: the toolchain found now, and the `build/build.ninja` it gets.

See Note [Build layout] in build/run.py; paths and file names come from `targets.cpp`.
CUDA sources are compiled with the toolkit of Note [CUDA toolchain] and linked
as Note [CUDA build modes] decides; nvcc gets `-ccbin` with the C++ compiler
the rest of the build uses, so host code sees one compiler and one standard
library.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from ..api.cpp import target_version_hex
from ..api.decisions import decisions
from ..errors import Diagnostic, OpgenError
from ..project.load import Project
from ..spec.backends import backend_of
from ..spec.model import OpSpec
from ..targets.cpp import (
    AUTOGRAD_REGISTRATION,
    IMPORTED_DIR,
    KERNEL_DIRS,
    PYBIND_SOURCE,
    REGISTRATION,
    device_registration,
    library_path,
    op_header,
)
from ..write.project_files import ProjectFiles
from .toolchain.cuda import CudaProblem, CudaToolkit, find_cuda, missing_cuda_shim_symbols
from .toolchain.modes import CudaMode, cuda_mode
from .toolchain.pybind import libpython, module_name, pybind_cflags
from .toolchain.settings import UserBuild, ninja_arg, resolve_settings

__all__ = [
    "Toolchain",
    "BuildPlan",
    "CudaMode",
    "find_toolchain",
    "plan_build",
    "write_ninja",
    "BUILD_DIR",
]

BUILD_DIR = "build"
# what still acts inside a shell's double quotes, where nvcc puts its arguments
_SHELL_QUOTED = ("$", "`", "\\", '"')
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


@dataclass(frozen=True)
class Toolchain:
    cxx: str
    ninja: str
    torch_dir: Path
    torch_cuda: str | None  # torch.version.cuda: "12.8", or None for a CPU torch
    cxx11_abi: bool
    cuda: CudaToolkit | None = None
    cuda_problem: CudaProblem | None = None  # why `cuda` is None, when it was looked for


def _torch_cuda_home() -> str | None:
    """torch's own guess at the CUDA folder; importing cpp_extension costs ~0.2 s, so only here."""
    from torch.utils.cpp_extension import CUDA_HOME

    cuda_home: str | None = CUDA_HOME
    return cuda_home


def find_toolchain(cuda: bool = True) -> Toolchain:
    """The compilers, torch and (unless `cuda` is False) the CUDA toolkit of Note [CUDA toolchain]."""
    import torch

    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is not None:
        cxx = shutil.which(cxx) or cxx  # a full path: nvcc's -ccbin gets the same compiler
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
    torch_cuda = torch.version.cuda
    toolkit, problem = None, None
    if cuda:
        try:
            toolkit = find_cuda(
                os.environ,
                torch_cuda,
                torch.cuda.get_arch_list() if torch_cuda else [],
                _torch_cuda_home if torch_cuda else None,
                shutil.which,
            )
        except CudaProblem as exc:
            problem = exc
    return Toolchain(
        cxx=cxx,  # type: ignore[arg-type]
        ninja=ninja,  # type: ignore[arg-type]
        torch_dir=Path(torch.__file__).parent,
        torch_cuda=torch_cuda,
        cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        cuda=toolkit,
        cuda_problem=problem,
    )


@dataclass
class BuildPlan:
    ninja_text: str
    library: str  # project-relative
    cpp_sources: list[str] = field(default_factory=list)
    cuda_sources: list[str] = field(default_factory=list)
    cuda_mode: CudaMode = CudaMode.NONE
    pybind_module: str | None = None
    notes: list[str] = field(default_factory=list)  # true whatever the build's outcome
    # what the build did, said only when it succeeded ("CUDA: linked 2 .cu file(s)")
    outcome_notes: list[str] = field(default_factory=list)
    user: UserBuild = field(default_factory=UserBuild)  # Note [Build settings]

    @property
    def cuda_linked(self) -> bool:
        return self.cuda_mode is CudaMode.LINK


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
        if any(c in rel for c in _SHELL_QUOTED):
            raise OpgenError(
                Diagnostic(
                    path,
                    None,
                    f"the file name holds one of {' '.join(_SHELL_QUOTED)}: nvcc hands file names "
                    "to a shell inside double quotes, where these still act",
                    "rename the file",
                )
            )
        headers = _OP_HEADER.findall(path.read_text(encoding="utf-8", errors="replace"))
        if any(not (root / op_header(h)).is_file() for h in headers):
            orphans.append(rel)
            continue
        found.append(rel)
    return found


def plan_build(
    project: Project, tools: Toolchain, check_cuda: bool = False, cpu_only: bool = False
) -> BuildPlan:
    """The ninja file for this project and toolchain; no side effects."""
    config = project.config
    root = project.root
    stable = config.cpp_target == "stable"
    cpp_ops = [op for op in project.ops if backend_of(op).compiles_cpp]
    devices = {d for op in cpp_ops for d in op.devices}
    include = tools.torch_dir / "include"
    defines, includes = _torch_flags(include, tools.cxx11_abi, stable, config.torch_target_version)
    orphans: list[str] = []
    cpp_sources = _cpp_sources(root, cpp_ops, devices, orphans)
    cuda_sources = _sources(root, *KERNEL_DIRS["cuda"], orphans)
    library = library_path(config)
    user = resolve_settings(project, library)  # Note [Build settings]
    cpp_sources += list(user.cpp_sources)
    cuda_sources += list(user.cuda_sources)
    decision = cuda_mode(
        sources=len(cuda_sources) if "cuda" in devices else 0,
        stable=stable,
        torch_cuda=tools.torch_cuda,
        toolkit=tools.cuda,
        problem=tools.cuda_problem,
        check_cuda=check_cuda,
        cpu_only=cpu_only,
    )
    mode = decision.mode
    cuda = tools.cuda if mode.compiles else None
    if mode is CudaMode.LINK:
        defines.append("-DUSE_CUDA")
    lib_dir = tools.torch_dir / "lib"
    libs = ["-lc10", "-ltorch_cpu", "-ltorch"] + (
        _cuda_libs(tools, stable) if mode is CudaMode.LINK else []
    )
    libs += [ninja_arg(a) for a in user.link]
    user_defines = [ninja_arg(a) for a in user.defines + user.includes]
    nvcc_defines = [d for d in defines if d != "-DUSE_CUDA"]
    if not stable:
        nvcc_defines.append("-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE")
    # nvcc hands host code to the compiler the rest of the build uses (one C++ ABI).
    nvcc_flags = (
        _NVCC_FLAGS + ["-ccbin", shlex.quote(tools.cxx)] + (cuda.gencode_flags() if cuda else [])
    )
    # Note [CUDA on a CPU torch]: the shim's CUDA functions are weak references there.
    weaken: tuple[str, ...] = ()
    if mode is CudaMode.LINK and tools.torch_cuda is None:
        weaken = missing_cuda_shim_symbols(include, lib_dir / "libtorch.so")
    lines = [
        "# @generated by opgen build: the compile of this project; rewritten on every `opgen build`.",
        "ninja_required_version = 1.3",
        f"builddir = {BUILD_DIR}",
        f"cxx = {shlex.quote(tools.cxx)}",
        f"nvcc = {shlex.quote(str(cuda.nvcc.path)) if cuda else 'nvcc'}",
        f"cflags = {' '.join(_CXX_FLAGS + [ninja_arg(a) for a in user.cxx_flags] + defines + user_defines + includes)}",
        f"nvcc_flags = {' '.join(nvcc_flags + [ninja_arg(a) for a in user.cuda_flags] + nvcc_defines + user_defines + includes)}",
        f"ldflags = -shared -fopenmp -Wl,--no-undefined -L{shlex.quote(str(lib_dir))} {' '.join(libs)}",
    ]
    imported = [s for s in cpp_sources if s.startswith(f"{IMPORTED_DIR}/")]
    if imported:  # Note [Python bindings of imported files]
        lines[-1] += " -Wl,--gc-sections"
    if weaken or imported:
        lines.append(f"objcopy = {shlex.quote(_objcopy())}")
    if weaken:
        lines.append("weaken = " + " ".join(f"-W {w}" for w in weaken))
    if imported:
        lines += _imported_lines()
    lines += [
        "",
        "rule cxx",
        "  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = CXX $in",
        "",
        "rule nvcc",
        "  command = $nvcc -MD -MF $out.d $nvcc_flags -c $in -o $out"
        + (" && $objcopy $weaken $out" if weaken else ""),
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = NVCC $in",
        "",
        "rule link",
        "  command = $cxx $in -o $out $ldflags",
        "  description = LINK $out$note",
        "",
    ]
    objects, kernel_objects, cuda_objects = _object_builds(
        lines, cpp_sources, cuda_sources, imported, mode
    )
    lines.append(f"build {_q(library)}: link {' '.join(map(_q, objects))}")
    if mode is CudaMode.LINK:  # the link log names the GPU targets
        lines.append(f"  note = $ (CUDA {cuda.nvcc.version_text}: {cuda.arch_labels})")  # type: ignore[union-attr]
    pybind_module = None
    notes = [
        f"not built: {o} (it includes the header of an op whose spec is gone)" for o in orphans
    ]
    if any(op.pybind for op in cpp_ops):
        pybind_module = f"{config.package}/{module_name()}"
        lines += _pybind_lines(
            kernel_objects, pybind_module, f"-L{shlex.quote(str(lib_dir))} {' '.join(libs)}", notes
        )
    lines.append(f"build check_cuda: phony {' '.join(map(_q, cuda_objects))}")
    defaults = [library] + ([pybind_module] if pybind_module else [])
    lines.append(f"default {' '.join(map(_q, defaults))}")
    outcome = [decision.note] if decision.note and mode.compiles else []
    notes += [decision.note] if decision.note and not mode.compiles else []
    return BuildPlan(
        "\n".join(lines) + "\n",
        library,
        cpp_sources,
        cuda_sources,
        mode,
        pybind_module,
        notes,
        outcome,
        user,
    )


def _torch_flags(
    include: Path, cxx11_abi: bool, stable: bool, target_version: str
) -> tuple[list[str], list[str]]:
    """The defines and include flags a compile against torch's headers needs: its C++ ABI, and
    on the stable target the torch version it targets; the classic target's API headers."""
    defines = [f"-D_GLIBCXX_USE_CXX11_ABI={int(cxx11_abi)}"]
    if stable:
        defines.append(f"-DTORCH_TARGET_VERSION={target_version_hex(target_version)}")
    includes = [f"-isystem {shlex.quote(str(include))}"]
    if not stable:
        includes.append(f"-isystem {shlex.quote(str(include / 'torch/csrc/api/include'))}")
    return defines, includes


def _cpp_sources(
    root: Path, cpp_ops: list[OpSpec], devices: set[str], orphans: list[str]
) -> list[str]:
    """The C++ files compiled: the registrations, and the CPU kernels when an op runs on CPU
    (kernels of removed ops are left out, into `orphans`)."""
    cpp_sources = [REGISTRATION]
    if any(decisions(op).cpp_mutation_fallbacks for op in cpp_ops):  # Note [Written arguments]
        cpp_sources.append(AUTOGRAD_REGISTRATION)
    if "cpu" in devices:
        cpp_sources += [device_registration("cpu")] + _sources(root, *KERNEL_DIRS["cpu"], orphans)
    return cpp_sources


def _object_builds(
    lines: list[str],
    cpp_sources: list[str],
    cuda_sources: list[str],
    imported: list[str],
    mode: CudaMode,
) -> tuple[list[str], list[str], list[str]]:
    """A build statement per object file, appended to `lines`; the objects linked into the
    library, those the pybind module links (no registration), and the CUDA ones."""
    objects: list[str] = []
    kernel_objects: list[str] = []
    for source in cpp_sources + ([device_registration("cuda")] if mode is CudaMode.LINK else []):
        obj = f"{BUILD_DIR}/obj/{source}.o"
        rule = "cxx_imported" if source in imported else "cxx"
        lines.append(f"build {_q(obj)}: {rule} {_q(source)}")
        objects.append(obj)
        if not source.startswith("csrc/registration"):
            kernel_objects.append(obj)
    cuda_objects = []
    for source in cuda_sources if mode.compiles else []:
        obj = f"{BUILD_DIR}/{'obj' if mode is CudaMode.LINK else 'cuda_check'}/{source}.o"
        lines.append(f"build {_q(obj)}: nvcc {_q(source)}")
        cuda_objects.append(obj)
    if mode is CudaMode.LINK:
        objects += cuda_objects
        kernel_objects += cuda_objects
    return objects, kernel_objects, cuda_objects


def _imported_lines() -> list[str]:
    """Note [Python bindings of imported files]
    A file that `opgen import` keeps (Note [Keeping kernels] in adopt/kernels.py)
    was written for its own build, often as a Python module: extension-cpp's
    files include <Python.h> and define a `PyInit__C` stub, older ones
    <torch/extension.h> and a `PYBIND11_MODULE`. opgen's library is loaded by
    torch, not imported, and its ops are registered by the specs, so those
    parts are left out rather than linked against Python: the imported unit
    is compiled with Python's headers (so it compiles as written) and one
    section per function, then its `PyInit_*` symbols are made local
    (objcopy), and the link's --gc-sections drops them with everything only
    they reach (the pybind11 module's functions). What stays must link with
    --no-undefined as any kernel does: a kernel that calls Python fails the
    build, naming the symbol.
    """
    python = sysconfig.get_paths()["include"]
    flags = ["-isystem", shlex.quote(python), "-ffunction-sections", "-fdata-sections"]
    return [
        f"imported_flags = {' '.join(flags)}",
        "",
        "rule cxx_imported",
        "  command = $cxx -MMD -MF $out.d $cflags $imported_flags -c $in -o $out"
        " && $objcopy --wildcard '--localize-symbol=PyInit_*' $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = CXX $in",
    ]


def _cuda_libs(tools: Toolchain, stable: bool) -> list[str]:
    """torch's CUDA libraries (a CUDA torch only) and libcudart, found at run time by rpath."""
    assert tools.cuda is not None
    torch_libs = []
    if tools.torch_cuda is not None:  # the C shim's CUDA functions; c10::cuda for classic
        torch_libs = ["-ltorch_cuda"] if stable else ["-lc10_cuda", "-ltorch_cuda"]
    cudart = shlex.quote(str(tools.cuda.cudart_dir))
    return torch_libs + [f"-L{cudart}", tools.cuda.cudart_link, f"-Wl,-rpath,{cudart}"]


def _objcopy() -> str:
    found = shutil.which("objcopy")
    if found is None:
        raise OpgenError(
            Diagnostic(
                None,
                None,
                "objcopy was not found (needed to link CUDA on a CPU torch)",
                "install binutils",
            )
        )
    return found


def _pybind_lines(kernel_objects: list[str], output: str, libs: str, notes: list[str]) -> list[str]:
    """Compile csrc/pybind.cpp and link it with every kernel object: Note [pybind link]."""
    obj = f"{BUILD_DIR}/obj/{PYBIND_SOURCE}.o"
    inputs = " ".join(map(_q, [obj] + kernel_objects))
    ldflags = f"-shared -fopenmp {libs} -ltorch_python"
    lines = [
        f"build {_q(obj)}: cxx {_q(PYBIND_SOURCE)}",
        f"  cflags = $cflags {' '.join(pybind_cflags())}",
    ]
    python = libpython()
    check = ""
    if python is None:
        notes.append(
            f"{output}: linked without the undefined-symbol check (no shared libpython found)"
        )
    else:
        check = f"{BUILD_DIR}/link_check/{Path(output).name}"
        lines += [
            f"build {_q(check)}: link {inputs}",
            f"  ldflags = {ldflags} -Wl,--no-undefined {shlex.quote(str(python))}",
            "  note = $ (check: every symbol but Python's resolves)",
        ]
        check = f" | {_q(check)}"
    return lines + [f"build {_q(output)}: link {inputs}{check}", f"  ldflags = {ldflags}"]


def write_ninja(root: Path, plan: BuildPlan) -> Path:
    """Write `build/build.ninja` when its text changed (ninja rebuilds what its rules changed)."""
    files = ProjectFiles(root)
    rel = f"{BUILD_DIR}/build.ninja"
    if files.read_text(rel) != plan.ninja_text:
        files.write_text(rel, plan.ninja_text)
    return files.path(rel)
