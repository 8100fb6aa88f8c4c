"""The classic target's autograd (Notes [One autograd.Function per op] and [Written arguments]):
an op with formulas gets torch's register_autograd from Python (the raw handle's gradients) and
its Function (the wrapper's torch.func); an op that writes an argument gets torch's own C++
fallbacks, so the raw handle bumps the versions of what it writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from _cpp_support import opgen, python

pytestmark = pytest.mark.slow  # compiles a classic library

_CHECK = """
import torch

import cls

x = torch.randn(5, dtype=torch.float64)
raw = torch.ops.cls.sine.default
xr = x.clone().requires_grad_()
out = raw(xr)
out.sum().backward()
print("raw backward", torch.allclose(xr.grad, x.cos()))
with torch.no_grad():
    print("no_grad", raw(xr).grad_fn is None)
print("wrapper grad", torch.allclose(torch.func.grad(lambda v: cls.sine(v).sum())(x), x.cos()))
print("wrapper jvp", torch.allclose(torch.func.jvp(cls.sine, (x,), (torch.ones_like(x),))[1], x.cos()))

out = torch.zeros(5)
before = out._version
torch.ops.cls.add_into(torch.ones(5), out)
print("raw version bump", out._version > before, torch.equal(out, torch.ones(5)))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("classic_autograd")
    (root / "opgen.toml").write_text(
        '[project]\nnamespace = "cls"\npackage = "cls"\n\n'
        '[options]\nbackend = "cpp"\ncpp_target = "classic"\n'
    )
    opgen("new", "cls::sine", cwd=root)  # the starter sine: [grad] and [jvp] formulas
    opgen("new", "cls::add_into", "--schema", "(Tensor x, Tensor(a!) out) -> ()", cwd=root)
    kernel = root / "csrc" / "cpu" / "add_into.cpp"
    text = kernel.read_text()
    assert "out" in text
    opgen("build", "-j", "2", cwd=root)
    return root


def test_generated_tests_pass(built: Path) -> None:
    """torch.func through the wrapper, vmap, forward-mode gradcheck, the written version."""
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


def test_raw_handle_gradients_and_written_versions(built: Path) -> None:
    result = python(_CHECK, cwd=built)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "raw backward True",
        "no_grad True",
        "wrapper grad True",
        "wrapper jvp True",
        "raw version bump True True",
    ]
