"""Helpers the tests share: the in-process CLI runner and project copies."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "generated_example"


def run_cli(*args: str, cwd: Path):
    """Run the typer app in-process in `cwd`; returns typer's Result."""
    from typer.testing import CliRunner

    from opgen.cli import app

    old = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, list(args))
    finally:
        os.chdir(old)


def copy_project(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "build", "*.so", "lock"))
    return dst
