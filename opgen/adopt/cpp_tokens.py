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
        skipped = _skip_blank(source, i, line, at_line_start)
        if skipped is not None:
            i, line, at_line_start = skipped
            continue
        at_line_start = False
        token, i, line = _next_token(source, i, line)
        if token is not None:
            tokens.append(token)
    return tokens


def _skip_blank(
    source: str, i: int, line: int, at_line_start: bool
) -> tuple[int, int, bool] | None:
    """(offset, line, at a line's start) past the blank, comment or preprocessor line at `i`;
    None when a token starts there."""
    ch = source[i]
    if ch == "\n":
        return i + 1, line + 1, True
    if ch in " \t\r\f\v":
        return i + 1, line, at_line_start
    if source.startswith("\\\n", i):
        return i + 2, line + 1, at_line_start
    if source.startswith("//", i):
        return *_skip_line_comment(source, i, line), at_line_start
    if source.startswith("/*", i):
        end = source.find("*/", i + 2)
        if end < 0:
            raise TokenizeError("unterminated /* comment", line)
        return end + 2, line + source.count("\n", i, end), at_line_start
    if ch == "#" and at_line_start:
        return *_skip_preprocessor_line(source, i, line), at_line_start
    return None


def _skip_line_comment(source: str, i: int, line: int) -> tuple[int, int]:
    n = len(source)
    while i < n and source[i] != "\n":
        if source.startswith("\\\n", i):  # a continued comment swallows the next line
            line += 1
            i += 1
        i += 1
    return i, line


def _skip_preprocessor_line(source: str, i: int, line: int) -> tuple[int, int]:
    """Past a preprocessor line, its continuations and the comments in it included."""
    n = len(source)
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
    return i, line


def _next_token(source: str, i: int, line: int) -> tuple[Token | None, int, int]:
    """(the token at `i`, or None for a character C++ has no token for; offset; line) after it."""
    start = i
    raw = _RAW_OPEN.match(source, i)
    if raw:
        closing = f'){raw.group(1)}"'
        end = source.find(closing, raw.end())
        if end < 0:
            raise TokenizeError(f'raw string literal R"{raw.group(1)}( is never closed', line)
        i = end + len(closing)
        token = Token("string", source[raw.end() : end], line, start, i)
        return token, i, line + source.count("\n", start, i)
    opener = _STRING_OPEN.match(source, i)
    if opener:
        i = _quoted_end(source, opener.end(), '"', line)
        body = source[opener.end() : i - 1]
        return Token("string", _decode(body, line), line, start, i), i, line
    opener = _CHAR_OPEN.match(source, i)
    if opener:
        i = _quoted_end(source, opener.end(), "'", line)
        return Token("char", source[start:i], line, start, i), i, line
    for kind, pattern in (("ident", _IDENT), ("number", _NUMBER), ("punct", _PUNCT)):
        match = pattern.match(source, i)
        if match:
            return Token(kind, match.group(), line, start, match.end()), match.end(), line
    return None, i + 1, line  # not ours to judge
