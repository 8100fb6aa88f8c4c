"""What every command prints, without typer: plain lines, diagnostics and a run's report.

`opgen generate` with on/off flags runs without importing typer (Note
[Direct generate] in cli.py), so what it prints is here, and the typer
commands print through the same functions.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..errors import OpgenError
    from ..generate import GenerateResult

__all__ = ["echo", "err", "no_project", "print_diagnostics", "report"]


def echo(text: str = "", err: bool = False, nl: bool = True) -> None:
    """Print `text` to stdout (stderr with `err`) and flush, as `click.echo` prints plain text."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n" if nl else text)
    stream.flush()


def err(text: str) -> None:
    """Print to stderr."""
    echo(text, err=True)


def no_project(start: Path) -> str:
    """The error when no folder from `start` upwards holds opgen.toml."""
    return (
        f"error: no opgen.toml in {start} or its parents\n"
        "  hint: run `opgen new NAMESPACE::OP` to start a project"
    )


def print_diagnostics(exc: OpgenError, root: Path | None = None) -> None:
    """Every diagnostic of `exc`, paths relative to `root`, to stderr; for an internal error,
    the traceback under it (Note [Internal errors])."""
    for diagnostic in exc.diagnostics:
        err(diagnostic.format(root))
    trace = getattr(exc, "trace", None)
    if trace:
        err(trace)


def report(result: GenerateResult, check: bool = False, dry_run: bool = False) -> None:
    """One line per file the run changed (problems to stderr), its warnings, then the summary."""
    from ..write.changes import Action

    for change in result.changes:
        if change.action is Action.UNCHANGED:
            continue
        label = change.action.label if result.written else change.action.planned_label
        # a path from a damaged or crafted manifest may hold control characters: shown escaped
        path = change.path if change.path.isprintable() else ascii(change.path)
        line = f"  {label:<14} {path}"
        if change.note:
            line += f"  ({change.note})"
        echo(line, err=change.action.to_stderr)
    for warning in result.warnings:
        err(f"warning: {warning}")
    for diagnostic in result.spec_warnings:
        err(diagnostic.format(result.root))
    if result.stopped and not (check or dry_run):
        err("error: nothing was written: the files above need your decision first")
    echo(f"opgen: {result.summary()}")
