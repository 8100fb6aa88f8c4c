"""The typer application behind `opgen`: every command, its options and its help.

Each command lives in `opgen/commands/`; heavy modules (torch, black, jinja2)
are imported only when a command runs, so that `opgen --help` stays fast.
Help and usage errors are printed as plain text: typer's rich formatting
imports rich and markdown-it, which alone cost about as much as the rest of
`opgen --help`. `opgen.cli.main` comes here only for what it does not
answer itself (Note [Direct generate] in cli.py).
"""

from __future__ import annotations

from typing import Annotated

import typer

from . import __version__
from .commands import bench, build, generate, import_, new, templates, test

__all__ = ["app"]

app = typer.Typer(
    help="Generate PyTorch custom operators (Python, C++, CUDA) from one short spec per op.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: flags without type placeholders, no rich import
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"opgen {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print opgen's version and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """Generate PyTorch custom operators (Python, C++, CUDA) from one short spec per op."""


for _command in (generate, new, import_, test, build, templates, bench):
    _command.register(app)
