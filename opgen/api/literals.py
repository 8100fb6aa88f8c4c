"""Python literals as black writes them (Note [Black-stable output] in pyexpr.py)."""

from __future__ import annotations

from typing import Any

__all__ = ["string", "literal", "number"]


def string(value: str | bytes) -> str:
    """A string literal as black writes it: double quotes unless single ones need fewer escapes."""
    prefix, chars = ("b", [chr(c) for c in value]) if isinstance(value, bytes) else ("", value)
    bodies = {quote: _escaped(chars, quote, bytes_=bool(prefix)) for quote in ('"', "'")}
    quote = "'" if bodies["'"].count("\\") < bodies['"'].count("\\") else '"'
    return f"{prefix}{quote}{bodies[quote]}{quote}"


def _escaped(chars: Any, quote: str, bytes_: bool) -> str:
    out = []
    for char in chars:
        if char == "\\" or char == quote:
            out.append("\\" + char)
        elif char in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[char])
        elif bytes_ and not 32 <= ord(char) < 127:
            out.append(f"\\x{ord(char):02x}")
        elif not char.isprintable():
            code = ord(char)
            out.append(
                f"\\x{code:02x}"
                if code < 0x100
                else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
            )
        else:
            out.append(char)
    return "".join(out)


def literal(value: Any) -> str:
    """`repr` of a literal value (str, number, bool, None, and tuples, lists, dicts of them), black's way."""
    if isinstance(value, (str, bytes)):
        return string(value)
    if isinstance(value, tuple):
        items = [literal(v) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, list):
        return f"[{', '.join(literal(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return number(repr(value))
    return repr(value)


def number(text: str) -> str:
    """A numeric literal spelled as black spells it: lower case, upper-case hex digits, `0.5` not `.5`."""
    text = text.lower()
    if text.startswith(("0x",)):
        return "0x" + text[2:].upper()
    if text.startswith(("0o", "0b")):
        return text
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{_decimal(mantissa)}e{exponent.lstrip('+')}"
    if text.endswith("j"):
        return _decimal(text[:-1]) + "j"
    return _decimal(text)


def _decimal(text: str) -> str:
    if "." not in text:
        return text
    whole, fraction = text.split(".")
    return f"{whole or 0}.{fraction or 0}"
