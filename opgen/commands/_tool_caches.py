"""The folders Python and torch write caches into while `opgen test` and `opgen bench` run.

Those writes are not opgen's (the interpreter writes `__pycache__/`, Inductor
its compile cache under `.opgen/cache/`), so before running the project's
code opgen makes sure they cannot be led outside the project: the cache
folder is made through the confined path (Note [Confined writes] in
write/confined.py), and a symlink in it or in place of a `__pycache__/` folder of
the package or the tests stops the command. A symlink swapped in while the
tests run is out of scope.
"""

from __future__ import annotations

from pathlib import Path

from ..spec.config import CONFIG_FILE, build_config
from ..spec.load import load_toml
from ..spec.paths import STATE_DIR
from ..write.project_files import ProjectFiles

__all__ = ["CACHE_DIR", "confine_caches"]

CACHE_DIR = f"{STATE_DIR}/cache"


def confine_caches(root: Path) -> None:
    """Make `.opgen/cache/` and refuse a symlink in it or at any `__pycache__` opgen's outputs get."""
    files = ProjectFiles(root)
    package = build_config(load_toml(root / CONFIG_FILE)).package
    files.mkdir(CACHE_DIR)
    files.confined.check_tree(CACHE_DIR)
    for folder in ("tests", package, f"{package}/_generated", f"{package}/kernels"):
        names = files.confined.listdir(folder) or []
        if "__pycache__" in names:
            files.confined.check_tree(f"{folder}/__pycache__")
