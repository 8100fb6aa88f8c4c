"""The literals of schema defaults, read the way torch's schema parser reads them.

Every rule here was checked against `torch._C.parse_schema` (torch 2.13); see
tests/test_schema_dialect.py, which compares both on real schemas.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

__all__ = [
    "SCALAR_TYPE_NAMES",
    "ENUMS",
    "ENUM_DEFAULTS",
    "INT_ENUM_DEFAULTS",
    "INT64_MIN",
    "INT64_MAX",
    "FLOAT_MAX",
    "BadLiteral",
    "read_string",
    "underflows",
]

# Every dtype name torch accepts as a `ScalarType` default (each is also `torch.<name>`).
SCALAR_TYPE_NAMES = frozenset(
    """bfloat16 bit bits16 bits1x8 bits2x4 bits4x2 bits8 bool cdouble cfloat chalf complex128
    complex32 complex64 double float float16 float32 float4_e2m1fn_x2 float64 float8_e4m3fn
    float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz float8_e8m0fnu half int int1 int16 int2 int3
    int32 int4 int5 int6 int64 int7 int8 long qint32 qint8 quint2x4 quint4x2 quint8 short uint1
    uint16 uint2 uint3 uint32 uint4 uint5 uint6 uint64 uint7 uint8""".split()
)

# torch's Layout and MemoryFormat values in the order of their C++ enums: a default or a value
# is its code there (`torch.<name>` in Python).
ENUMS = {
    "Layout": (
        "strided",
        "sparse_coo",
        "sparse_csr",
        "_mkldnn",
        "sparse_csc",
        "sparse_bsr",
        "sparse_bsc",
        "jagged",
    ),
    "MemoryFormat": ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d"),
}
# The names torch's schema parser reads as their defaults (others only by their code).
ENUM_DEFAULTS = {"Layout": {"strided": 0}, "MemoryFormat": {"contiguous_format": 0}}

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
_OCTAL = re.compile(r"[0-3][0-7][0-7]")
_DBL_MIN = Fraction(1, 2**1022)


class BadLiteral(ValueError):
    """A literal torch cannot read; `offset` is relative to the literal's first character."""

    def __init__(self, message: str, hint: str, offset: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.offset = offset


def read_string(token: str) -> str:
    """The value of a quoted string literal (`"a\\tb"`, `'it\\'s'`), escapes as torch reads them.

    torch reads `\\\\ \\' \\" \\n \\t \\a \\b \\f \\v \\r` and octal escapes of exactly
    three digits, `\\000` to `\\377`, each one byte; Python then reads the bytes as UTF-8
    (`"\\303\\251"` is "é"). It refuses `\\x`, `\\u`, `\\N{...}`, shorter octals (`\\0`)
    and larger ones (`\\400`), and the bytes must be UTF-8, so opgen refuses these too.
    """
    body = token[1:-1]
    out = bytearray()
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
            out += char.encode()
            i += 1
            continue
        escape = body[i + 1]
        if escape in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[escape].encode()
            i += 2
            continue
        octal = _OCTAL.match(body, i + 1)
        if octal:
            out.append(int(octal.group(), 8))
            i = octal.end()
            continue
        if escape in "01234567":
            raise BadLiteral(
                f"string default {token} has an octal escape torch cannot read",
                "torch reads an octal escape as exactly three digits from \\000 to \\377, "
                "one byte each: write \\000, \\101, ...",
                i + 1,
            )
        raise BadLiteral(
            f"string default {token} uses the escape \\{escape}, which torch's schema parser cannot read",
            "write the character itself (UTF-8 is fine) or an octal escape such as \\101; "
            "torch reads only \\\\ \\' \\\" \\n \\t \\a \\b \\f \\v \\r and octal escapes",
            i + 1,
        )
    try:
        return out.decode()
    except UnicodeDecodeError as exc:
        raise BadLiteral(
            f"string default {token} is not UTF-8 once its octal escapes are read "
            f"(byte {out[exc.start]:#o} at {exc.start}): torch stores the bytes, and Python "
            "cannot read the default",
            "escape each byte of the character's UTF-8 encoding (é is \\303\\251), "
            "or write the character itself",
        ) from None


def underflows(number: str) -> bool:
    """Whether torch's parser refuses a nonzero float literal as too small.

    torch reads floats with std::stod, which fails (ERANGE) when the value, rounded to 53
    bits as if the exponent were unbounded, is below the smallest normal double: every
    subnormal, and every nonzero value that rounds to 0.
    """
    exact = abs(Fraction(Decimal(number)))
    if exact == 0 or exact >= _DBL_MIN:
        return False
    exponent = exact.numerator.bit_length() - exact.denominator.bit_length()
    if Fraction(2) ** exponent > exact:
        exponent -= 1  # now 2**exponent <= exact < 2**(exponent + 1)
    significand = exact / Fraction(2) ** (exponent - 52)  # in [2**52, 2**53)
    rounded = round(significand)  # half to even, as the FPU rounds
    return not (exponent == -1023 and rounded == 2**53)  # only that rounds up to 2**-1022
