"""Helpers the tests share: the in-process CLI runner and project copies."""

from __future__ import annotations

import os
import shutil
import sys
import venv
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


def has_nvcc() -> bool:
    return shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").is_file()


def copy_project(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "build", "*.so", "lock"))
    return dst


def site_dirs() -> list[str]:
    """Where the running interpreter finds its packages (a venv's own and any a .pth file added)."""
    return list(
        dict.fromkeys(
            p
            for p in sys.path
            if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()
        )
    )


def make_venv(path: Path, python: str | None = None) -> Path:
    """A fresh venv that finds torch and opgen's dependencies where the running interpreter does.

    A `.pth` file lists the running interpreter's package folders after the
    venv's own, so what is installed into the venv comes first. Not
    `system_site_packages`: that inherits the base interpreter's packages,
    not those of the venv the tests may be running in. (`.pth` files inside
    the listed folders are not run: an editable install there stays out.)
    """
    if python is None:
        venv.EnvBuilder(with_pip=False).create(path)
    else:
        import subprocess

        subprocess.run([python, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    bin_python = path / "bin" / "python"
    import subprocess

    site = subprocess.run(
        [bin_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "running_interpreter.pth").write_text("".join(f"{d}\n" for d in site_dirs()))
    return bin_python


def clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH, so a subprocess imports what its interpreter has installed."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run_generated_tests(root: Path, *args: str) -> str:
    """Run a generated project's tests (`pytest -q ARGS tests`) in a fresh interpreter that
    imports the project's package; returns the tail of what pytest printed."""
    import subprocess

    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "tests"]
    run = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    return run.stdout[-8000:] + run.stderr[-2000:]
