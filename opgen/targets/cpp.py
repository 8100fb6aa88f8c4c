"""The files of `backend = "cpp"` ops: C++ sources, the compiled library and its Python glue.

Note [Build layout] in opgen/build/run.py says how `opgen build` compiles them; it
takes the paths from here.
"""

from __future__ import annotations

from collections.abc import Callable

from ..api.context import spec_path
from ..api.cpp_context import CppFiles
from ..api.decisions import decisions
from ..api.starter import starter
from ..spec.backends import backend_of
from ..spec.config import CONFIG_FILE
from ..spec.model import OpSpec, ProjectConfig
from ..spec.paths import Owner
from . import Artifact, Context, header

__all__ = [
    "CSRC",
    "REGISTRATION",
    "AUTOGRAD_REGISTRATION",
    "PYBIND_SOURCE",
    "KERNEL_DIRS",
    "IMPORTED_DIR",
    "cpp_files",
    "kernel_path",
    "library_file",
    "library_path",
    "loader_path",
    "device_registration",
    "op_header",
    "cpp_op_artifacts",
    "cpp_project_artifacts",
    "generated_cpp_patterns",
]

CSRC = "csrc"
REGISTRATION = f"{CSRC}/registration.cpp"
AUTOGRAD_REGISTRATION = f"{CSRC}/registration_autograd.cpp"
PYBIND_SOURCE = f"{CSRC}/pybind.cpp"
# device -> (folder of its kernels, file suffix)
KERNEL_DIRS = {"cpu": (f"{CSRC}/cpu", ".cpp"), "cuda": (f"{CSRC}/cuda", ".cu")}
# the translation units of `opgen import` that compile a user's file (Note [Keeping kernels])
IMPORTED_DIR = f"{CSRC}/cpu/imported"


def op_header(module: str) -> str:
    """The op's header, project-relative (kernels include it as `../<module>.h`)."""
    return f"{CSRC}/{module}.h"


def device_registration(device: str) -> str:
    return f"{CSRC}/registration_{device}.cpp"


def kernel_path(module: str, device: str) -> str:
    """The user's kernel file of a C++ op on `device`."""
    folder, suffix = KERNEL_DIRS[device]
    return f"{folder}/{module}{suffix}"


def cpp_files(op: OpSpec, config: ProjectConfig) -> CppFiles:
    return CppFiles(
        header=f"{op.module}.h",
        kernels={device: kernel_path(op.module, device) for device in KERNEL_DIRS},
        spec=spec_path(op, config),
    )


def library_file(target: str) -> str:
    """File name of the compiled library: abi3 for the stable ABI, which loads on any later torch."""
    return "_C.abi3.so" if target == "stable" else "_C.so"


def loader_path(package: str) -> str:
    """The generated module that loads the compiled library."""
    return f"{package}/_library.py"


def library_path(config: ProjectConfig) -> str:
    return f"{config.package}/{library_file(config.cpp_target)}"


def cpp_op_artifacts(
    config: ProjectConfig, op: OpSpec, base: Callable[[], Context], fresh: bool = False
) -> list[Artifact]:
    """The op's header and kernel stubs (its Python module is in `targets.python`).

    `fresh`: the op's spec is being created; its kernels start with a starter body where opgen has one.
    """
    source = spec_path(op, config)
    files = cpp_files(op, config)

    def context() -> Context:
        return {**base(), "header": header(source, "//")}

    out = [Artifact(op_header(op.module), "cpp/op.h.j2", Owner.GENERATED, source, context)]
    body = starter(op) if fresh else None

    def kernel_context() -> Context:
        return {**context(), "starter": None, "imported": None}

    cpu, cuda = (body.cpu, body.cuda) if body else (None, None)
    initial = {
        "cpu": (lambda: {**kernel_context(), "starter": list(cpu)}) if cpu else None,
        "cuda": (
            (
                lambda: {
                    **kernel_context(),
                    "starter": {"kernel": list(body.cuda_kernel or ()), "body": list(cuda)},
                }
            )
            if body and cuda
            else None
        ),
    }
    for device in ("cpu", "cuda"):
        if device in op.devices:
            out.append(
                Artifact(
                    files.kernels[device],
                    f"cpp/kernel_{device}.{'cpp' if device == 'cpu' else 'cu'}.j2",
                    Owner.USER,
                    source,
                    kernel_context,
                    initial[device],
                )
            )
    return out


def generated_cpp_patterns(package: str) -> list[str]:
    """The paths every generated C++-side file can have (`*` stands for an op or a device)."""
    return [
        REGISTRATION,
        AUTOGRAD_REGISTRATION,
        PYBIND_SOURCE,
        device_registration("*"),
        op_header("*"),
        loader_path(package),
    ]


def cpp_project_artifacts(
    config: ProjectConfig, ops: tuple[OpSpec, ...], base: Callable[[], Context]
) -> list[Artifact]:
    """The library's registration sources, its loader and setup.py; `base` holds the `cpp` variables."""
    cpp_ops = [op for op in ops if backend_of(op).compiles_cpp]
    items: list[tuple[str, str, Owner, str, dict[str, str]]] = [
        (REGISTRATION, "cpp/registration.cpp.j2", Owner.GENERATED, "//", {}),
        (loader_path(config.package), "package/_library.py.j2", Owner.GENERATED, "#", {}),
        ("setup.py", "package/setup.py.j2", Owner.USER, "#", {}),
    ]
    for device in sorted({d for op in cpp_ops for d in op.devices}):
        items.append(
            (
                device_registration(device),
                "cpp/registration_device.cpp.j2",
                Owner.GENERATED,
                "//",
                {"device": device},
            )
        )
    if any(decisions(op).cpp_mutation_fallbacks for op in cpp_ops):
        items.append(
            (AUTOGRAD_REGISTRATION, "cpp/registration_autograd.cpp.j2", Owner.GENERATED, "//", {})
        )
    if any(op.pybind for op in cpp_ops):
        items.append((PYBIND_SOURCE, "cpp/pybind.cpp.j2", Owner.GENERATED, "//", {}))

    def artifact(
        path: str, template: str, owner: Owner, comment: str, extra: dict[str, str]
    ) -> Artifact:
        return Artifact(
            path,
            template,
            owner,
            CONFIG_FILE,
            lambda: {**base(), "header": header(CONFIG_FILE, comment), **extra},
        )

    return [artifact(*item) for item in items]
