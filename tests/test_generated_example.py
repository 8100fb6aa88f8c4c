"""The reference set in generated_example/: up to date with its specs, and its generated tests pass."""

from __future__ import annotations

import subprocess
import sys

import pytest

from _support import EXAMPLE, run_cli


def test_generated_example_is_up_to_date():
    result = run_cli("generate", "--check", cwd=EXAMPLE)
    assert result.exit_code == 0, result.output


@pytest.mark.slow  # builds the CUDA kernels with nvcc where it is installed
def test_generated_example_tests_pass():
    if any('backend = "cpp"' in p.read_text() for p in (EXAMPLE / "ops").glob("*.toml")):
        build = subprocess.run([sys.executable, "-m", "opgen", "build"], cwd=EXAMPLE, capture_output=True, text=True, timeout=900)
        assert build.returncode == 0, build.stdout + build.stderr
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
