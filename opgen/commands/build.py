"""`opgen build`: regenerate, then compile the project's C++/CUDA operators."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app) -> None:
    @app.command()
    def build(
        jobs: Annotated[int, typer.Option("--jobs", "-j", help="Parallel compile jobs.")] = 2,
        check_cuda: Annotated[bool, typer.Option("--check-cuda", help="Compile-check .cu files with nvcc even when CUDA cannot be linked.")] = False,
        cpu_only: Annotated[bool, typer.Option("--cpu-only", help="Build only the CPU kernels, even for a CUDA torch.")] = False,
        generate: Annotated[bool, typer.Option("--generate/--no-generate", help="Run `opgen generate` first.")] = True,
        verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print every compiler command.")] = False,
    ) -> None:
        """Compile csrc/ into the package's _C library with ninja (see docs/cpp.md)."""
        from ..build import run_build
        from ..cli import _err, _fail, _report, _root
        from ..errors import OpgenError
        from ..generate import generate as run_generate
        from ..project import load_project

        root = _root()
        try:
            if generate:
                result = run_generate(root)
                if any(c.action not in ("unchanged", "keep") for c in result.changes):
                    _report(result, root)
                if result.failed:
                    _err("error: `opgen generate` failed; fix the files above, then build again")
                    raise typer.Exit(1)
            outcome = run_build(load_project(root), jobs=jobs, check_cuda=check_cuda, verbose=verbose, cpu_only=cpu_only)
        except OpgenError as exc:
            raise _fail(exc, root)
        for note in outcome.notes:
            typer.echo(f"opgen: {note}")
        if not outcome.ok:
            _err(f"error: {outcome.summary}")
            raise typer.Exit(1)
        typer.echo(f"opgen: {outcome.summary}")
