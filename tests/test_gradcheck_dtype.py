"""Gradient checks run in float64; a kernel without a float64 path hears why and how to opt out
(`[test] gradcheck_dtype = "float32"`), and with that key its gradients are checked in float32."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from opgen.generate import generate
from opgen.scaffold.new_op import new_op

from _support import run_generated_tests

SCHEMA = "(Tensor x, Tensor g) -> Tensor"
SPEC_TAIL = """
[grad]
x = "grad * F.silu(g)"
g = "grad * x * torch.sigmoid(g) * (1 + g * (1 - torch.sigmoid(g)))"

[fake]
like = "x"

[test]
reference = "x * F.silu(g)"
dtypes = ["float32"]

[[test.samples]]
x = {shape = [4, 8]}
g = {shape = [4, 8]}
"""
KERNEL = '''"""A float32-only kernel, as many real ones are."""

from __future__ import annotations

import torch
from torch import Tensor


def swiglu(x: Tensor, g: Tensor) -> Tensor:
    if x.dtype != torch.float32:
        raise RuntimeError(f"mylib::swiglu supports float32 only, got {x.dtype}")
    return x * torch.nn.functional.silu(g)
'''


def _swiglu(root: Path, backend: str = "python") -> Path:
    new_op(root, "mylib::swiglu", SCHEMA, backend)
    spec = root / "ops" / "swiglu.toml"
    head = spec.read_text().split("\n[", 1)[0]
    spec.write_text(head + "\n" + SPEC_TAIL)
    return spec


@pytest.mark.slow  # runs the generated tests twice (torch.compile among them)
def test_a_float32_kernel_hears_why_gradcheck_fails_and_opts_out(tmp_path: Path) -> None:
    spec = _swiglu(tmp_path)
    (tmp_path / "mylib" / "kernels" / "swiglu.py").write_text(KERNEL)
    assert not generate(tmp_path).failed
    failed = run_generated_tests(tmp_path, "-k", "gradcheck")
    assert "failed" in failed
    assert "gradcheck calls torch.ops.mylib.swiglu.default in float64" in failed, failed
    assert "mylib::swiglu supports float32 only, got torch.float64" in failed
    assert 'gradcheck_dtype = "float32" under [test] in ops/swiglu.toml' in failed

    spec.write_text(spec.read_text().replace("[test]\n", '[test]\ngradcheck_dtype = "float32"\n'))
    assert not generate(tmp_path).failed
    assert "GRAD_DTYPE = torch.float32" in (tmp_path / "tests" / "test_swiglu.py").read_text()
    passed = run_generated_tests(tmp_path, "-m", "not distributed")
    assert (
        re.search(r"\d+ passed", passed) and "failed" not in passed and "error" not in passed
    ), passed


def test_the_cpp_dtype_check_follows_gradcheck_dtype(tmp_path: Path) -> None:
    (tmp_path / "opgen.toml").write_text(
        '[project]\nnamespace = "mylib"\npackage = "mylib"\n\n[options]\nbackend = "cpp"\n'
    )
    spec = _swiglu(tmp_path, "cpp")
    assert not generate(tmp_path).failed
    kernel = tmp_path / "csrc" / "cpu" / "swiglu.cpp"
    assert "x must be float32 or float64" in kernel.read_text()
    spec.write_text(spec.read_text().replace("[test]\n", '[test]\ngradcheck_dtype = "float32"\n'))
    assert not generate(tmp_path).failed
    assert '"mylib::swiglu: x must be float32")' in kernel.read_text()
