"""One diagnostic type for everything a user can get wrong.

Every problem found in a spec or project file becomes a `Diagnostic` that names
the file and line, says what is wrong and how to fix it. Validation collects
all of them before failing, so one run reports every problem.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Diagnostic", "OpgenError", "DiagnosticSink"]


@dataclass(frozen=True)
class Diagnostic:
    """One problem for the user: the file and line it is in, what is wrong, and how to fix it."""

    path: Path | None
    line: int | None
    message: str
    hint: str = ""
    level: str = "error"

    def format(self, root: Path | None = None) -> str:
        """`file:line: level: message`, then the hint; the file relative to `root` when inside it."""
        where = ""
        if self.path is not None:
            shown = _relative(self.path, root) if root is not None else self.path
            where = f"{shown}:{self.line}: " if self.line else f"{shown}: "
        text = f"{where}{self.level}: {self.message}"
        if self.hint:
            # A hint of several lines (a TOML snippet) stays indented under its error.
            text += "\n  hint: " + self.hint.replace("\n", "\n        ")
        return text


def _relative(path: Path, root: Path) -> Path:
    """`path` relative to `root` when it is inside; a symlink in the last place is not followed."""
    real_root = root.resolve()
    candidates = (
        (Path(os.path.abspath(path)), Path(os.path.abspath(root))),
        (Path(os.path.abspath(path)), real_root),
        (path.parent.resolve() / path.name, real_root),
    )
    for candidate, base in candidates:
        with contextlib.suppress(ValueError):
            return candidate.relative_to(base)
    return path


class OpgenError(Exception):
    """Raised with every diagnostic found; the CLI prints them and exits 1."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(d.format() for d in self.diagnostics))


class DiagnosticSink:
    """Collects diagnostics for one file so validation can report them all."""

    def __init__(self, path: Path | None):
        self.path = path
        self.items: list[Diagnostic] = []

    def error(self, line: int | None, message: str, hint: str = "") -> None:
        """Record a problem at `line` of the sink's file; the run goes on to find the others."""
        self.items.append(Diagnostic(self.path, line, message, hint))

    def raise_if_any(self) -> None:
        """Raise OpgenError with every problem recorded so far, if there is any."""
        if self.items:
            raise OpgenError(self.items)
