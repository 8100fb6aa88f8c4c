"""The build settings as setup.py reads them: the lines of its `build_settings` fence.

setup.py is the user's (created once, then merged), so the settings live in
a fenced region (Note [Fenced regions]) that every `opgen generate` rewrites
from opgen.toml and the ops' `[build]` tables (Note [Build settings]); the
code around it, which expands `$NAME` paths and hands the lists to
setuptools, is the scaffold's and merges like any other line.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..spec.backends import backend_of
from ..spec.fences import fence_lines
from ..spec.model import BuildSettings, OpSpec, ProjectConfig
from .literals import string

__all__ = ["BUILD_SETTINGS", "setup_settings"]

BUILD_SETTINGS = "build_settings"
_LINE = 100  # black's line length: longer lists are written one item a line, as black would
# setup.py variable -> BuildSettings field
_VARIABLES = (
    ("CXX_FLAGS", "cxx_flags"),
    ("NVCC_FLAGS", "cuda_flags"),
    ("DEFINES", "defines"),
    ("INCLUDE_DIRS", "include_dirs"),
    ("LIBRARY_DIRS", "library_dirs"),
    ("LIBRARIES", "libraries"),
    ("SOURCES", "sources"),
)


def _assignment(name: str, items: Iterable[str]) -> list[str]:
    shown = [string(item) for item in items]
    one_line = f"{name} = [{', '.join(shown)}]"
    if len(one_line) <= _LINE:
        return [one_line]
    return [f"{name} = [", *(f"    {item}," for item in shown), "]"]


def setup_settings(config: ProjectConfig, ops: Iterable[OpSpec]) -> dict[str, object]:
    """The fence of setup.py: its begin and end lines and the assignments between them."""
    tables: list[BuildSettings] = [config.build] + [
        op.build for op in ops if backend_of(op).compiles_cpp
    ]
    lines: list[str] = []
    for variable, key in _VARIABLES:
        values = [v for table in tables for v in getattr(table, key)]
        unique = values if key.endswith("flags") else list(dict.fromkeys(values))
        lines += _assignment(variable, unique)
    begin, end = fence_lines(BUILD_SETTINGS, "[build] in opgen.toml and the specs", "#")
    return {"begin": begin, "end": end, "lines": lines}
