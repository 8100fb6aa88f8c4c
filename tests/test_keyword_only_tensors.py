"""Ops that take keyword-only tensors (Note [Keyword-only tensors] in opgen/api/decisions.py).

torch.library.register_autograd refuses them (torch 2.13), so their module registers no formulas:
it imports, its typed wrapper applies the Function for every gradient and tangent, and generate
warns that the raw handle gets no gradients. With `private_torch = ["raw_handle_transforms"]`
the raw handle applies the Function, the keyword-only arguments passed by keyword.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from _cpp_support import opgen, python

pytestmark = pytest.mark.slow  # imports generated packages in fresh interpreters

SPEC = """
name = "kwt::scaled"
schema = "(Tensor x, *, Tensor? w=None, float alpha=1.0) -> Tensor"

[grad]
x = "grad * alpha * (1 if w is None else w)"

[jvp]
result = "x_t * alpha * (1 if w is None else w)"

[fake]
like = "x"

[test]
reference = "x * alpha * (1 if w is None else w)"

[[test.samples]]
x = {shape = [3, 4]}
w = {shape = [3, 4], requires_grad = false}
alpha = 2.0
"""

# through NumPy: autograd cannot see inside, so a gradient can only come from the formulas
KERNEL = """
import numpy
import torch
from torch import Tensor


def scaled(x: Tensor, *, w: Tensor | None = None, alpha: float = 1.0) -> Tensor:
    out = x.detach().numpy() * alpha
    if w is not None:
        out = out * w.detach().numpy()
    return torch.from_numpy(numpy.ascontiguousarray(out))
"""

CHECKS = """
import torch, kwt
from torch.func import grad, jvp

x = torch.randn(3, dtype=torch.float64, requires_grad=True)
w = torch.randn(3, dtype=torch.float64)
expected = 2.0 * w
(got,) = torch.autograd.grad(kwt.scaled(x, w=w, alpha=2.0).sum(), x)
assert torch.allclose(got, expected), (got, expected)
got = grad(lambda x: kwt.scaled(x, w=w, alpha=2.0).sum())(x.detach())
assert torch.allclose(got, expected), (got, expected)
_, tangent = jvp(lambda x: kwt.scaled(x, w=w, alpha=2.0), (x.detach(),), (torch.ones(3, dtype=torch.float64),))
assert torch.allclose(tangent, expected), (tangent, expected)
print("wrapper ok")
"""

RAW = """
import torch, kwt

x = torch.randn(3, dtype=torch.float64, requires_grad=True)
w = torch.randn(3, dtype=torch.float64)
(got,) = torch.autograd.grad(torch.ops.kwt.scaled(x, w=w, alpha=2.0).sum(), x)
assert torch.allclose(got, 2.0 * w), got
(got,) = torch.autograd.grad(torch.ops.kwt.scaled(x).sum(), x)  # defaults left out
assert torch.allclose(got, torch.ones(3, dtype=torch.float64)), got
print("raw ok")
"""


def _project(root: Path, options: str = "") -> str:
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(
        f'[project]\nnamespace = "kwt"\npackage = "kwt"\n\n[options]\n{options}'
    )
    (root / "ops" / "scaled.toml").write_text(SPEC.lstrip())
    first = opgen("generate", cwd=root)
    (root / "kwt" / "kernels" / "scaled.py").write_text(textwrap.dedent(KERNEL).lstrip())
    return first.stdout + first.stderr


def test_the_module_imports_and_its_wrapper_differentiates(tmp_path: Path) -> None:
    _project(tmp_path)
    module = (tmp_path / "kwt" / "_generated" / "scaled.py").read_text()
    assert "register_autograd(" not in module  # torch refuses it: the import would fail
    run = python(CHECKS, cwd=tmp_path)
    assert run.returncode == 0 and "wrapper ok" in run.stdout, run.stdout + run.stderr


def test_generate_warns_that_the_raw_handle_has_no_gradients(tmp_path: Path) -> None:
    output = _project(tmp_path)
    assert (
        "ops/scaled.toml" in output
        and "warning: kwt::scaled takes keyword-only tensors (w)" in output
    )
    assert "torch.ops.kwt.scaled and torch.compile get no gradients" in output
    assert "make w positional" in output


def test_the_opt_in_gives_the_raw_handle_the_formulas(tmp_path: Path) -> None:
    output = _project(tmp_path, 'private_torch = ["raw_handle_transforms"]\n')
    assert "keyword-only tensors" not in output
    run = python(RAW, cwd=tmp_path)
    assert run.returncode == 0 and "raw ok" in run.stdout, run.stdout + run.stderr
