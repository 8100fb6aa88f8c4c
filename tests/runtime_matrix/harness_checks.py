"""Checks of the opgen.testing helpers themselves, run inside the matrix project.

Copied to tests/test_harness.py of the generated project by tests/test_runtime_matrix.py.
"""

from __future__ import annotations

import pytest
import torch

from opgen.testing import TensorSpec, check_compile, check_gradients, materialize, tolerances
from opgen.testing._schema import bind

import rtm_ops


def test_opcheck_binding_stops_at_the_first_omitted_argument():
    schema = "rtm::sum_shape(Tensor x, float alpha=1.0, float beta=0.0) -> Tensor"
    (kwargs,) = materialize([{"x": TensorSpec((3,)), "beta": 0.5}], "cpu", torch.float32)
    args, rest = bind(schema, kwargs)
    assert [a is kwargs["x"] for a in args] == [True]
    assert rest == {"beta": 0.5}


def test_keyword_only_arguments_are_passed_by_keyword():
    schema = "rtm::affine_kw(Tensor x, *, float alpha=1.0, float beta=0.0) -> Tensor"
    (kwargs,) = materialize([{"x": TensorSpec((3,)), "alpha": 2.0}], "cpu", torch.float32)
    args, rest = bind(schema, kwargs)
    assert len(args) == 1 and rest == {"alpha": 2.0}


def test_gradcheck_fails_when_no_sample_covers_the_input():
    samples = [
        {"x": TensorSpec((3,))},
        {"x": TensorSpec((3,)), "b": TensorSpec((3,), requires_grad=False)},
    ]
    with pytest.raises(AssertionError) as error:
        check_gradients(torch.ops.rtm.opt_add.default, samples, "cpu", "b", spec="ops/opt_add.toml")
    message = str(error.value)
    assert "no sample of ops/opt_add.toml checks the gradient of 'b'" in message
    assert "sample 1 leaves out b" in message and "sample 2 has requires_grad = false" in message


def test_gradcheck_counts_the_samples_it_checked():
    samples = [{"x": TensorSpec((3,))}, {"x": TensorSpec((3,)), "b": TensorSpec((3,))}]
    op = torch.ops.rtm.opt_add.default
    assert check_gradients(op, samples, "cpu", "b", gradgrad=False) == 1
    assert check_gradients(op, samples, "cpu", "x", gradgrad=False, wrapper=rtm_ops.opt_add) == 2


def test_gradcheck_through_a_wrapper_that_drops_autograd_fails():
    op = torch.ops.rtm.exp_square.default

    def broken(**kwargs):
        with torch._C._AutoDispatchBelowAutograd():
            return op(**kwargs)

    with pytest.raises((AssertionError, RuntimeError, ValueError)):
        check_gradients(op, [{"x": TensorSpec((3,))}], "cpu", "x", gradgrad=False, wrapper=broken)


def test_compile_fails_without_any_gradient_to_compare():
    samples = [{"x": TensorSpec((3,), requires_grad=False)}]
    with pytest.raises(
        AssertionError, match="no sample of ops/affine_kw.toml gives a compiled gradient for 'x'"
    ):
        check_compile(
            torch.ops.rtm.affine_kw.default,
            samples,
            "cpu",
            torch.float32,
            backend="eager",
            differentiable=("x",),
            spec="ops/affine_kw.toml",
        )


def test_spec_tolerances_skip_float64_and_never_tighten():
    assert tolerances(torch.float64, 1e-3, 1e-3) == {}
    assert tolerances(torch.float32, None, None) == {}
    assert tolerances(torch.float32, 1e-4, None) == {"atol": 1e-4, "rtol": 1.3e-6}
    assert tolerances(torch.bfloat16, 1e-5, 1e-4) == {"atol": 1e-5, "rtol": 1.6e-2}


def test_spec_tolerances_per_dtype_loosen_only_the_dtypes_named():
    rtol = {"float16": 2e-3}
    assert tolerances(torch.float16, None, rtol) == {"atol": 1e-5, "rtol": 2e-3}
    assert tolerances(torch.float32, None, rtol) == {}  # torch's defaults
    assert tolerances(torch.float64, None, rtol) == {}
    assert tolerances(torch.bfloat16, {"bfloat16": 1e-3}, rtol) == {"atol": 1e-3, "rtol": 1.6e-2}
