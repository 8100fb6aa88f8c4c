"""The `opgen` command line: parse arguments, call the library, report.

Each command lives in `opgen/commands/`; heavy modules (torch, black, jinja2)
are imported only when a command runs, so that `opgen --help` stays fast.
Help and usage errors are printed as plain text: typer's rich formatting
imports rich and markdown-it, which alone cost about as much as the rest of
`opgen --help`.
"""

from __future__ import annotations

import typer

from .commands import bench, build, generate, new, templates, test

__all__ = ["app", "main"]

app = typer.Typer(
    help="Generate PyTorch custom operators (Python, C++, CUDA) from one short spec per op.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

for _command in (generate, new, test, build, templates, bench):
    _command.register(app)


def main() -> None:
    app()
