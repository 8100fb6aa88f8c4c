"""The `opgen` command line: parse arguments, call the library, report.

Each command lives in `opgen/commands/`; heavy modules (torch, black, jinja2)
are imported only when a command runs, so that `opgen --help` stays fast.
Help and usage errors are printed as plain text: typer's rich formatting
imports rich and markdown-it, which alone cost about as much as the rest of
`opgen --help`.

Note [Direct generate]
`opgen generate` on an unchanged project takes well under 0.1 s of opgen's
own time; typer's parsing costs more than that: it builds a pydantic
TypeAdapter for every option it processes (the defaulted `--help` included),
which imports pydantic (~80 ms, 0.4 s on a loaded machine). So `main` calls
the generate command itself when the arguments are only its on/off flags;
anything else (`--templates DIR`, `--help`, a typo) goes through typer.
A test checks that both ways give the same output and exit code.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from . import __version__
from .commands import bench, build, generate, import_, new, templates, test

__all__ = ["app", "main"]

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


# `opgen generate` flags -> the command's parameters (Note [Direct generate])
_GENERATE_FLAGS = {
    "--check": "check",
    "--dry-run": "dry_run",
    "--force": "force",
    "--timings": "timings",
}


def main() -> None:
    """The `opgen` executable."""
    args = sys.argv[1:]
    if build.answer_up_to_date(args):  # Note [Build stamp]: a no-op build, answered fast
        return
    flags = args[1:]
    if (
        args[:1] == ["generate"]
        and set(flags) <= set(_GENERATE_FLAGS)
        and len(set(flags)) == len(flags)
    ):
        sys.exit(_direct_generate({_GENERATE_FLAGS[flag]: True for flag in flags}))
    app()


def _direct_generate(options: dict[str, bool]) -> int:
    """The generate command without typer's parsing; its exit code, as typer would give it."""
    try:
        generate.generate(**options)  # type: ignore[arg-type]
    except typer.Exit as exc:
        return exc.exit_code
    except (EOFError, KeyboardInterrupt):
        typer.echo("Aborted!", err=True)  # what click prints
        return 1
    return 0
