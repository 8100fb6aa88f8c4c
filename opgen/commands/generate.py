"""`opgen generate`: regenerate every op of the project from its spec."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .direct import run_generate

Check = Annotated[
    bool, typer.Option("--check", help="Exit 1 if any file is stale or edited; write nothing.")
]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Print the diff of what would change; write nothing.")
]
Force = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Overwrite generated files that were edited by hand (the old ones are saved in .opgen/backup/).",
    ),
]
Adopt = Annotated[
    list[Path] | None,
    typer.Option(
        "--adopt",
        help="Re-attach a kernel (or setup.py) whose record was lost: opgen takes it as up to date "
        "with its spec as it is now and merges later spec changes into it. Repeatable.",
        metavar="FILE",
        show_default=False,
    ),
]
Timings = Annotated[
    bool, typer.Option("--timings", help="Print the seconds each stage took (to stderr).")
]
Templates = Annotated[
    Path | None,
    typer.Option(
        "--templates", help="Template folder searched before the built-ins.", metavar="DIR"
    ),
]


def generate(
    check: Check = False,
    dry_run: DryRun = False,
    force: Force = False,
    adopt: Adopt = None,
    templates: Templates = None,
    timings: Timings = False,
) -> None:
    """Regenerate every op of the project from its spec."""
    code = run_generate(check, dry_run, force, adopt, templates, timings)
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command()(generate)
