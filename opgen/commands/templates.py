"""`opgen templates`: list, eject, diff and ack template overrides. See Note [Ejected templates]."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from ._support import fail, project_root

T = TypeVar("T")

Name = Annotated[
    str,
    # NAME is a template as `opgen templates list` shows it (each docstring says so)
    typer.Argument(metavar="NAME", hidden=True),
]


def _run(action: Callable[[Path, Path | None], T]) -> tuple[Path, Path | None, T]:
    """Run `action(root, template folder)` for the project here; diagnostics end the command."""
    from ..errors import OpgenError
    from ..render.overrides import template_folder

    root = project_root()
    try:
        folder = template_folder(root)
        return root, folder, action(root, folder)
    except OpgenError as exc:
        raise fail(exc, root) from None


def list_command() -> None:
    """Show every built-in template and which ones this project overrides."""
    from ..render.overrides import DEFAULT_FOLDER, list_templates

    root, folder, infos = _run(list_templates)
    shown = (
        folder.relative_to(root).as_posix()
        if folder is not None and folder.is_relative_to(root)
        else (folder or DEFAULT_FOLDER)
    )
    typer.echo(
        f"template folder: {shown}"
        + ("" if folder is not None else " (not set; `opgen templates eject NAME` sets it)")
    )
    for info in infos:
        if not info.builtin:
            state = "yours (no built-in of this name)"
        elif info.overridden:
            state = "overridden, built-in changed since eject" if info.behind else "overridden"
        else:
            state = "built-in"
        typer.echo(f"  {info.name:<32} {state}")


def eject_command(name: Name) -> None:
    """Copy built-in template NAME, such as python/kernel.py.j2, into the project's template folder."""
    from ..render.overrides import eject

    root, _, (target, set_option) = _run(lambda root, folder: eject(root, folder, name))
    typer.echo(
        f"ejected {name} to {target.relative_to(root).as_posix()}: edit it, then `opgen generate`"
    )
    if set_option:
        typer.echo('set templates = "templates" under [options] in opgen.toml')


def diff_command(name: Name) -> None:
    """Show how built-in template NAME changed since you ejected it."""
    from ..render.overrides import upstream_diff

    _, _, text = _run(lambda root, folder: upstream_diff(root, folder, name))
    typer.echo(text or f"{name}: the built-in is unchanged since you ejected it", nl=not text)


def ack_command(name: Name) -> None:
    """Record that your override of NAME is caught up with the built-in (silences the warning)."""
    from ..render.overrides import acknowledge

    _run(lambda root, folder: acknowledge(root, name))
    typer.echo(f"{name}: override marked as up to date with the built-in")


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        help="List and customize the Jinja templates opgen renders (see docs/templates.md).",
        no_args_is_help=True,
        rich_markup_mode=None,
    )
    sub.command("list")(list_command)
    sub.command("eject")(eject_command)
    sub.command("diff")(diff_command)
    sub.command("ack")(ack_command)
    app.add_typer(sub, name="templates")
