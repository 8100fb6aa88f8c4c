"""What the commands share: finding the project, printing diagnostics, reporting a run's changes.

Only typer and the standard library are imported at the top, so that
`opgen --help` stays fast; the library is imported where a command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from ..errors import OpgenError
    from ..generate import GenerateResult

__all__ = ["err", "fail", "project_root", "report"]


def err(text: str) -> None:
    """Print to stderr."""
    typer.echo(text, err=True)


def fail(exc: OpgenError, root: Path | None = None) -> typer.Exit:
    """Print every diagnostic of `exc` (paths relative to `root`); the caller raises the returned Exit(1)."""
    for diagnostic in exc.diagnostics:
        err(diagnostic.format(root))
    return typer.Exit(1)


def project_root(start: Path | None = None) -> Path:
    """The folder holding opgen.toml, from `start` (the current folder) upwards; exits 1 when there is none."""
    from ..inputs import find_root

    start = (start or Path.cwd()).resolve()
    root = find_root(start)
    if root is None:
        err(
            f"error: no opgen.toml in {start} or its parents\n  hint: run `opgen new NAMESPACE::OP` to start a project"
        )
        raise typer.Exit(1)
    return root


def report(result: GenerateResult, check: bool = False, dry_run: bool = False) -> None:
    """One line per file the run changed (problems to stderr), its warnings, then the summary."""
    from ..changes import Action

    for change in result.changes:
        if change.action is Action.UNCHANGED:
            continue
        label = change.action.label if result.written else change.action.planned_label
        line = f"  {label:<14} {change.path}"
        if change.note:
            line += f"  ({change.note})"
        (err if change.action.to_stderr else typer.echo)(line)
    for warning in result.warnings:
        err(f"warning: {warning}")
    if result.stopped and not (check or dry_run):
        err("error: nothing was written: the files above need your decision first")
    typer.echo(f"opgen: {result.summary()}")
