"""`opgen build`: regenerate, then compile the project's C++/CUDA operators."""

from __future__ import annotations

from typing import Annotated

import typer

from ._support import err, fail, project_root, report


def build(
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Parallel compile jobs.")] = 2,
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
    """Compile csrc/ into the package's _C library with ninja (see docs/cpp.md)."""
    from ..build import build_project
    from ..errors import OpgenError

    root = project_root()
    try:
        outcome = build_project(
            root,
            jobs=jobs,
            check_cuda=check_cuda,
            verbose=verbose,
            generate=generate,
            cpu_only=cpu_only,
        )
    except OpgenError as exc:
        raise fail(exc, root) from None
    if outcome.generated is not None and (outcome.generated.stale or outcome.generated.failed):
        report(outcome.generated)
    for note in outcome.build.notes:
        typer.echo(f"opgen: {note}")
    if not outcome.ok:
        err(f"error: {outcome.build.summary}")
        raise typer.Exit(1)
    typer.echo(f"opgen: {outcome.build.summary}")


def register(app: typer.Typer) -> None:
    app.command()(build)
