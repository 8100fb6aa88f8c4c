"""Warnings about a valid spec: things that work but cost the user later.

Warnings never stop a run and never change what the user wrote; generate and
`opgen new` print them with the file, the line and what to change.
"""

from __future__ import annotations

import ast

from ..errors import Diagnostic
from .model import OpSpec
from .sharding import unkeyed_arguments

__all__ = [
    "spec_warnings",
    "sharding_key_warning",
    "keyword_only_formulas_warning",
    "SIZE_INT_TYPES",
    "int_arguments",
    "size_arguments",
    "size_number_returns",
]

# Schema types that torch.compile specializes on (SymInt and SymInt[] it keeps symbolic).
SIZE_INT_TYPES = ("int", "int?", "int[]", "int[]?")
_SIZE_TYPES = (*SIZE_INT_TYPES, "SymInt", "SymInt?", "SymInt[]", "SymInt[]?")
_TENSOR_RETURNS = ("Tensor", "Tensor?", "Tensor[]")
# A number return computed from these makes torch.compile specialize on the size (a comparison,
# `x.numel() > 0`, guards on the size without fixing it).
_NUMBER_RETURNS = ("int", "float", "int[]", "float[]")
_SIZE_READS = frozenset({"shape", "size", "numel", "nelement"})


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


def size_number_returns(op: OpSpec) -> list[tuple[str, str]]:
    """(label, type) of each `int` or `float` return (or list of them) whose `[fake] expr` reads a
    tensor's size:
    torch.compile specializes on such a return, and so compiles the op again for every size."""
    texts = op.fake.expr
    if len(texts) != len(op.returns):
        return []
    found = []
    for index, (text, ret) in enumerate(zip(texts, op.returns, strict=True)):
        if ret.family not in _NUMBER_RETURNS:
            continue
        tree = ast.parse(text, mode="eval")
        if any(isinstance(n, ast.Attribute) and n.attr in _SIZE_READS for n in ast.walk(tree)):
            found.append((f"return {ret.name or index}", ret.family))
    return found


def _symint(type_text: str) -> str:
    return type_text.replace("int", "SymInt", 1)


def sharding_key_warning(op: OpSpec, private_torch: tuple[str, ...]) -> Diagnostic | None:
    """A sharding decision that depends on arguments DTensor's cache key leaves out, unless the
    project opts into widening the key (Note [Private torch checks])."""
    key = unkeyed_arguments(op)
    if key is None or "sharding_cache_key" in private_torch:
        return None
    names = ", ".join(key.unkeyed)
    return Diagnostic(
        op.path,
        op.lines.get("sharding", 1),
        f"the sharding decision depends on {names}, which DTensor's sharding cache does not key "
        f"on (torch 2.13): DTensor calls that differ only in {names} get the first one's decision",
        "call the op on DTensors that differ in shape too, or opt in with [options] "
        'private_torch = ["sharding_cache_key"] in opgen.toml (it uses private DTensor names)',
        level="warning",
    )


def keyword_only_formulas_warning(op: OpSpec, private_torch: tuple[str, ...]) -> Diagnostic | None:
    """Formulas of an op that takes keyword-only tensors reach only its typed wrapper
    (Note [Keyword-only tensors] in opgen/api/decisions.py), unless the project gives the
    raw handle its Function (Note [Private torch checks])."""
    keyword_only = [a.name for a in op.args if a.differentiable and a.kwarg_only]
    formulas = op.grads or op.jvp.present
    if not keyword_only or not formulas or "raw_handle_transforms" in private_torch:
        return None
    names = ", ".join(keyword_only)
    return Diagnostic(
        op.path,
        op.lines.get("grad", op.lines.get("jvp", 1)),
        f"{op.qualname} takes keyword-only tensors ({names}), and torch.library.register_autograd "
        "refuses those (torch 2.13): only the typed wrapper differentiates the op, eagerly; "
        f"torch.ops.{op.qualname.replace('::', '.')} and torch.compile get no gradients from "
        "its formulas, and its generated gradient tests through the raw op fail",
        f"make {names} positional (move them before the `*` in the schema), or opt in with "
        '[options] private_torch = ["raw_handle_transforms"] in opgen.toml',
        level="warning",
    )


def spec_warnings(op: OpSpec) -> list[Diagnostic]:
    """Every warning about `op`: `int` arguments that set an output size, and number returns
    computed from a size."""
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
    for label, family in size_number_returns(op):
        fix = (
            f"declare it {_symint(family)} in the schema; the kernel keeps returning plain integers"
            if family.startswith("int")
            else "the schema language has no SymFloat: return the size as SymInt, or the value "
            "as a tensor"
        )
        warnings.append(
            Diagnostic(
                op.path,
                line,
                f"{label} is {'an' if family.startswith('int') else 'a'} {family} computed from a size in "
                "[fake] expr: torch.compile specializes on it and compiles the op again for every "
                "new size, and torch.export cannot keep that size dynamic",
                fix,
                level="warning",
            )
        )
    return warnings
