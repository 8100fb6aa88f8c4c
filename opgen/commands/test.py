"""`opgen test`: run the project's generated tests with pytest."""

from __future__ import annotations

import sys

import typer

from ._support import fail, project_root


def test(ctx: typer.Context) -> None:
    """Run the project's generated tests with pytest (extra arguments go to pytest)."""
    import subprocess

    from ..caches import confine_caches
    from ..errors import OpgenError

    root = project_root()
    try:
        confine_caches(root)
    except OpgenError as exc:
        raise fail(exc, root) from None
    chosen = any(not arg.startswith("-") for arg in ctx.args)  # the user named files or tests
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        *([] if chosen else ["tests"]),
        *ctx.args,
    ]
    raise typer.Exit(subprocess.call(command, cwd=root))


def register(app: typer.Typer) -> None:
    app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(test)
