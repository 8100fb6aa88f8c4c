"""What the typer commands share: finding the project, printing diagnostics, reporting a run's changes.

Only typer and the standard library are imported at the top, so that
`opgen --help` stays fast; the library is imported where a command runs.
What is printed comes from `_output.py`, which `opgen generate` uses without typer.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ._output import err, no_project, print_diagnostics, report

if TYPE_CHECKING:
    from ..errors import OpgenError

__all__ = ["err", "fail", "project_root", "report"]


def fail(exc: OpgenError, root: Path | None = None) -> typer.Exit:
    """Print every diagnostic of `exc` (paths relative to `root`); the caller raises the returned Exit(1)."""
    print_diagnostics(exc, root)
    return typer.Exit(1)


def project_root(start: Path | None = None) -> Path:
    """The folder holding opgen.toml, from `start` (the current folder) upwards; exits 1 when there is none."""
    from ..incremental.inputs import find_root

    start = (start or Path.cwd()).resolve()
    root = find_root(start)
    if root is None:
        err(no_project(start))
        raise typer.Exit(1)
    return root
