"""opgen bench compares opgen's results with its oracle's before timing (opgen/bench/agree.py)."""

from __future__ import annotations

import torch

from opgen.bench.agree import disagreement
from opgen.bench.cases import Case


def _case(scope: dict, inputs: tuple[str, ...], mode: str = "forward", **fields) -> Case:
    case = Case("mylib::op", {"n": 4}, mode, [], {"torch": torch, **scope})
    case.inputs = inputs
    for name, value in fields.items():
        setattr(case, name, value)
    return case


def test_an_op_that_returns_nothing_is_compared_on_what_it_writes():
    x = torch.arange(4.0)
    scope = {"x": x, "_op": lambda x: (x.mul_(2), None)[1]}
    case = _case(scope, ("x",), returns=0, mutated=("x",), reference_returns_writes=True)
    assert disagreement(case, {"opgen": "_op(x)", "reference": "x * 2"}) is None
    why = disagreement(case, {"opgen": "_op(x)", "reference": "x * 3"})
    assert why is not None and why.startswith("argument 'x' afterwards: 3 of 4 elements differ")
    assert why.endswith("(against reference)")
    assert torch.equal(x, torch.arange(4.0))  # each side ran on copies
    # a [bench] reference writes as the op does; what it returns besides is not compared
    case.reference_returns_writes = False
    assert disagreement(case, {"opgen": "_op(x)", "reference": "(x.mul_(2), 5)"}) is None
    assert "argument 'x' afterwards" in disagreement(case, {"opgen": "_op(x)", "reference": "x.mul_(3)"})


def test_the_oracle_is_the_reference_else_native_else_original():
    case = _case({"x": torch.ones(3)}, ("x",), returns=1)
    assert disagreement(case, {"opgen": "x + 1", "native": "x + 2", "reference": "x + 1"}) is None
    assert "(against native)" in disagreement(case, {"opgen": "x + 1", "native": "x + 2", "original": "x + 1"})
    assert disagreement(case, {"opgen": "x + 1", "compiled": "x + 2"}) is None  # nothing to compare with


def test_forward_and_backward_compare_each_gradient_on_copies():
    x, w = torch.randn(5, requires_grad=True), torch.randn(5, requires_grad=True)
    g = torch.randn(5)
    scope = {"x": x, "w": w, "_wrt": (x, w), "_gout": (g,), "_grad": torch.autograd.grad}
    case = _case(scope, ("x", "w"), mode="forward+backward", returns=1)
    right = "_grad((x * w), _wrt, _gout, allow_unused=True)"
    wrong = "_grad((x * w.detach() + (x.detach() * w) * 2), _wrt, _gout, allow_unused=True)"
    assert disagreement(case, {"opgen": right, "reference": right}) is None
    why = disagreement(case, {"opgen": wrong, "reference": right})
    assert why is not None and why.startswith("the gradient of 'w': 5 of 5 elements differ")
    assert x.grad is None and w.grad is None


def test_an_unused_input_has_no_gradient_or_a_zero_one():
    x, w = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    scope = {"x": x, "w": w, "_wrt": (x, w), "_gout": (torch.ones(3),), "_grad": torch.autograd.grad}
    case = _case(scope, ("x", "w"), mode="forward+backward", returns=1)
    without_w = "_grad((x * 2), _wrt, _gout, allow_unused=True)"
    zero_w = "_grad((x * 2 + w * 0), _wrt, _gout, allow_unused=True)"
    some_w = "_grad((x * 2 + w), _wrt, _gout, allow_unused=True)"
    assert disagreement(case, {"opgen": without_w, "reference": zero_w}) is None
    assert "the gradient of 'w': a tensor against NoneType" in disagreement(
        case, {"opgen": without_w, "reference": some_w}
    )


def test_tolerance_follows_the_dtype_and_integers_compare_exactly():
    b = torch.linspace(1, 2, 64, dtype=torch.bfloat16)
    case = _case({"b": b}, ("b",), returns=1)
    one_ulp = "(b.float() * (1 + 2 ** -8)).to(torch.bfloat16)"
    assert disagreement(case, {"opgen": one_ulp, "reference": "b"}) is None
    assert "elements differ" in disagreement(case, {"opgen": "b * 1.1", "reference": "b"})
    f = torch.linspace(1, 2, 64)
    case = _case({"f": f}, ("f",), returns=1)
    assert disagreement(case, {"opgen": "f * (1 + 1e-5)", "reference": "f"}) is None
    assert "elements differ" in disagreement(case, {"opgen": "f * (1 + 1e-2)", "reference": "f"})
    i = torch.arange(10)
    case = _case({"i": i}, ("i",), returns=1)
    assert disagreement(case, {"opgen": "i.flip(0)", "reference": "i"}) == (
        "output 0: 10 of 10 elements differ (against reference)"
    )
    assert disagreement(case, {"opgen": "i[1:]", "reference": "i"}) == (
        "output 0: shape (9,) against (10,) (against reference)"
    )


def test_a_wrong_element_among_large_ones_is_caught():
    """The tolerance scales with the largest value, but a wrong small element still shows."""
    x = torch.cat([torch.full((10,), 1000.0), torch.full((10,), 1.0)])
    case = _case({"x": x}, ("x",), returns=1)
    assert "1 of 20 elements differ, by up to 1" in disagreement(
        case, {"opgen": "x.index_fill(0, torch.tensor([15]), 2.0)", "reference": "x"}
    )


def test_complex_results_compare_both_parts():
    z = torch.randn(8, dtype=torch.complex64)
    case = _case({"z": z}, ("z",), returns=1)
    assert disagreement(case, {"opgen": "z.conj().resolve_conj()", "reference": "z.conj()"}) is None
    assert "8 of 8 elements differ" in disagreement(case, {"opgen": "z.conj().resolve_conj()", "reference": "z"})
