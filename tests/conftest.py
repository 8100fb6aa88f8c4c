"""Fixtures shared by the test suite.

Test tiers (markers in pyproject.toml): `slow` marks tests that compile C++ or
CUDA, build a wheel or a venv, or run a generated test suite end to end;
`python -m pytest -m "not slow"` is the fast tier to run while editing. Work
that several slow tests need is done once per session here.

Two environment variables serve CI (.ci/run):
- OPGEN_EXAMPLE_BUILD=DIR: the reference set is built in DIR (a folder that does not
  exist yet) and kept there, instead of in a temporary copy, so that a later run
  (under another torch) can use the library without rebuilding it;
- OPGEN_MUST_RUN=test_a.py,test_b.py: a test of these files that skips fails instead,
  saying why it skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from _support import EXAMPLE, copy_project, has_nvcc

# Projects kept as data (tests/data/migration/ holds one made by an earlier opgen): their
# generated tests are not opgen's.
collect_ignore = ["data"]


@pytest.fixture
def chdir(tmp_path: Path):
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(old)


@dataclass(frozen=True)
class BuiltExample:
    """A copy of generated_example/, built: its root and what `opgen build` printed."""

    root: Path
    output: str


_MUST_RUN = frozenset(f for f in os.environ.get("OPGEN_MUST_RUN", "").split(",") if f)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.path.name in _MUST_RUN:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped, but OPGEN_MUST_RUN says {item.path.name} must run: {reason}"
    return report


@pytest.fixture(scope="session")
def built_example(tmp_path_factory: pytest.TempPathFactory) -> BuiltExample:
    """generated_example/ copied and built once per session, every .cu compile-checked with nvcc where installed.

    A copy, so that the suite never writes build outputs into the repository: a temporary
    one, or OPGEN_EXAMPLE_BUILD's (kept for a later run).
    """
    kept = os.environ.get("OPGEN_EXAMPLE_BUILD")
    if kept and Path(kept).exists():
        raise AssertionError(f"OPGEN_EXAMPLE_BUILD={kept} exists: name a folder to create")
    target = Path(kept) if kept else tmp_path_factory.mktemp("example") / "generated_example"
    root = copy_project(EXAMPLE, target)
    command = [sys.executable, "-m", "opgen", "build", *(["--check-cuda"] if has_nvcc() else [])]
    run = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    return BuiltExample(root, run.stdout + run.stderr)
