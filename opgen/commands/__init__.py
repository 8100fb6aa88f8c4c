"""Sub-commands that live in their own modules; each module's `register(app)` adds them.

Modules here import only typer at the top so `opgen --help` stays fast.
"""

from __future__ import annotations

import importlib

_MODULES = ("build", "templates", "bench")


def register_all(app) -> None:
    for name in _MODULES:
        importlib.import_module(f"{__name__}.{name}").register(app)
