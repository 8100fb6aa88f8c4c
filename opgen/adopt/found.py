"""What `opgen import` found in an existing extension: ops, their kernels, and notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Kernel", "FoundOp", "CppFunction", "PyFunction", "Found"]


@dataclass(frozen=True)
class Kernel:
    """A user function registered as an op's implementation on a device ("cpu", "cuda")."""

    function: str  # as the registration names it: "mymuladd_cpu", "ns::f", a Python name
    device: str
    path: Path
    line: int


@dataclass(frozen=True)
class PyFunction:
    """A Python function found in the source: where it is and its text, decorators left out."""

    name: str
    params: tuple[str, ...]
    source: str  # the `def` statement, dedented, without decorators
    imports: tuple[str, ...]  # the module's top-level import statements
    path: Path
    line: int
    helpers: tuple[str, ...] = ()  # names it uses that its module defines (not imports)


@dataclass
class FoundOp:
    """One op: its name and schema exactly as the source wrote them, where, and its kernels."""

    namespace: str
    name: str  # with `.overload` when it has one
    schema: str  # "(Tensor a, ...) -> Tensor", verbatim
    path: Path
    line: int
    language: str  # "cpp", "python" or "triton" (a Python op launching a Triton kernel)
    kernels: list[Kernel] = field(default_factory=list)
    python_kernels: dict[str, PyFunction] = field(default_factory=dict)  # device -> function
    fake: PyFunction | None = None
    autograd: list[PyFunction] = field(default_factory=list)  # backward, setup_context
    notes: list[str] = field(default_factory=list)

    @property
    def qualname(self) -> str:
        return f"{self.namespace}::{self.name}"


@dataclass(frozen=True)
class CppFunction:
    """A function defined at namespace scope in a C++ file: what a forward declaration needs."""

    name: str
    namespace: str  # "a::b", "" for the global one
    declaration: str  # the definition's text up to its closing parenthesis
    linkable: bool  # False when static or in an anonymous namespace: other files cannot call it
    path: Path
    line: int

    @property
    def qualname(self) -> str:
        return f"{self.namespace}::{self.name}" if self.namespace else self.name


@dataclass
class Found:
    """Everything read from the user's files."""

    ops: list[FoundOp] = field(default_factory=list)
    functions: list[CppFunction] = field(default_factory=list)
    target: str | None = None  # "classic" or "stable" when C++ was found
    # Python-binding parts of C++ files (PyInit_* definitions, PYBIND11_MODULE blocks): file,
    # line, name; left out of opgen's library (Note [Python bindings of imported files])
    python_bindings: list[tuple[Path, int, str]] = field(default_factory=list)
