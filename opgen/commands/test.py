"""`opgen test`: bring the build up to date, then run the project's generated tests with pytest."""

from __future__ import annotations

import re
import sys
from typing import Annotated

import typer

from ._support import err, fail, project_root


def test(
    ctx: typer.Context,
    no_build: Annotated[
        bool,
        typer.Option(
            "--no-build",
            help="Never build first; refuse (exit 1) when the build is out of date.",
        ),
    ] = False,
) -> None:
    """Run the project's generated tests with pytest, building first when anything changed.

    Before the tests, `opgen test` runs `opgen build` when anything they depend
    on changed since the last successful build: C++/CUDA sources, specs,
    generated files, build flags, the installed torch. So the tests never run
    against a stale or missing library; a failed build stops here (exit 1).
    Other arguments go to pytest, e.g. `opgen test -k gradcheck -x`.
    """
    import subprocess

    from ..build.stamp import stale_reason
    from ..errors import OpgenError
    from ._tool_caches import confine_caches
    from .build import build_stale

    root = project_root()
    reason = stale_reason(root)
    if reason is not None:
        if no_build:
            err(
                f"error: the build is out of date ({reason}); run `opgen build`, or drop --no-build"
            )
            raise typer.Exit(1)
        compiles = (root / "csrc").is_dir()
        if compiles:
            typer.echo(f"opgen: building first: {reason}")
        try:
            build_stale(root, quiet=not compiles)
        except typer.Exit:
            err("error: not testing: `opgen build` failed (see above)")
            raise typer.Exit(1) from None
    try:
        confine_caches(root)
    except OpgenError as exc:
        raise fail(exc, root) from None
    chosen = any(not arg.startswith("-") for arg in ctx.args)  # the user named files or tests
    command = [
        sys.executable,
        "-m",
        "pytest",
        # -q unless the user chose the verbosity: a second -q (-qq) hides pytest's summary line
        *([] if any(_verbosity(arg) for arg in ctx.args) else ["-q"]),
        "-p",
        "no:cacheprovider",
        *([] if chosen else ["tests"]),
        *ctx.args,
    ]
    raise typer.Exit(subprocess.call(command, cwd=root))


def _verbosity(arg: str) -> bool:
    """Whether a pytest argument sets the verbosity: -q, -qq, -v, -vv, --quiet, --verbose."""
    return arg in ("--quiet", "--verbose") or re.fullmatch(r"-(q+|v+)", arg) is not None


def register(app: typer.Typer) -> None:
    app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(test)
