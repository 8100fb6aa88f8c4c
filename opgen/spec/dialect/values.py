"""The literals of schema defaults, read the way torch's schema parser reads them.

Every rule here was checked against `torch._C.parse_schema` (torch 2.13); see
tests/test_schema_dialect.py, which compares both on real schemas.
"""

from __future__ import annotations

import re

__all__ = [
    "SCALAR_TYPE_NAMES",
    "INT_ENUM_DEFAULTS",
    "INT64_MIN",
    "INT64_MAX",
    "FLOAT_MAX",
    "BadLiteral",
    "read_string",
]

# Every dtype name torch accepts as a `ScalarType` default (each is also `torch.<name>`).
SCALAR_TYPE_NAMES = frozenset(
    """bfloat16 bit bits16 bits1x8 bits2x4 bits4x2 bits8 bool cdouble cfloat chalf complex128
    complex32 complex64 double float float16 float32 float4_e2m1fn_x2 float64 float8_e4m3fn
    float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz float8_e8m0fnu half int int1 int16 int2 int3
    int32 int4 int5 int6 int64 int7 int8 long qint32 qint8 quint2x4 quint4x2 quint8 short uint1
    uint16 uint2 uint3 uint32 uint4 uint5 uint6 uint64 uint7 uint8""".split()
)

# The one enum name aten writes as an `int` default (`int reduction=Mean`), and its value.
INT_ENUM_DEFAULTS = {"Mean": 1}

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT_MAX = 1.7976931348623157e308

_SIMPLE_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "n": "\n",
    "t": "\t",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "r": "\r",
}
_OCTAL = re.compile(r"[0-7]{1,3}")


class BadLiteral(ValueError):
    """A literal torch cannot read; `offset` is relative to the literal's first character."""

    def __init__(self, message: str, hint: str, offset: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.offset = offset


def read_string(token: str) -> str:
    """The value of a quoted string literal (`"a\\tb"`, `'it\\'s'`), escapes as torch reads them.

    torch reads `\\\\ \\' \\" \\n \\t \\a \\b \\f \\v \\r` and octal `\\0`..`\\777`; it refuses
    `\\x`, `\\u` and `\\N{...}` (and misreads some of them), so opgen refuses them too.
    """
    body = token[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if ord(char) < 32 or char == "\x7f":
            raise BadLiteral(
                f"string default {token} contains the control character {char!r}",
                "write it as an escape inside the quotes, e.g. \\n or \\t",
                i + 1,
            )
        if char != "\\":
            out.append(char)
            i += 1
            continue
        escape = body[i + 1]
        if escape in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[escape])
            i += 2
            continue
        octal = _OCTAL.match(body, i + 1)
        if octal:
            out.append(chr(int(octal.group(), 8)))
            i = octal.end()
            continue
        raise BadLiteral(
            f"string default {token} uses the escape \\{escape}, which torch's schema parser cannot read",
            "write the character itself (UTF-8 is fine) or an octal escape such as \\101; "
            "torch reads only \\\\ \\' \\\" \\n \\t \\a \\b \\f \\v \\r and octal escapes",
            i + 1,
        )
    return "".join(out)
