"""Bounds on a spec file, checked before it is parsed: size and nesting depth.

Note [Bounded input]
A spec (or opgen.toml) is read only when it is a regular file of at most
1 MiB, and parsed only when no value in it is nested deeper than 32 levels.
Both checks run before `tomllib` sees the text: a FIFO would block the
read, and a few hundred kilobytes of `{a = {a = ...` or `a.a.a... = 1` make a
recursive parser exhaust the stack or the memory. Depth counts every table
and array around a value: table headers (`[[test.samples]]` is 3: `test`,
the array, the table in it), dotted keys (`x.shape = 1` is 1: `x`), arrays
and inline tables. A real spec is 5 deep at most (a sample's shape).

The depth scan is a small tokenizer, not a TOML parser: it skips strings and
comments, follows brackets and braces, and counts the dots of keys and table
headers. On malformed text it never fails; it may count wrong, and then
`tomllib` reports the syntax error (the size bound still holds).
"""

from __future__ import annotations

import re

__all__ = ["MAX_SPEC_BYTES", "MAX_NESTING", "nesting_depth"]

MAX_SPEC_BYTES = 1024 * 1024
MAX_NESTING = 32

_TOKEN = re.compile(r"\"\"\"|'''|[\"'#\n\[\]{}=,.]")
# inside an array only brackets, strings and comments matter: commas and dots are skipped fast
_ARRAY_TOKEN = re.compile(r"\"\"\"|'''|[\"'#\n\[\]{}]")
_STRING_END = {  # the rest of a string after its opening quotes ("unrolled" patterns: fast)
    '"""': re.compile(r'[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""', re.S),
    "'''": re.compile(r"[^']*(?:'(?!'')[^']*)*'''"),
    '"': re.compile(r'[^"\\\n]*(?:\\.[^"\\\n]*)*"'),
    "'": re.compile(r"[^'\n]*'"),
}
_HEADER = re.compile(r"\[\[?((?:[^\]\"'\n]|\"(?:\\.|[^\"\\\n])*\"|'[^'\n]*')*)\]")
_QUOTED = re.compile(r"\"(?:\\.|[^\"\\\n])*\"|'[^'\n]*'")


def _header_depth(match: re.Match[str]) -> int:
    parts = _QUOTED.sub("", match.group(1)).count(".") + 1
    return parts + (1 if match.group(0).startswith("[[") else 0)


def nesting_depth(text: str, limit: int = MAX_NESTING) -> tuple[int, int] | None:
    """The first (depth, line) where `text` nests deeper than `limit`; None when it never does."""
    table = 0  # depth of the current [table] header
    top_key = 0  # tables the dotted key being assigned at the top level opens (`a.b.c =`: 2)
    stack: list[list[int]] = []  # open arrays (0) and inline tables (1), each with its key's tables
    in_key, dots, line, pos = True, 0, 1, 0

    def depth() -> int:
        return table + top_key + sum(1 + key for _, key in stack)

    while token := (_ARRAY_TOKEN if stack and not stack[-1][0] else _TOKEN).search(text, pos):
        kind, pos = token.group(), token.end()
        if kind in _STRING_END:
            end = _STRING_END[kind].match(text, pos)
            if end is not None:
                stop = end.end()
            else:  # not closed: let tomllib report it
                stop = text.find("\n", pos) if "\n" in text[pos:] else len(text)
            line += text.count("\n", pos, stop)
            pos = stop
        elif kind == "#":
            newline = text.find("\n", pos)
            pos = len(text) if newline < 0 else newline
        elif kind == "\n":
            line += 1
            if not stack:
                in_key, dots, top_key = True, 0, 0
        elif in_key:
            if kind == ".":
                dots += 1
                if depth() + dots > limit:
                    return depth() + dots, line
            elif kind == "=":
                if stack:
                    stack[-1][1] = dots
                else:
                    top_key = dots
                in_key, dots = False, 0
                if depth() > limit:
                    return depth(), line
            elif kind == "[" and not stack:
                header = _HEADER.match(text, token.start())
                if header is not None:
                    table, top_key, pos = _header_depth(header), 0, header.end()
                    if table > limit:
                        return table, line
            elif kind == "}" and stack:
                stack.pop()
                in_key = False
        elif kind in "[{":
            stack.append([int(kind == "{"), 0])
            in_key, dots = kind == "{", 0
            if depth() > limit:
                return depth(), line
        elif kind in "]}":
            if stack:
                stack.pop()
        elif kind == "," and stack and stack[-1][0] == 1:
            stack[-1][1] = 0
            in_key, dots = True, 0
    return None
