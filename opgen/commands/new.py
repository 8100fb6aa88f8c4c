"""`opgen new`: create an op (and the project, if the folder has none), then generate it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..spec.backends import backend_traits
from ._support import fail, report


def new(
    name: Annotated[
        str,  # described in the docstring: typer would print a type placeholder beside it
        typer.Argument(metavar="NAMESPACE::OP", hidden=True),
    ],
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            help='Schema, e.g. "(Tensor x, float alpha=1.0) -> Tensor".',
            metavar="SCHEMA",
        ),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="python, cpp or triton (default: the project's).",
            metavar="python|cpp|triton",
        ),
    ] = None,
    devices: Annotated[
        str,
        typer.Option(
            "--devices",
            help="Comma-separated devices: cpu, cuda (default: cpu; cpu,cuda for triton).",
            metavar="DEVICES",
        ),
    ] = "",
) -> None:
    """Create the op NAMESPACE::OP (and the project, if the folder has none), then generate it.

    \b
    Examples:
      opgen new mylib::foo            a Python op (a sine) in a new project, its tests passing
      opgen new mylib::swiglu --backend cpp --devices cpu,cuda \\
          --schema "(Tensor x, Tensor gate) -> Tensor"
                                      a C++ op whose kernels copy x: fill in the spec and kernels
      opgen test                      then build (C++) and run the op's generated tests
    """
    from ..errors import OpgenError
    from ..scaffold.new_op import new_op

    cwd = Path.cwd().resolve()
    try:
        made = new_op(
            cwd, name, schema, backend, [d.strip() for d in devices.split(",") if d.strip()]
        )
    except OpgenError as exc:
        raise fail(exc, cwd) from None
    report(made.generated)
    if made.to_fill:
        typer.echo(f"next: fill in {' and '.join(made.to_fill)}, then `opgen test`")
    else:
        yours = " and ".join([made.spec, *made.kernels])
        first = (
            " (it runs `opgen build` first)" if backend_traits(made.backend).compiles_cpp else ""
        )
        typer.echo(f"next: `opgen test`{first}, then make the op yours: {yours}")


def register(app: typer.Typer) -> None:
    app.command()(new)
