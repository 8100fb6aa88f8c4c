"""The backend table: what each backend is, read by every stage instead of comparing names.

Note [Backend table]
Each `Backend` has one `BackendTraits` record here, plain data that every
stage may read (spec validation, api, targets, build): its name in messages,
the template of its generated module, whether its kernels are Python files
in `<package>/kernels/`, whether `opgen build` compiles them into the C++
library, how it registers, which devices a new op starts with. Code asks the
record (`backend_of(op).compiles_cpp`), never `op.backend == "cpp"`, so that
a new backend cannot fall down another's path.

What belongs to a higher stage is registered there, in a table keyed by
`Backend` that a test proves exhaustive: the kernel files of each backend
(`KERNEL_ARTIFACTS` in targets/project.py, which also pick its starter
bodies) and how `opgen import` keeps its kernels (`KERNEL_KEEPERS` in
adopt/kernels.py). A lookup of a backend missing from a table raises
`UnknownBackendError`: a spec cannot get there (validation refuses an unknown
`backend` at its line), so it is opgen's own bug, named as such.
docs/development.md ("Adding a backend") lists the files a new one touches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from .model import Backend, Registration

__all__ = [
    "BackendTraits",
    "BACKEND_TABLE",
    "DEFAULT_BACKEND",
    "UnknownBackendError",
    "backend_of",
    "backend_traits",
    "for_backend",
    "registers_custom_op",
]

# the backend of a project whose opgen.toml names none, and of `opgen new`'s first op
DEFAULT_BACKEND = Backend.PYTHON


@dataclass(frozen=True)
class BackendTraits:
    """What one backend is: plain data every stage may read (Note [Backend table])."""

    label: str  # how messages name its ops: "a C++ op"
    op_template: str  # the template of its generated module, `_generated/<op>.py`
    kernel_package: bool  # its kernels are Python modules in `<package>/kernels/`
    compiles_cpp: bool  # `opgen build` compiles its kernels into the project's C++ library
    chooses_registration: bool  # the spec's `registration` (custom_op or library) applies
    always_custom_op: bool  # registers through torch.library.custom_op whatever the spec says
    uses_triton: bool  # its kernels are Triton's: the `[triton]` table, Triton's interpreter
    default_devices: tuple[str, ...]  # the devices of a new op (`opgen new` without --devices)


BACKEND_TABLE: Mapping[Backend, BackendTraits] = {
    Backend.PYTHON: BackendTraits(
        label="Python",
        op_template="python/op.py.j2",
        kernel_package=True,
        compiles_cpp=False,
        chooses_registration=True,
        always_custom_op=False,
        uses_triton=False,
        default_devices=("cpu",),
    ),
    Backend.CPP: BackendTraits(
        label="C++",
        op_template="python/cpp_op.py.j2",
        kernel_package=False,
        compiles_cpp=True,
        chooses_registration=False,
        always_custom_op=False,
        uses_triton=False,
        default_devices=("cpu",),
    ),
    Backend.TRITON: BackendTraits(
        label="Triton",
        op_template="python/triton_op.py.j2",
        kernel_package=True,
        compiles_cpp=False,
        chooses_registration=False,
        always_custom_op=True,  # torch.library.triton_op is a custom_op
        uses_triton=True,
        # tested on CUDA, and on CPU under Triton's interpreter
        default_devices=("cpu", "cuda"),
    ),
}


class UnknownBackendError(LookupError):
    """A backend missing from one of opgen's backend tables: a bug of opgen, not of a spec."""


_T = TypeVar("_T")


def for_backend(table: Mapping[Backend, _T], backend: str, what: str) -> _T:
    """`table[backend]`, or UnknownBackendError naming the backend and the table to extend."""
    try:
        return table[Backend(backend)]
    except (KeyError, ValueError):
        raise UnknownBackendError(
            f"internal error: backend {str(backend)!r} has no {what}: register it in the backend "
            "tables (Note [Backend table] in opgen/spec/backends.py)"
        ) from None


def backend_traits(backend: str) -> BackendTraits:
    """The record of `backend` (Note [Backend table])."""
    return for_backend(BACKEND_TABLE, backend, "record in BACKEND_TABLE")


class _HasBackend(Protocol):
    @property
    def backend(self) -> str: ...


def backend_of(op: _HasBackend) -> BackendTraits:
    """The record of an op's backend (an OpSpec, or anything else with a `backend`)."""
    return backend_traits(op.backend)


class _Registered(_HasBackend, Protocol):
    @property
    def registration(self) -> str: ...


def registers_custom_op(op: _Registered) -> bool:
    """Whether the op is registered through torch.library.custom_op (triton_op is one)."""
    traits = backend_of(op)
    return traits.always_custom_op or (
        traits.chooses_registration and op.registration == Registration.CUSTOM_OP
    )
