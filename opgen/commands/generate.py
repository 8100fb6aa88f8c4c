"""`opgen generate`: regenerate every op of the project from its spec."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._support import err, fail, project_root, report

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
    import os

    from ..changes import Action
    from ..errors import OpgenError
    from ..generate import generate as run
    from ..stages import Stages
    from ..writer import unified_diff

    root = project_root()
    # --adopt paths are relative to the folder the command runs in, like any path argument
    adopted = [os.path.relpath(os.path.abspath(p), root) for p in adopt or []]
    try:
        result = run(
            root, check=check, dry_run=dry_run, force=force, adopt=adopted, templates=templates
        )
    except OpgenError as exc:
        raise fail(exc, root) from None
    if dry_run:
        for change in result.stale:
            if change.action is not Action.EDITED:
                typer.echo(unified_diff(change), nl=False)
    report(result, check=check, dry_run=dry_run)
    if timings:
        err(f"opgen: {Stages.line_of(result.timings)}")
    if check and result.stale:
        err("error: generated files are out of date; run `opgen generate`")
        raise typer.Exit(1)
    if result.failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(generate)
