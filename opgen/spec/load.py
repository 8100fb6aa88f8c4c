"""Read a TOML file and remember the line each key was written on.

`tomllib` gives values but no positions; the line table here is built by a
small scan of the same text so every diagnostic can point at its line.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Diagnostic, OpgenError
from .limits import MAX_NESTING, MAX_SPEC_BYTES, nesting_depth

__all__ = ["LoadedToml", "load_toml", "read_text"]

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_\-.]+(?:\s*\.\s*[A-Za-z0-9_\-]+)*)\s*=""")
_TOML_POS = re.compile(r"\(at line (\d+), column (\d+)\)")


@dataclass(frozen=True)
class LoadedToml:
    path: Path
    data: dict[str, Any]
    lines: dict[str, int] = field(default_factory=dict)
    source: tuple[str, ...] = field(default=(), compare=False, repr=False)  # the file's lines

    def value_line(self, key: str, newlines: int) -> int:
        """The file line of a string value's line after `newlines` line breaks.

        Only a multi-line string (triple quotes) spans file lines; TOML drops a
        line break right after its opening quotes.
        """
        line = self.line(key)
        if newlines == 0 or not 0 < line <= len(self.source):
            return line
        after = self.source[line - 1].split("=", 1)[-1].strip()
        if not after.startswith(('"""', "'''")):
            return line  # one line in the file: its breaks are \n escapes
        return line + newlines + (1 if after in ('"""', "'''") else 0)

    def line(self, *keys: str | int) -> int:
        """Line of the most specific known key path; 1 when nothing matches."""
        parts = [str(k) for k in keys]
        while parts:
            hit = self.lines.get(".".join(parts))
            if hit is not None:
                return hit
            parts.pop()
        return 1


def _unquote(key: str) -> str:
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'":
        return key[1:-1]
    return key


def _key_path(text: str) -> list[str]:
    return [_unquote(p) for p in re.split(r"\.(?=(?:[^\"']*[\"'][^\"']*[\"'])*[^\"']*$)", text)]


def _scan_lines(text: str) -> dict[str, int]:
    lines: dict[str, int] = {}
    table: list[str] = []
    array_counts: dict[str, int] = {}
    in_multiline = False
    for number, raw in enumerate(text.splitlines(), start=1):
        quotes = raw.count('"""') + raw.count("'''")
        if in_multiline:
            in_multiline = quotes % 2 == 0
            continue
        header = _HEADER.match(raw)
        if header:
            path = _key_path(header.group(2))
            joined = ".".join(path)
            if header.group(1) == "[[":
                index = array_counts.get(joined, 0)
                array_counts[joined] = index + 1
                lines.setdefault(joined, number)
                path = path + [str(index)]
            table = path
            lines.setdefault(".".join(table), number)
            continue
        key = _KEY.match(raw)
        if key:
            full = ".".join(table + _key_path(key.group(1)))
            lines.setdefault(full, number)
            if quotes % 2 == 1:
                in_multiline = True
    return lines


# tomllib's message -> what to change; the first match wins.
_TOML_HINTS = (
    (
        "Illegal character '\\n'",
        'a string is not closed: add the closing quote on the same line (use """ ... """ for text over several lines)',
    ),
    ("Unterminated string", "a string is not closed: add the closing quote"),
    (
        "Invalid value",
        'values need quotes, brackets or braces: name = "mylib::foo", devices = ["cpu"], x = {shape = [3]}',
    ),
    ("Cannot overwrite a value", "this key is set twice: keep one of the two lines"),
    ("Cannot declare", "this table is declared twice: merge the two sections into one"),
    ("Expected ']'", "close the table header: [name] or [[name]]"),
)
_TOML_HINT = "fix the TOML syntax (strings need quotes, tables [name], arrays [a, b])"


def _toml_hint(message: str) -> str:
    return next((hint for needle, hint in _TOML_HINTS if needle in message), _TOML_HINT)


def load_toml(path: Path, text: str | None = None) -> LoadedToml:
    """Parse `path` (or `text`, the content it is about to have); a syntax error becomes a diagnostic at its line.

    Note [Bounded input] in limits.py: a file that is not a regular file, is
    over 1 MiB or nests deeper than 32 levels is refused before parsing.
    """
    if text is None:
        text = read_text(path)
    elif len(text.encode("utf-8")) > MAX_SPEC_BYTES:
        raise _too_large(path, len(text.encode("utf-8")))
    if text.startswith("\ufeff"):
        raise OpgenError(
            Diagnostic(
                path,
                1,
                "the file starts with a byte-order mark (U+FEFF), which TOML does not allow",
                "save it as UTF-8 without a byte-order mark (editors call it UTF-8, not UTF-8 with BOM)",
            )
        )
    deep = nesting_depth(text)
    if deep is not None:
        where = deep[1]
        raise OpgenError(
            Diagnostic(
                path,
                where,
                f"nested more than {MAX_NESTING} levels deep; opgen does not parse a spec this deep",
                "flatten the nested tables, arrays or dotted keys (a spec needs about 5 levels)",
            )
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_POS.search(message)
        line = int(match.group(1)) if match else None
        message = _TOML_POS.sub("", message).strip()
        raise OpgenError(
            Diagnostic(path, line, f"invalid TOML: {message}", _toml_hint(message))
        ) from None
    except RecursionError:
        raise OpgenError(
            Diagnostic(
                path, None, "invalid TOML: nested too deeply", "flatten the nested arrays or tables"
            )
        ) from None
    return LoadedToml(path, data, _scan_lines(text), tuple(text.splitlines()))


def _too_large(path: Path, size: int) -> OpgenError:
    return OpgenError(
        Diagnostic(
            path,
            None,
            f"is {size} bytes; opgen reads spec files of at most {MAX_SPEC_BYTES} bytes (1 MiB)",
            "a spec is a short TOML file: move data out of it",
        )
    )


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def _read_bytes(path: Path) -> bytes:
    """The file's bytes: only a regular file of at most MAX_SPEC_BYTES, never blocking on a FIFO."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise OpgenError(
            Diagnostic(
                path,
                None,
                f"is {_kind(info.st_mode)}, not a regular file",
                "a spec is a plain TOML file: move this away",
            )
        )
    if info.st_size > MAX_SPEC_BYTES:
        raise _too_large(path, info.st_size)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)  # the file at the path now, not the one stat saw
        if not stat.S_ISREG(info.st_mode):
            raise OpgenError(
                Diagnostic(path, None, f"is {_kind(info.st_mode)}, not a regular file", "")
            )
        chunks, size = [], 0
        while size <= MAX_SPEC_BYTES and (chunk := os.read(fd, 1 << 16)):
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_SPEC_BYTES:
            raise _too_large(path, size)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: Path) -> str:
    """The file's text; an unreadable file, one that is not a regular file of at most 1 MiB, or one
    that is not UTF-8 becomes a diagnostic."""
    try:
        raw = _read_bytes(path)
    except OSError as exc:
        raise OpgenError(
            Diagnostic(
                path,
                None,
                f"cannot read file: {exc.strerror}",
                "check that the file exists and is readable",
            )
        ) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise OpgenError(
            Diagnostic(
                path,
                line,
                f"file is not valid UTF-8 (byte 0x{raw[exc.start]:02x}: {exc.reason})",
                "save the file as UTF-8",
            )
        ) from None
