"""The `opgen` command line: parse arguments, call the library, report.

Heavy modules (torch, black, jinja2) are imported inside commands so that
`opgen --help` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import OpgenError

app = typer.Typer(
    help="Generate PyTorch custom operators (Python, C++, CUDA) from one short spec per op.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _err(text: str) -> None:
    typer.echo(text, err=True)


def _fail(exc: OpgenError, root: Path | None = None) -> typer.Exit:
    for diagnostic in exc.diagnostics:
        _err(diagnostic.format(root))
    return typer.Exit(1)


def _root(start: Path | None = None) -> Path:
    from .project import find_root

    start = (start or Path.cwd()).resolve()
    root = find_root(start)
    if root is None:
        _err(f"error: no opgen.toml in {start} or its parents\n  hint: run `opgen new NAMESPACE::OP` to start a project")
        raise typer.Exit(1)
    return root


def _report(result, root: Path, check: bool = False, dry_run: bool = False) -> None:
    for change in result.changes:
        if change.action == "unchanged":
            continue
        label = {"create": "created", "update": "updated", "merge": "merged", "remove": "removed", "keep": "kept"}.get(change.action, change.action)
        if not result.written and change.action in ("create", "update", "merge", "remove", "conflict", "overwrite"):
            label = f"would be {label}" if change.action != "conflict" else "would conflict"
        line = f"  {label:<14} {change.path}"
        if change.note:
            line += f"  ({change.note})"
        (_err if change.action in ("edited", "conflict", "unresolved") else typer.echo)(line)
    for warning in getattr(result, "warnings", ()):
        _err(f"warning: {warning}")
    if not result.written and any(c.action == "edited" for c in result.changes) and not (check or dry_run):
        _err("error: nothing was written: a generated file was edited by hand (see above)")
    typer.echo(f"opgen: {result.summary()}")


Check = Annotated[bool, typer.Option("--check", help="Exit 1 if any file is stale or edited; write nothing.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Print the diff of what would change; write nothing.")]
Force = Annotated[bool, typer.Option("--force", help="Overwrite generated files that were edited by hand.")]
Templates = Annotated[Optional[Path], typer.Option("--templates", help="Template folder searched before the built-ins.")]


@app.command()
def generate(check: Check = False, dry_run: DryRun = False, force: Force = False, templates: Templates = None) -> None:
    """Regenerate every op of the project from its spec."""
    from .generate import generate as run
    from .writer import unified_diff

    root = _root()
    try:
        result = run(root, check=check, dry_run=dry_run, force=force, templates=templates)
    except OpgenError as exc:
        raise _fail(exc, root)
    if dry_run:
        for change in result.stale:
            if change.action != "edited":
                typer.echo(unified_diff(change), nl=False)
    _report(result, root, check=check, dry_run=dry_run)
    if check and result.stale:
        _err("error: generated files are out of date; run `opgen generate`")
        raise typer.Exit(1)
    if result.failed:
        raise typer.Exit(1)


@app.command()
def new(
    name: Annotated[str, typer.Argument(help="The op to create, as NAMESPACE::OP.")],
    schema: Annotated[Optional[str], typer.Option(help='Schema, e.g. "(Tensor x, float alpha=1.0) -> Tensor".')] = None,
    backend: Annotated[Optional[str], typer.Option(help="python or cpp (default: the project's).")] = None,
    devices: Annotated[str, typer.Option(help="Comma-separated devices: cpu, cuda.")] = "cpu",
) -> None:
    """Create an op (and the project, if the folder has none), then generate it."""
    from .new import new_op

    cwd = Path.cwd().resolve()
    try:
        made = new_op(cwd, name, schema, backend, [d.strip() for d in devices.split(",") if d.strip()])
    except OpgenError as exc:
        raise _fail(exc, cwd)
    _report(made.generated, made.root)
    typer.echo("next: fill in the kernel, then `opgen test`" + (" after `opgen build`" if made.backend == "cpp" else ""))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def test(ctx: typer.Context) -> None:
    """Run the project's generated tests with pytest (extra arguments go to pytest)."""
    import subprocess

    root = _root()
    chosen = any(not arg.startswith("-") for arg in ctx.args)  # the user named files or tests
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *([] if chosen else ["tests"]), *ctx.args]
    raise typer.Exit(subprocess.call(command, cwd=root))


from .commands import register_all  # noqa: E402

register_all(app)


def main() -> None:
    app()
