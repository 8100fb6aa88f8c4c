"""opgen's own code: ruff's lint rules and black's format (pyproject.toml), mypy over opgen/,
and a docstring on every public function of the library API."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

from _support import REPO


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_ruff_lint() -> None:
    run = _run("ruff", "check", "opgen", "tests", "bench")
    assert run.returncode == 0, run.stdout + run.stderr


def test_black_format() -> None:
    run = _run("black", "--check", "--quiet", "opgen", "bench")
    assert run.returncode == 0, "run `black opgen bench`:\n" + run.stdout + run.stderr


def test_lint_and_format_see_every_module() -> None:
    """No module of opgen/ is skipped by an exclude pattern (a folder named like an output
    folder, as opgen/build/ is, matches `build` anywhere)."""
    modules = sorted(str(p) for p in (REPO / "opgen").rglob("*.py"))
    linted = _run("ruff", "check", "--show-files", "opgen").stdout.split()
    formatted = _run("black", "--check", "--verbose", "opgen").stderr
    assert [m for m in modules if m not in linted] == []
    assert [m for m in modules if m not in formatted] == []


def test_mypy() -> None:
    run = _run("mypy")  # files and options: [tool.mypy] in pyproject.toml
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Success" in run.stdout


_LIBRARY = ("opgen.spec.model", "opgen.errors", "opgen.targets", "opgen.generate", "opgen.scaffold.new_op", "opgen.build.run", "opgen.render.overrides", "opgen.project.load", "opgen.write.project_files", "opgen.write.changes", "opgen.write.apply", "opgen.write.plan", "opgen.write.confined", "opgen.commands._tool_caches", "opgen.targets.project", "opgen.adopt.importer")


def _undocumented(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isfunction(obj) and not obj.__doc__:
            missing.append(name)
        if inspect.isclass(obj):
            if not obj.__doc__ or obj.__doc__.startswith(f"{name}("):  # dataclasses make one up
                missing.append(name)
            missing += [f"{name}.{attr}" for attr, value in vars(obj).items() if not attr.startswith("_") and inspect.isfunction(value) and not value.__doc__]
    return missing


@pytest.mark.parametrize("module_name", _LIBRARY)
def test_the_library_api_is_documented(module_name: str) -> None:
    assert _undocumented(module_name) == []
