"""One diagnostic type for everything a user can get wrong.

Every problem found in a spec or project file becomes a `Diagnostic` that names
the file and line, says what is wrong and how to fix it. Validation collects
all of them before failing, so one run reports every problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["Diagnostic", "OpgenError", "DiagnosticSink"]


@dataclass(frozen=True)
class Diagnostic:
    path: Path | None
    line: int | None
    message: str
    hint: str = ""
    level: str = "error"

    def format(self, root: Path | None = None) -> str:
        where = ""
        if self.path is not None:
            shown = self.path
            if root is not None:
                try:
                    shown = self.path.resolve().relative_to(root.resolve())
                except ValueError:
                    pass
            where = f"{shown}:{self.line}: " if self.line else f"{shown}: "
        text = f"{where}{self.level}: {self.message}"
        if self.hint:
            # A hint of several lines (a TOML snippet) stays indented under its error.
            text += "\n  hint: " + self.hint.replace("\n", "\n        ")
        return text


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
        self.items.append(Diagnostic(self.path, line, message, hint))

    def raise_if_any(self) -> None:
        if self.items:
            raise OpgenError(self.items)
