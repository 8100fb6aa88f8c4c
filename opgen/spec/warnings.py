"""Warnings about a valid spec: things that work but cost the user later.

Warnings never stop a run and never change what the user wrote; generate and
`opgen new` print them with the file, the line and what to change.
"""

from __future__ import annotations

import ast

from ..errors import Diagnostic
from .model import OpSpec

__all__ = ["spec_warnings", "SIZE_INT_TYPES", "int_arguments", "size_arguments"]

# Schema types that torch.compile specializes on (SymInt and SymInt[] it keeps symbolic).
SIZE_INT_TYPES = ("int", "int?", "int[]", "int[]?")
_SIZE_TYPES = (*SIZE_INT_TYPES, "SymInt", "SymInt?", "SymInt[]", "SymInt[]?")
_TENSOR_RETURNS = ("Tensor", "Tensor?", "Tensor[]")


def int_arguments(op: OpSpec) -> list[str]:
    """The op's `int` and `int[]` arguments, in schema order."""
    return [a.name for a in op.args if a.type.family in SIZE_INT_TYPES]


def size_arguments(op: OpSpec) -> list[str]:
    """The integer arguments the fake kernel's output shapes read (`[fake] expr`), in schema order.

    The expression of a number return (`-> (Tensor, int)`) sets a value, not a shape: the
    integers it alone reads are not sizes.
    """
    texts = op.fake.expr
    if len(texts) == len(op.returns):
        texts = tuple(
            t for t, r in zip(texts, op.returns, strict=True) if r.family in _TENSOR_RETURNS
        )
    used = {
        node.id
        for text in texts
        for node in ast.walk(ast.parse(text, mode="eval"))
        if isinstance(node, ast.Name)
    }
    return [a.name for a in op.args if a.name in used and a.type.family in _SIZE_TYPES]


def _symint(type_text: str) -> str:
    return type_text.replace("int", "SymInt", 1)


def spec_warnings(op: OpSpec) -> list[Diagnostic]:
    """Every warning about `op`: for now, `int` arguments that set an output size."""
    ints = set(int_arguments(op))
    used = set(size_arguments(op))
    warnings = []
    line = op.lines.get("fake.expr", op.lines.get("fake", 1))
    for arg in op.args:
        if arg.name in ints and arg.name in used:
            warnings.append(
                Diagnostic(
                    op.path,
                    line,
                    f"argument {arg.name!r} is an {arg.type.spelling} and sets the output shape in [fake] expr: "
                    "torch.compile(dynamic=True) compiles the op again for every new value "
                    "(it specializes on ints), and torch.export cannot keep that size dynamic",
                    f"declare it {_symint(arg.type.spelling)} {arg.name} in the schema; the kernel keeps "
                    "receiving plain integers (the generated dynamic-shape test checks it)",
                    level="warning",
                )
            )
    return warnings
