"""The typed wrapper's choice between the registered op and its autograd.Function
(opgen/runtime/autograd.py, copied into each package as `_autograd.py`)."""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as fwAD

from opgen.runtime.autograd import needs_function, tensors_of


def test_plain_calls_take_the_registered_op():
    a, b = torch.randn(2), torch.randn(2, requires_grad=True)
    assert not needs_function(a, a)
    assert not needs_function(a, b)  # register_autograd serves plain autograd
    assert needs_function(a, b, registered=False)  # keyword-only tensors: no registered formulas
    with torch.no_grad():
        assert not needs_function(a, b, registered=False)
    assert not needs_function()


def test_a_tangent_on_any_input_takes_the_function():
    a, b = torch.randn(2), torch.randn(2)
    with fwAD.dual_level():
        assert not needs_function(a, b)  # a level, but no tangent
        dual = fwAD.make_dual(b, torch.ones(2))
        assert needs_function(a, dual)  # on the second input: every input is asked
        assert needs_function(*tensors_of(a, [None, dual]))


def test_torch_func_wrappers_take_the_function():
    seen = []

    def f(x):
        seen.append(needs_function(x, torch.ones(2)))
        return x.sum()

    torch.func.grad(f)(torch.randn(2))
    torch.func.jvp(f, (torch.randn(2),), (torch.ones(2),))
    assert seen == [True, True]


def test_none_is_left_to_the_ops_own_check():
    # A None where a tensor belongs reaches the op, whose check names the argument; the
    # choice itself must not raise first, inside a dual level or not.
    t = torch.randn(2, requires_grad=True)
    assert not needs_function(None, t)
    with fwAD.dual_level():
        assert not needs_function(None, fwAD.make_dual(torch.randn(2), torch.ones(2)))
    assert tensors_of(None, t, [t, None], ()) == [t, t]
