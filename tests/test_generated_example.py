"""The reference set in generated_example/: up to date with its specs, and its generated tests pass."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from _support import EXAMPLE, run_cli


def test_generated_example_is_up_to_date():
    result = run_cli("generate", "--check", cwd=EXAMPLE)
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_generated_example_tests_pass(built_example):
    run = subprocess.run(
        [sys.executable, "-m", "opgen", "test", "--no-build"],
        cwd=built_example.root,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "script_method" not in run.stdout


@pytest.mark.slow
def test_generated_example_scalar_kernels_match_the_references(built_example):
    """EXAMPLE_FORCE_SCALAR=1 makes the C++ kernels take their scalar twins (kernel_utils.h):
    the reference checks must pass on that path too, as they do on the AVX2 one."""
    run = subprocess.run(
        [sys.executable, "-m", "opgen", "test", "--no-build", "-k", "matches_reference"],
        cwd=built_example.root,
        env={**os.environ, "EXAMPLE_FORCE_SCALAR": "1"},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
