"""One diagnostic type for everything a user can get wrong.

Every problem found in a spec or project file becomes a `Diagnostic` that names
the file and line, says what is wrong and how to fix it. Validation collects
all of them before failing, so one run reports every problem.

Note [Internal errors]
An exception that is no OpgenError is a bug in opgen, not a problem of the
user's input; still, the user needs to know which spec set it off (to work
around it, and for a bug report that someone can reproduce). Each op's
template variables are computed inside `internal_errors` (torchgen's
`context()`), which turns such an exception into an `InternalError`: a
diagnostic naming the spec and the op, with the traceback kept for the CLI to
print under it. Nothing is written: rendering ends before any plan is made.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Diagnostic", "OpgenError", "DiagnosticSink", "InternalError", "internal_errors"]


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


class InternalError(OpgenError):
    """An unexpected exception while generating from one spec (Note [Internal errors]).

    `trace` is the original exception's traceback, for the bug report.
    """

    def __init__(self, path: Path, what: str, cause: BaseException):
        import traceback

        self.trace = "".join(traceback.format_exception(cause)).rstrip("\n")
        message = f"internal error while generating {what}: {type(cause).__name__}: {cause}"
        hint = "this is a bug in opgen, not in the spec: please report it with the traceback below"
        super().__init__(Diagnostic(path, None, message, hint))


@contextlib.contextmanager
def internal_errors(path: Path, what: str) -> Iterator[None]:
    """Turn an unexpected exception inside into an `InternalError` naming `path` and `what`."""
    try:
        yield
    except OpgenError:
        raise
    except Exception as exc:
        raise InternalError(path, what, exc) from exc
