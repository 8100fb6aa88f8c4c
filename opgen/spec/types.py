"""Schema types opgen understands, and how a default or sample value is checked."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

__all__ = ["SUPPORTED_ARG_TYPES", "SUPPORTED_RETURN_TYPES", "default_problem", "DTYPES"]

_BASE = ["Tensor", "int", "SymInt", "float", "bool", "str", "Scalar", "ScalarType", "Device"]
_LISTS = ["Tensor[]", "int[]", "SymInt[]", "float[]", "bool[]"]
SUPPORTED_ARG_TYPES = frozenset(
    _BASE + _LISTS + [t + "?" for t in _BASE + _LISTS if t != "Tensor[]"]
)
SUPPORTED_RETURN_TYPES = frozenset(["Tensor", "Tensor[]"])

DTYPES = "float32 float64 float16 bfloat16 int8 int16 int32 int64 uint8 bool complex64 complex128".split()

_INT = re.compile(r"-?\d+\Z")
_FLOAT = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z|-?inf\Z|nan\Z")
_STR = re.compile(r"""("([^"\\]|\\.)*"|'([^'\\]|\\.)*')\Z""")


def _is_str_literal(text: str) -> bool:
    """One plain quoted Python string (it is copied into generated Python and C++)."""
    if not _STR.match(text) or any(ord(c) < 32 or c == "\x7f" for c in text):
        return False
    try:
        return isinstance(ast.literal_eval(text), str)
    except (ValueError, SyntaxError):
        return False


def normalize_type(text: str) -> str:
    """Drop fixed list sizes (`int[2]` -> `int[]`) so one table covers them."""
    return re.sub(r"\[\d+\]", "[]", text)


def default_problem(type_text: str, default: str) -> str | None:
    """Why `default` is not a valid default for `type_text`, or None."""
    type_text = normalize_type(type_text)
    optional = type_text.endswith("?")
    base = type_text[:-1] if optional else type_text
    if default == "None":
        return None if optional else f"default None needs an optional type ({base}?)"
    if base.endswith("[]"):
        elem = base[:-2]
        body = default.strip()
        if elem in ("int", "SymInt") and _INT.match(body):
            return None  # a single int broadcasts, as in aten
        if not (body.startswith("[") and body.endswith("]")):
            return f"default {default} of {type_text} must be a list such as [1, 2]"
        items = [i.strip() for i in body[1:-1].split(",") if i.strip()]
        for item in items:
            problem = default_problem(elem, item)
            if problem:
                return problem
        return None
    checks: dict[str, Callable[[str], object]] = {
        "int": _INT.match,
        "SymInt": _INT.match,
        "float": lambda d: _FLOAT.match(d) or _INT.match(d),
        "Scalar": lambda d: _FLOAT.match(d) or _INT.match(d) or d in ("True", "False"),
        "bool": lambda d: d in ("True", "False"),
        "str": _is_str_literal,
    }
    check = checks.get(base)
    if check is None:
        return f"defaults for {type_text} arguments are not supported"
    if not check(default):
        return f"default {default} is not a valid {base}"
    return None
