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


_ISA_LEVELS = ("scalar", "avx2", "avx512")  # Note [Run-time ISA dispatch], kernel_utils.h
_ASK_ISA = (
    "import ctypes, example_ops; from example_ops import _library; "
    "lib = ctypes.CDLL(str(_library.LIBRARY_PATH)); lib.example_cpu_isa.restype = ctypes.c_char_p; "
    "print(lib.example_cpu_isa().decode())"
)


def _kernel_isa(root, **env: str) -> str:
    run = subprocess.run(
        [sys.executable, "-c", _ASK_ISA],
        cwd=root,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize("level", _ISA_LEVELS)
def test_generated_example_kernels_match_the_references_at_every_simd_level(built_example, level):
    """EXAMPLE_CPU_ISA caps the SIMD level the C++ kernels run (kernel_utils.h): the reference
    checks pass on every path the host has (scalar everywhere, AVX2 and AVX-512 where the CPU
    has them). A cap above the host's runs the host's own level, which the library reports."""
    env = {"EXAMPLE_CPU_ISA": level}
    host = _kernel_isa(built_example.root, EXAMPLE_CPU_ISA="")
    if _ISA_LEVELS.index(level) > _ISA_LEVELS.index(host):
        assert _kernel_isa(built_example.root, **env) == host
        return
    assert _kernel_isa(built_example.root, **env) == level
    run = subprocess.run(
        [sys.executable, "-m", "opgen", "test", "--no-build", "-k", "matches_reference"],
        cwd=built_example.root,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout


@pytest.mark.slow
def test_generated_example_force_scalar_and_a_bad_level(built_example):
    """EXAMPLE_FORCE_SCALAR=1 still selects the scalar twins; an unknown EXAMPLE_CPU_ISA is an
    error naming the levels, not a silent fallback."""
    assert _kernel_isa(built_example.root, EXAMPLE_FORCE_SCALAR="1") == "scalar"
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch, example_ops; example_ops.vector_add(torch.ones(2), torch.ones(2))",
        ],
        cwd=built_example.root,
        env={**os.environ, "EXAMPLE_CPU_ISA": "avx1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1
    assert "EXAMPLE_CPU_ISA=avx1 is not a SIMD level: use scalar, avx2 or avx512" in run.stderr
