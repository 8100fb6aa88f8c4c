"""torch.compile(fullgraph=True) against eager, or torch's documented error where it cannot.

What `expect` of check_compile asserts (opgen decides which, from the schema: Note [What the
generated tests expect] in opgen/api/testing.py):
- "alias_error": a return aliases an argument and the op has no
  torch.Tag.inplace/out: functionalization raises "Found a custom (non-ATen)
  operator whose output has alias annotations";
- "unsupported": the op returns one int, bool, str, str[], ScalarType or a
  SymInt that is not data-dependent: dynamo refuses a torch op returning a
  non-tensor (torch._dynamo.exc.Unsupported);
- "run": compile and compare with eager. A lone float return compiles but the
  graph holds the fake kernel's value, so a fake returning a placeholder fails
  here. opcheck's aot test fails for `-> str` and `-> str[]` (it cannot
  compare strings) and for the "alias_error" ops: check_opcheck's aot_error.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ._compare import Bound, assert_same, message, outputs, tolerances
from ._eager import leaves, no_sample_message
from ._samples import Samples, clone, materialize, tensors_of

__all__ = ["check_compile"]

_ALIAS_ERROR = "Found a custom \\(non-ATen\\) operator whose output has alias annotations"


def _unsupported() -> type[BaseException]:
    from torch._dynamo.exc import Unsupported

    unsupported: type[BaseException] = Unsupported
    return unsupported


def _grads_of(out: Any, kwargs: dict[str, Any], names: tuple[str, ...]) -> list[Any]:
    outs = [o for o in tensors_of(out) if o.requires_grad]
    inputs = leaves(kwargs, names)
    if not outs or not inputs:
        return []
    torch.manual_seed(1234)
    cotangents = [torch.randn_like(o) for o in outs]
    return list(torch.autograd.grad(outs, inputs, cotangents, allow_unused=True))


def check_compile(
    op: Any,
    samples: Samples,
    device: str,
    dtype: Any,
    *,
    backend: str,
    mutated: tuple[str, ...] = (),
    differentiable: tuple[str, ...] = (),
    atol: Bound = None,
    rtol: Bound = None,
    spec: str = "the spec",
    expect: str = "run",
) -> None:
    """torch.compile(fullgraph=True) gives eager's outputs and gradients (or the documented error).

    Inductor fuses the torch ops of gradient formulas, so results may differ from
    eager in the last bits: the spec's atol/rtol apply here as to the reference
    (Note [Test tolerances]). Gradients are compared for the samples that have
    some; an op with gradient formulas must have at least one such sample.
    """
    torch.compiler.reset()

    def call(**kwargs: Any) -> Any:
        return outputs(op(**kwargs), kwargs, mutated)

    compiled = torch.compile(call, backend=backend, fullgraph=True)
    if expect == "alias_error":
        with pytest.raises(RuntimeError, match=_ALIAS_ERROR):
            compiled(**next(materialize(samples, device, dtype)))
        return
    if expect == "unsupported":
        with pytest.raises(_unsupported(), match="returned non-Tensor"):
            compiled(**next(materialize(samples, device, dtype)))
        return
    assert (
        expect == "run"
    ), f"check_compile: expect is 'run', 'alias_error' or 'unsupported', not {expect!r}"
    limits = tolerances(dtype, atol, rtol)
    compared = 0
    for index, kwargs in enumerate(materialize(samples, device, dtype, differentiable)):
        eager_kwargs, compiled_kwargs = clone(kwargs), clone(kwargs)
        expected = call(**eager_kwargs)
        got = compiled(**compiled_kwargs)
        if isinstance(expected, float) and got != expected:
            raise AssertionError(
                message(op, index)(
                    f"compiled {got!r}, eager {expected!r}: torch.compile puts the value the fake "
                    f"kernel returns into the graph; make [fake] in {spec} compute the exact float"
                )
            )
        assert_same(got, expected, message(op, index), **limits)
        got_grads = _grads_of(got, compiled_kwargs, tuple(differentiable))
        expected_grads = _grads_of(expected, eager_kwargs, tuple(differentiable))
        if got_grads or expected_grads:
            torch.testing.assert_close(
                got_grads, expected_grads, equal_nan=True, msg=message(op, index), **limits
            )
            compared += 1
    if differentiable and not compared:
        raise AssertionError(
            no_sample_message(samples, differentiable, spec, "gives a compiled gradient for")
        )
