"""The schema types opgen generates code for (torch reads more: see `dialect/`)."""

from __future__ import annotations

from .dialect.types import SchemaType, TypeKind

__all__ = [
    "ARG_FAMILIES",
    "RETURN_FAMILIES",
    "TUPLE_MEMBERS",
    "DTYPES",
    "arg_type_supported",
    "supported_arg_types",
]

_BASE = [
    "Tensor",
    "int",
    "SymInt",
    "float",
    "bool",
    "str",
    "Scalar",
    "ScalarType",
    "Layout",
    "MemoryFormat",
    "Device",
]
_LISTS = ["Tensor[]", "Tensor?[]", "int[]", "SymInt[]", "float[]", "bool[]"]
# argument types as `SchemaType.family` spells them (list sizes dropped)
ARG_FAMILIES = frozenset(_BASE + _LISTS + [t + "?" for t in _BASE + _LISTS if t != "Tensor?[]"])
# members of tuple arguments such as `(int, int)? group_shape=None`
TUPLE_MEMBERS = frozenset(["int", "SymInt", "float", "bool"])
RETURN_FAMILIES = frozenset(
    [
        "Tensor",
        "Tensor?",
        "Tensor[]",
        "int",
        "SymInt",
        "float",
        "bool",
        "str",
        "str[]",
        "int[]",
        "SymInt[]",
        "float[]",
        "bool[]",
        "ScalarType",
    ]
)

DTYPES = "float32 float64 float16 bfloat16 int8 int16 int32 int64 uint8 bool complex64 complex128".split()


def arg_type_supported(kind: SchemaType) -> bool:
    if kind.family in ARG_FAMILIES:
        return True
    inner = kind.unwrapped
    return inner.kind is TypeKind.TUPLE and all(
        m.kind is TypeKind.BASE and m.name in TUPLE_MEMBERS for m in inner.items
    )


def supported_arg_types() -> str:
    """The supported argument types, for hints."""
    return "Tensor, int, SymInt, float, bool, str, Scalar, ScalarType, Layout, MemoryFormat, Device, their lists ([]: of Tensor, Tensor?, int, SymInt, float, bool), optionals (?) and tuples of numbers such as (int, int)?"
