"""`opgen build`: regenerate, then compile the project's C++/CUDA operators."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._support import err, fail, project_root, report
from .direct import UP_TO_DATE


def build(
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", help="Parallel compile jobs.", metavar="N")
    ] = 2,
    check_cuda: Annotated[
        bool,
        typer.Option(
            "--check-cuda",
            help="Compile-check .cu files with nvcc even when CUDA cannot be linked.",
        ),
    ] = False,
    cpu_only: Annotated[
        bool,
        typer.Option("--cpu-only", help="Build only the CPU kernels, even for a CUDA torch."),
    ] = False,
    generate: Annotated[
        bool, typer.Option("--generate/--no-generate", help="Run `opgen generate` first.")
    ] = True,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Print every compiler command.")
    ] = False,
) -> None:
    """Compile csrc/ into the package's _C library with ninja (see docs/cpp.md).

    When nothing changed since the last successful build (sources, specs,
    generated files, flags, torch), it says "up to date" and runs nothing.
    """
    from ..build.stamp import stale_reason

    root = project_root()
    # Note [Build stamp]: no torch import here; a --cpu-only build is never stamped
    if not cpu_only and stale_reason(root, check_cuda) is None:
        typer.echo(UP_TO_DATE)
        return
    build_stale(
        root,
        jobs=jobs,
        check_cuda=check_cuda,
        verbose=verbose,
        generate=generate,
        cpu_only=cpu_only,
    )


def build_stale(
    root: Path,
    *,
    jobs: int = 2,
    check_cuda: bool = False,
    verbose: bool = False,
    generate: bool = True,
    cpu_only: bool = False,
    quiet: bool = False,
) -> None:
    """Build the project at `root`, known to be out of date, and report; raises Exit(1) when it fails.

    `quiet`: say nothing when the build succeeds without compiling (a project of Python ops).
    """
    from ..build.run import build_project
    from ..errors import OpgenError

    try:
        outcome = build_project(
            root,
            jobs=jobs,
            check_cuda=check_cuda,
            verbose=verbose,
            generate=generate,
            cpu_only=cpu_only,
            if_stale=False,
        )
    except OpgenError as exc:
        raise fail(exc, root) from None
    if outcome.generated is not None and (outcome.generated.stale or outcome.generated.failed):
        report(outcome.generated)
    for note in outcome.build.notes:
        typer.echo(f"opgen: {note}")
    if not outcome.ok:
        err(f"error: {outcome.build.summary}")
        for hint in outcome.build.hints:
            err(f"  hint: {hint}")
        raise typer.Exit(1)
    if not (quiet and outcome.build.plan is None):
        typer.echo(f"opgen: {outcome.build.summary}")


def register(app: typer.Typer) -> None:
    app.command()(build)
