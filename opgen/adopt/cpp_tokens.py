"""A C++ tokenizer just good enough to read registration code: not a C++ parser.

It knows what can hide a `m.def(` or a quote from a naive search: comments,
string and character literals (escapes, encoding prefixes, raw strings
`R"delim(...)delim"`) and preprocessor lines (with their continuations). Every
token keeps the line it starts on, so that what `opgen import` reports names
file:line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Token", "tokenize", "TokenizeError"]

_RAW_OPEN = re.compile(r'(?:u8|u|U|L)?R"([^()\\\s"]{0,16})\(')
_STRING_OPEN = re.compile(r'(?:u8|u|U|L)?"')
_CHAR_OPEN = re.compile(r"(?:u8|u|U|L)?'")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_NUMBER = re.compile(r"\.?\d(?:[\w.']|[eEpP][+-])*")
_PUNCT = re.compile(r"::|->|&&|\|\||<<|>>|[-+*/%^&|~!=<>?:;,.(){}\[\]#@$\\]")
_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


@dataclass(frozen=True)
class Token:
    kind: str  # "ident", "string" (value decoded), "char", "number", "punct"
    text: str
    line: int
    start: int  # offsets into the source: its exact spelling is source[start:end]
    end: int


class TokenizeError(Exception):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def _decode(body: str, line: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt == "\n":  # a line continuation inside the literal
            i += 2
        elif nxt == "x":
            digits = re.match(r"[0-9A-Fa-f]+", body[i + 2 :])
            if not digits:
                raise TokenizeError("\\x with no hex digits in a string literal", line)
            out.append(chr(int(digits.group(), 16)))
            i += 2 + len(digits.group())
        elif nxt.isdigit():
            digits = re.match(r"[0-7]{1,3}", body[i + 1 :])
            assert digits is not None
            out.append(chr(int(digits.group(), 8)))
            i += 1 + len(digits.group())
        else:
            out.append(nxt)
            i += 2
    return "".join(out)


def _quoted_end(source: str, pos: int, quote: str, line: int) -> int:
    """The offset just past the closing `quote` of a literal whose body starts at `pos`."""
    i = pos
    while i < len(source):
        ch = source[i]
        if ch == "\\":
            i += 2
            continue
        if ch == quote:
            return i + 1
        if ch == "\n":
            break
        i += 1
    raise TokenizeError(
        f"unterminated {'string' if quote == chr(34) else 'character'} literal", line
    )


def tokenize(source: str) -> list[Token]:
    """The tokens of `source`, comments and preprocessor lines left out; raises TokenizeError."""
    tokens: list[Token] = []
    i, line, n = 0, 1, len(source)
    at_line_start = True
    while i < n:
        ch = source[i]
        if ch == "\n":
            line += 1
            i += 1
            at_line_start = True
            continue
        if ch in " \t\r\f\v":
            i += 1
            continue
        if source.startswith("\\\n", i):
            i += 2
            line += 1
            continue
        if source.startswith("//", i):
            while i < n and source[i] != "\n":
                if source.startswith("\\\n", i):  # a continued comment swallows the next line
                    line += 1
                    i += 1
                i += 1
            continue
        if source.startswith("/*", i):
            end = source.find("*/", i + 2)
            if end < 0:
                raise TokenizeError("unterminated /* comment", line)
            line += source.count("\n", i, end)
            i = end + 2
            continue
        if ch == "#" and at_line_start:  # a preprocessor line, continuations included
            while i < n and source[i] != "\n":
                if source.startswith("\\\n", i):
                    line += 1
                    i += 2
                    continue
                if source.startswith("/*", i):
                    end = source.find("*/", i + 2)
                    end = n if end < 0 else end + 2
                    line += source.count("\n", i, end)
                    i = end
                    continue
                i += 1
            continue
        at_line_start = False
        start, first_line = i, line
        raw = _RAW_OPEN.match(source, i)
        if raw:
            closing = f'){raw.group(1)}"'
            end = source.find(closing, raw.end())
            if end < 0:
                raise TokenizeError(f'raw string literal R"{raw.group(1)}( is never closed', line)
            value = source[raw.end() : end]
            i = end + len(closing)
            line += source.count("\n", start, i)
            tokens.append(Token("string", value, first_line, start, i))
            continue
        opener = _STRING_OPEN.match(source, i)
        if opener:
            i = _quoted_end(source, opener.end(), '"', line)
            body = source[opener.end() : i - 1]
            tokens.append(Token("string", _decode(body, line), first_line, start, i))
            continue
        opener = _CHAR_OPEN.match(source, i)
        if opener:
            i = _quoted_end(source, opener.end(), "'", line)
            tokens.append(Token("char", source[start:i], first_line, start, i))
            continue
        for kind, pattern in (("ident", _IDENT), ("number", _NUMBER), ("punct", _PUNCT)):
            match = pattern.match(source, i)
            if match:
                i = match.end()
                tokens.append(Token(kind, match.group(), first_line, start, i))
                break
        else:
            i += 1  # a character C++ has no token for: not ours to judge
    return tokens
