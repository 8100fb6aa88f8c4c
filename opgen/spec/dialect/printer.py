"""Print a schema in the dialect: one space after each comma, defaults written from their values.

The printed text reads back (in torch and in `parser.parse`) to the same names,
types, alias annotations, defaults and keyword-only markers; only layout and
the spelling of defaults change (`float f = 0` prints as `float f=0.0`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from .types import Default, SchemaType

__all__ = ["format_default", "format_param", "format_schema"]

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a"}
_ESCAPES.update({"\b": "\\b", "\f": "\\f", "\v": "\\v"})


class _Parameter(Protocol):
    @property
    def name(self) -> str | None: ...
    @property
    def type(self) -> SchemaType: ...


class _Argument(_Parameter, Protocol):
    @property
    def default(self) -> Default | None: ...
    @property
    def kwarg_only(self) -> bool: ...


def _string(value: str) -> str:
    out = []
    for char in value:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 32 or char == "\x7f":
            out.append(f"\\{ord(char):03o}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def format_default(default: Default, kind: SchemaType) -> str:
    """The default as torch reads it back with the same value."""
    value = default.value
    if value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) if not isinstance(v, float) else repr(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return value if kind.element == "ScalarType" else _string(value)
    return str(value)


def format_param(param: _Argument) -> str:
    text = f"{param.type} {param.name}"
    if param.default is not None:
        text += "=" + format_default(param.default, param.type)
    return text


def _format_return(ret: _Parameter) -> str:
    return f"{ret.type} {ret.name}" if ret.name else str(ret.type)


def format_schema(args: Iterable[_Argument], returns: Iterable[_Parameter]) -> str:
    """`(Tensor x, *, float alpha=1.0) -> Tensor`: the schema after the op name."""
    parts: list[str] = []
    for arg in args:
        if arg.kwarg_only and "*" not in parts:
            parts.append("*")
        parts.append(format_param(arg))
    rets = [_format_return(r) for r in returns]
    single = len(rets) == 1
    ret_text = rets[0] if single else f"({', '.join(rets)})"
    return f"({', '.join(parts)}) -> {ret_text}"
