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
    return _DepthScan(text, limit).run()


class _DepthScan:
    """The tokenizer's state while it walks one text (Note [Bounded input])."""

    def __init__(self, text: str, limit: int) -> None:
        self.text, self.limit = text, limit
        self.table = 0  # depth of the current [table] header
        self.top_key = (
            0  # tables the dotted key being assigned at the top level opens (`a.b.c =`: 2)
        )
        # open arrays (0) and inline tables (1), each with its key's tables
        self.stack: list[list[int]] = []
        self.in_key, self.dots, self.line, self.pos = True, 0, 1, 0

    def depth(self) -> int:
        return self.table + self.top_key + sum(1 + key for _, key in self.stack)

    def run(self) -> tuple[int, int] | None:
        while token := (_ARRAY_TOKEN if self.stack and not self.stack[-1][0] else _TOKEN).search(
            self.text, self.pos
        ):
            kind, self.pos = token.group(), token.end()
            if kind in _STRING_END:
                self._skip_string(kind)
            elif kind == "#":
                newline = self.text.find("\n", self.pos)
                self.pos = len(self.text) if newline < 0 else newline
            elif kind == "\n":
                self.line += 1
                if not self.stack:
                    self.in_key, self.dots, self.top_key = True, 0, 0
            else:
                found = (
                    self._key_token(kind, token.start()) if self.in_key else self._value_token(kind)
                )
                if found is not None:
                    return found
        return None

    def _too_deep(self, depth: int) -> tuple[int, int] | None:
        return (depth, self.line) if depth > self.limit else None

    def _skip_string(self, quotes: str) -> None:
        text, pos = self.text, self.pos
        end = _STRING_END[quotes].match(text, pos)
        if end is not None:
            stop = end.end()
        else:  # not closed: let tomllib report it
            stop = text.find("\n", pos) if "\n" in text[pos:] else len(text)
        self.line += text.count("\n", pos, stop)
        self.pos = stop

    def _key_token(self, kind: str, start: int) -> tuple[int, int] | None:
        """A token of a key (dotted, assigned, or a table header)."""
        if kind == ".":
            self.dots += 1
            return self._too_deep(self.depth() + self.dots)
        if kind == "=":
            if self.stack:
                self.stack[-1][1] = self.dots
            else:
                self.top_key = self.dots
            self.in_key, self.dots = False, 0
            return self._too_deep(self.depth())
        if kind == "[" and not self.stack:
            header = _HEADER.match(self.text, start)
            if header is not None:
                self.table, self.top_key, self.pos = _header_depth(header), 0, header.end()
                return self._too_deep(self.table)
        elif kind == "}" and self.stack:
            self.stack.pop()
            self.in_key = False
        return None

    def _value_token(self, kind: str) -> tuple[int, int] | None:
        """A token of a value: arrays and inline tables open and close, commas start keys."""
        if kind in "[{":
            self.stack.append([int(kind == "{"), 0])
            self.in_key, self.dots = kind == "{", 0
            return self._too_deep(self.depth())
        if kind in "]}":
            if self.stack:
                self.stack.pop()
        elif kind == "," and self.stack and self.stack[-1][0] == 1:
            self.stack[-1][1] = 0
            self.in_key, self.dots = True, 0
        return None
