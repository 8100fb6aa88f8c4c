"""The `opgen` command line: parse arguments, call the library, report.

The typer application (`opgen/app.py`, the commands in `opgen/commands/`)
is imported only when typer parses the command line.

Note [Direct generate]
Typer costs about as much as a no-op `opgen generate` of 100 ops does itself:
importing it (with click and the command modules) takes ~50 ms, and its
parsing builds a pydantic TypeAdapter for every option it processes (the
defaulted `--help` included), which imports pydantic (~80 ms, 0.4 s on a
loaded machine). Measured with `bench/opgen_speed.py`, going through typer
adds 0.15 s to a no-op generate, 0.18 s to one edited spec and 0.25 s to a
full regeneration of 100 ops: without this path the no-op and one-spec
targets (0.3 s, 0.5 s) do not hold. So `main` runs `opgen generate` with only its on/off
flags, and a no-op `opgen build` (Note [Build stamp] in build/stamp.py), without
importing typer (`opgen/commands/direct.py`); anything else (`--templates
DIR`, `--help`, a typo) goes through typer. A test checks that both ways
give the same output and exit code.
"""

from __future__ import annotations

import sys
from typing import Any

from .commands.direct import answer

__all__ = ["main"]


def main() -> None:
    """The `opgen` executable."""
    code = answer(sys.argv[1:])
    if code is None:
        from .app import app  # typer: only when it parses the command line (see the docstring)

        app()
    elif code:
        sys.exit(code)


def __getattr__(name: str) -> Any:
    """`opgen.cli.app`, the typer application, imported on first use (see the docstring)."""
    if name == "app":
        from .app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
