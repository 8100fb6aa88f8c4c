"""The classic target's C++ Autograd kernel of an op with formulas (Note [Keyset Autograd kernel]):
no-grad calls stay in C++, gradients and tangents go through the package's Python helper."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from _cpp_support import opgen, python

pytestmark = pytest.mark.slow  # compiles a classic library

_CHECK = """
import torch

torch.ops.load_library("cls/_C.so")  # the library alone: the package has not registered its helper yet
x = torch.randn(5, dtype=torch.float64)
raw = torch.ops.cls.sine.default
y = raw(x)
print("no grad in C++", y.grad_fn is None and torch.allclose(y, x.sin()))
try:
    raw(x.clone().requires_grad_())
except RuntimeError as exc:
    print(str(exc).splitlines()[0])

import cls
from torch.autograd import forward_ad as fwAD

xr = x.clone().requires_grad_()
out = raw(xr)
out.sum().backward()
print(type(out.grad_fn).__name__, torch.allclose(xr.grad, x.cos()))
with torch.no_grad():
    print("no_grad", raw(xr).grad_fn is None)
with fwAD.dual_level():
    tangent = fwAD.unpack_dual(raw(fwAD.make_dual(x, torch.ones_like(x)))).tangent
print("forward_ad", torch.allclose(tangent, x.cos()))
try:
    torch.func.grad(lambda v: raw(v).sum())(x)
except RuntimeError as exc:
    print("raw grad refused", "cls.sine" in str(exc))
print("wrapper grad", torch.allclose(torch.func.grad(lambda v: cls.sine(v).sum())(x), x.cos()))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("classic_autograd")
    (root / "opgen.toml").write_text(
        '[project]\nnamespace = "cls"\npackage = "cls"\n\n'
        '[options]\nbackend = "cpp"\ncpp_target = "classic"\n'
    )
    opgen("new", "cls::sine", cwd=root)  # the starter sine: [grad] and [jvp] formulas
    opgen("build", "-j", "2", cwd=root)
    return root


def test_generated_tests_pass(built: Path) -> None:
    """torch.func through the wrapper, the raw handle's refusal, vmap, forward-mode gradcheck."""
    run = subprocess.run(
        [sys.executable, "-m", "opgen", "test", "--no-build"],
        cwd=built,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout
    assert "deprecated" not in run.stdout, "torch's own deprecation warning reached the user"


def test_kernel_stays_in_cpp_without_grad_and_hands_gradients_to_python(built: Path) -> None:
    result = python(_CHECK, cwd=built)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "no grad in C++ True",
        "cls::sine: its gradients are computed in Python: import cls first",
        "_SineFunctionBackward True",
        "no_grad True",
        "forward_ad True",
        "raw grad refused True",
        "wrapper grad True",
    ]
