"""The files of `backend = "cpp"` ops: C++ sources, the compiled library and its Python glue.

Note [Build layout] in opgen/build.py says how `opgen build` compiles them; it
takes the paths from here.
"""

from __future__ import annotations

from collections.abc import Callable

from ..api.context import spec_path
from ..api.cpp_context import CppFiles
from ..api.fastpath import refuses_backward_in_cpp
from ..spec.config import CONFIG_FILE
from ..spec.model import OpSpec, ProjectConfig
from . import GENERATED, USER, Artifact, Context, header

__all__ = [
    "CSRC",
    "REGISTRATION",
    "AUTOGRAD_REGISTRATION",
    "PYBIND_SOURCE",
    "KERNEL_DIRS",
    "cpp_files",
    "library_file",
    "library_path",
    "device_registration",
    "op_header",
    "cpp_op_artifacts",
    "cpp_project_artifacts",
]

CSRC = "csrc"
REGISTRATION = f"{CSRC}/registration.cpp"
AUTOGRAD_REGISTRATION = f"{CSRC}/registration_autograd.cpp"
PYBIND_SOURCE = f"{CSRC}/pybind.cpp"
# device -> (folder of its kernels, file suffix)
KERNEL_DIRS = {"cpu": (f"{CSRC}/cpu", ".cpp"), "cuda": (f"{CSRC}/cuda", ".cu")}


def op_header(module: str) -> str:
    """The op's header, project-relative (kernels include it as `../<module>.h`)."""
    return f"{CSRC}/{module}.h"


def device_registration(device: str) -> str:
    return f"{CSRC}/registration_{device}.cpp"


def cpp_files(op: OpSpec) -> CppFiles:
    kernels = {device: f"{folder}/{op.module}{suffix}" for device, (folder, suffix) in KERNEL_DIRS.items()}
    return CppFiles(header=f"{op.module}.h", kernels=kernels)


def library_file(target: str) -> str:
    """File name of the compiled library: abi3 for the stable ABI, which loads on any later torch."""
    return "_C.abi3.so" if target == "stable" else "_C.so"


def library_path(config: ProjectConfig) -> str:
    return f"{config.package}/{library_file(config.cpp_target)}"


def cpp_op_artifacts(config: ProjectConfig, op: OpSpec, base: Callable[[], Context]) -> list[Artifact]:
    """The op's header and kernel stubs (its Python module is in `targets.python`)."""
    source = spec_path(op, config)
    files = cpp_files(op)

    def add(path: str, template: str, owner: str) -> Artifact:
        return Artifact(path, template, owner, source, lambda: {**base(), "header": header(source, "//")})

    out = [add(op_header(op.module), "cpp/op.h.j2", GENERATED)]
    if "cpu" in op.devices:
        out.append(add(files.kernels["cpu"], "cpp/kernel_cpu.cpp.j2", USER))
    if "cuda" in op.devices:
        out.append(add(files.kernels["cuda"], "cpp/kernel_cuda.cu.j2", USER))
    return out


def cpp_project_artifacts(config: ProjectConfig, ops: tuple[OpSpec, ...], base: Callable[[], Context]) -> list[Artifact]:
    """The library's registration sources, its loader and setup.py; `base` holds the `cpp` variables."""
    cpp_ops = [op for op in ops if op.backend == "cpp"]
    items = [
        (REGISTRATION, "cpp/registration.cpp.j2", GENERATED, "//", {}),
        (f"{config.package}/_library.py", "package/_library.py.j2", GENERATED, "#", {}),
        ("setup.py", "package/setup.py.j2", USER, "#", {}),
    ]
    for device in sorted({d for op in cpp_ops for d in op.devices}):
        items.append((device_registration(device), "cpp/registration_device.cpp.j2", GENERATED, "//", {"device": device}))
    if any(refuses_backward_in_cpp(op) for op in cpp_ops):
        items.append((AUTOGRAD_REGISTRATION, "cpp/registration_autograd.cpp.j2", GENERATED, "//", {}))
    if any(op.pybind for op in cpp_ops):
        items.append((PYBIND_SOURCE, "cpp/pybind.cpp.j2", GENERATED, "//", {}))

    def artifact(path: str, template: str, owner: str, comment: str, extra: dict[str, str]) -> Artifact:
        return Artifact(path, template, owner, CONFIG_FILE, lambda: {**base(), "header": header(CONFIG_FILE, comment), **extra})

    return [artifact(*item) for item in items]
