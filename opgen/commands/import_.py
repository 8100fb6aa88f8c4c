"""`opgen import`: bring an existing extension's ops into a project, keeping their kernels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._support import err, fail, report


def import_(
    paths: Annotated[
        list[Path],  # described in the docstring: typer would print a type placeholder beside it
        typer.Argument(metavar="PATH...", hidden=True),
    ],
    into: Annotated[
        Path | None,
        typer.Option(
            "--into",
            help="The project folder (default: the current project, or a new one here).",
            metavar="DIR",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace specs that differ from the imported ones."),
    ] = False,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace", help="The namespace the ops get (default: theirs).", metavar="NAME"
        ),
    ] = None,
) -> None:
    """Write one spec per op that PATH (C++ files, Python modules, or folders of them) registers
    (TORCH_LIBRARY blocks, custom_op), keeping their kernels, then generate."""
    from ..adopt.importer import import_extension
    from ..errors import OpgenError

    cwd = Path.cwd().resolve()
    try:
        made = import_extension(cwd, paths, into, force, namespace)
    except OpgenError as exc:
        raise fail(exc, cwd) from None
    for problem in made.problems:
        err(problem.format(cwd))
    report(made.generated)
    if made.generated.stopped or made.generated.failed:
        raise typer.Exit(1)
    where = (
        ""
        if made.root == cwd
        else f"cd {made.root.relative_to(cwd) if made.root.is_relative_to(cwd) else made.root} && "
    )
    typer.echo(
        f"next: {where}`opgen test`{' (it runs `opgen build` first)' if made.builds_cpp else ''}; "
        "then write each op's [test] reference in its spec"
    )
    if made.failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command(name="import")(import_)
