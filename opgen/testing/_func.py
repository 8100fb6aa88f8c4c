"""The checks of torch.func through an op: each fails when the op's autograd.Function or its
Autograd kernel is wrong."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from ._samples import Sample, Samples, materialize, tensors_of

__all__ = [
    "check_raw_handle_refuses",
    "check_torch_func",
    "differentiable_outputs",
    "function_of",
    "like",
    "no_sample",
    "pick",
    "stacked",
    "tensor_names",
]


def like(value: Any, make: Callable[[Any], Any]) -> Any:
    """`value` with each tensor replaced by `make(tensor)` (lists and tuples kept)."""
    if isinstance(value, torch.Tensor):
        return make(value)
    if isinstance(value, (list, tuple)):
        return type(value)(like(v, make) for v in value)
    return value


def stacked(trees: list[Any]) -> Any:
    """Trees of the same structure made into one, each tensor leaf stacked along a new dim 0."""
    first = trees[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(trees)
    if isinstance(first, (list, tuple)):
        return type(first)(stacked(list(parts)) for parts in zip(*trees, strict=True))
    return first


def pick(
    samples: Samples,
    device: str,
    dtype: Any,
    names: Iterable[str],
    reference: Callable[..., Any] | None = None,
) -> Sample | None:
    """The smallest sample that gives every tensor of `names` and every output some elements."""
    names = tuple(names)
    best, best_size = None, None
    for kwargs in materialize(samples, device, dtype):
        tensors = [t for name in names for t in tensors_of(kwargs.get(name))]
        if len(tensors) < len(names) or not all(t.numel() for t in tensors):
            continue
        if reference is not None and not all(o.numel() for o in tensors_of(reference(**kwargs))):
            continue
        size = sum(t.numel() for value in kwargs.values() for t in tensors_of(value))
        if best_size is None or size < best_size:
            best, best_size = kwargs, size
    return best


def tensor_names(samples: Samples, names: Iterable[str]) -> tuple[str, ...]:
    """The inputs of `names` that samples give a tensor or a list of tensors."""
    return tuple(
        name
        for name in names
        if any(callable(sample) or sample.get(name) is not None for sample in samples)
    )


def function_of(op: Callable[..., Any], kwargs: Sample, names: tuple[str, ...]) -> Any:
    """`op` as a function of the arguments `names`, positionally; the sample gives the others."""

    def call(*tensors: Any) -> Any:
        bound = dict(kwargs)
        bound.update(zip(names, tensors, strict=True))
        return op(**bound)

    return call


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def differentiable_outputs(fn: Callable[..., Any]) -> Callable[..., tuple[Any, ...]]:
    """`fn` returning its floating (and complex) output tensors, lists opened, as one tuple:
    what torch.func differentiates (an index, offsets or number output has no gradient)."""

    def call(*args: Any) -> tuple[Any, ...]:
        return tuple(o for o in tensors_of(fn(*args)) if o.is_floating_point() or o.is_complex())

    return call


def no_sample(what: str, spec: str) -> str:
    return (
        f"no sample of {spec} gives every differentiable input a non-empty tensor and a non-empty "
        f"result: {what} needs one"
    )


def _forward_ad(fn: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
    with fwAD.dual_level():
        duals = [
            (
                [fwAD.make_dual(e, f) for e, f in zip(p, t, strict=True)]
                if isinstance(p, list)
                else fwAD.make_dual(p, t)
            )
            for p, t in zip(primals, tangents, strict=True)
        ]
        out = fn(*duals)
        found = tuple(fwAD.unpack_dual(o).tangent for o in _as_tuple(out))
    assert all(t is not None for t in found), "forward-mode AD lost the tangent"
    return found if isinstance(out, (tuple, list)) else found[0]


def check_torch_func(
    wrapper: Callable[..., Any],
    reference: Callable[..., Any],
    samples: Samples,
    device: str,
    *,
    differentiable: tuple[str, ...],
    jvp: bool = True,
    batched: bool = True,
    spec: str = "the spec",
    dtype: Any = torch.float64,
) -> None:
    """Through the typed wrapper, torch.func agrees with itself on the reference expression.

    grad, vjp, jacrev, jvp, jacfwd and torch.autograd.forward_ad, in float64 (or
    the spec's gradcheck_dtype) on the smallest sample, over the floating outputs. Without a [jvp] table the
    forward-mode ones must raise an error naming it (never return zeros); without
    a batching rule (`batched=False`) jacfwd, which vmaps the op itself, must
    raise torch's error for an autograd.Function without vmap support.
    """
    names = tensor_names(samples, differentiable)
    kwargs = pick(samples, device, dtype, names, reference)
    if kwargs is None:
        raise AssertionError(no_sample("torch.func", spec))
    primals = tuple(like(kwargs[name], lambda t: t.detach()) for name in names)
    ours = differentiable_outputs(function_of(wrapper, kwargs, names))
    theirs = differentiable_outputs(function_of(reference, kwargs, names))
    argnums = tuple(range(len(names)))
    torch.manual_seed(7)
    weights = tuple(torch.randn_like(o) for o in theirs(*primals))
    tangents = tuple(like(p, torch.randn_like) for p in primals)

    def scalar(fn: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *t: sum((o * w).sum() for o, w in zip(fn(*t), weights, strict=True))

    def same(label: str, got: Any, expected: Any) -> None:
        torch.testing.assert_close(
            got, expected, msg=lambda m: f"torch.func.{label} through the wrapper: {m}"
        )

    same(
        "grad",
        torch.func.grad(scalar(ours), argnums)(*primals),
        torch.func.grad(scalar(theirs), argnums)(*primals),
    )
    same(
        "vjp",
        torch.func.vjp(ours, *primals)[1](weights),
        torch.func.vjp(theirs, *primals)[1](weights),
    )
    same(
        "jacrev",
        torch.func.jacrev(ours, argnums)(*primals),
        torch.func.jacrev(theirs, argnums)(*primals),
    )
    forward: dict[str, Callable[[Callable[..., Any]], Any]] = {
        "jvp": lambda fn: torch.func.jvp(fn, primals, tangents)[1],
        "jacfwd": lambda fn: torch.func.jacfwd(fn, argnums)(*primals),
        "forward_ad": lambda fn: _forward_ad(fn, primals, tangents),
    }
    for label, run in forward.items():
        if label == "jacfwd" and not batched:
            with pytest.raises(RuntimeError, match="does not have vmap support"):
                run(ours)
        elif jvp:
            same(label, run(ours), run(theirs) if label != "forward_ad" else forward["jvp"](theirs))
        else:
            with pytest.raises(RuntimeError, match=re.escape("add a [jvp] table")):
                run(ours)


def check_raw_handle_refuses(
    op: Any,
    samples: Samples,
    device: str,
    *,
    differentiable: tuple[str, ...],
    public: str,
    spec: str = "the spec",
    dtype: Any = torch.float64,
) -> None:
    """torch.func through the raw torch.ops handle raises an error naming the typed wrapper
    `public`, never zeros (for op modules whose Autograd kernel cannot reach the transforms)."""
    names = tensor_names(samples, differentiable)
    kwargs = pick(samples, device, dtype, names)
    if kwargs is None:
        raise AssertionError(no_sample("the torch.ops check", spec))
    primals = tuple(like(kwargs[name], lambda t: t.detach()) for name in names)
    raw = differentiable_outputs(function_of(op, kwargs, names))

    def scalar(*tensors: Any) -> Any:
        return sum(o.sum() for o in raw(*tensors))

    match = re.escape(f"call {public}(...) eagerly instead")
    with pytest.raises(RuntimeError, match=match):
        torch.func.grad(scalar)(*primals)
    with pytest.raises(RuntimeError, match=match):
        torch.func.jvp(raw, primals, tuple(like(p, torch.ones_like) for p in primals))
