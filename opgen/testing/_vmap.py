"""The checks of torch.vmap through an op: its batching rule, and per-sample gradients.

Note [Own batching rule]
torch.vmap of an op without a batching rule does not fail: torch's per-sample
fallback loops over the batch and gives the same values, only slower. So
equal values do not show that the op's rule ran. torch's fallback is a
fallback of the FuncTorchBatched dispatch key, not a kernel of the op, while
`torch.library.register_vmap` registers the rule as the op's own kernel at
that key; `OpOverload.has_kernel_for_dispatch_key` tells them apart without
touching the dispatcher's state. Under torch.vmap a TorchDispatchMode sees
the op's calls below the batching layer, so the checks also know which ops
ran and on what shapes: every op of the namespace that ran must have its own
rule, and the one-call rules must call the kernel once, on the batched shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._compare import Bound, tolerances
from ._func import differentiable_outputs, function_of, like, no_sample, pick, stacked, tensor_names
from ._samples import Samples, materialize, tensors_of
from ._schema import positional_names

__all__ = ["check_vmap", "check_vmap_grad"]

_BATCH = 3


class _Calls(TorchDispatchMode):
    """Records the ops that run below torch.vmap, with the input shapes of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, tuple[tuple[int, ...], ...]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        shapes = tuple(tuple(t.shape) for a in args for t in tensors_of(a))
        self.calls.append((func, shapes))
        return func(*args, **(kwargs or {}))

    def shapes_of(self, op: Any) -> list[tuple[tuple[int, ...], ...]]:
        """The input shapes of each call of `op`."""
        return [shapes for func, shapes in self.calls if func is op]

    def without_own_rule(self, namespace: str) -> list[str]:
        """The ops of `namespace` that ran here without a batching rule of their own: torch's
        per-sample fallback ran them (Note [Own batching rule])."""
        found = {
            str(func)
            for func, _ in self.calls
            if func.namespace == namespace and not has_batching_rule(func)
        }
        return sorted(found)


def has_batching_rule(op: Any) -> bool:
    """Whether `op` has a torch.vmap rule of its own (Note [Own batching rule])."""
    return bool(op.has_kernel_for_dispatch_key(torch.DispatchKey.FuncTorchBatched))


def _no_fallback(calls: _Calls, namespace: str, label: str) -> None:
    missing = calls.without_own_rule(namespace)
    assert not missing, (
        f"{label}: {', '.join(missing)} ran through torch's per-sample fallback: it has no "
        "batching rule of its own (register_vmap)"
    )


def _batched(value: Any, dim: int) -> Any:
    """`_BATCH` values shaped like a sample tensor (the sample's first), stacked at `dim`."""
    if isinstance(value, list):
        return [_batched(v, dim) for v in value]
    values = [value]
    for seed in range(1, _BATCH):
        torch.manual_seed(100 + seed)
        values.append(torch.randn_like(value) if value.is_floating_point() else value.clone())
    return torch.stack(values, dim)


def _in_dims_cases(tensors: list[str], ranks: dict[str, int]) -> list[dict[str, int]]:
    """Batch every tensor first; each alone; every tensor at its last dim (a middle one where it
    has dims)."""
    cases = [{name: 0 for name in tensors}]
    if len(tensors) > 1:
        cases += [{name: 0} for name in tensors]
    last = {name: ranks[name] for name in tensors}
    if last != cases[0]:
        cases.append(last)
    return cases


def _select(value: Any, dim: int, index: int) -> Any:
    if isinstance(value, list):
        return [_select(v, dim, index) for v in value]
    return value.select(dim, index)


def _loop(
    fn: Callable[..., Any],
    names: list[str],
    args: list[Any],
    batched_dims: dict[str, int],
    rest: dict[str, Any],
) -> Any:
    outs = []
    for index in range(_BATCH):
        call = [
            _select(a, batched_dims[n], index) if n in batched_dims else a
            for n, a in zip(names, args, strict=True)
        ]
        outs.append(fn(**dict(zip(names, call, strict=True)), **rest))
    if isinstance(outs[0], torch.Tensor):
        return torch.stack(outs)
    return tuple(torch.stack(parts) for parts in zip(*outs, strict=True))


def _assert_rule_ran(calls: _Calls, op: Any, rule: str, once: bool, label: str) -> None:
    """The kernel calls a rule of this kind makes: once on the batch, once per sample, or some."""
    shapes = calls.shapes_of(op)
    if once:
        assert len(shapes) == 1, f"{label}: the kernel ran {len(shapes)} times, not once"
        first = [shape[:1] for shape in shapes[0]]
        assert (_BATCH,) in first, f"{label}: the kernel did not get the batch first ({shapes[0]})"
    elif rule == "loop":
        assert (
            len(shapes) == _BATCH
        ), f"{label}: {len(shapes)} kernel calls, one per sample expected"
    else:
        assert shapes, f"{label}: the custom rule never called the kernel"


def check_vmap(
    op: Any,
    wrapper: Callable[..., Any],
    samples: Samples,
    device: str,
    dtype: Any,
    *,
    schema: str,
    rule: str,
    leading: tuple[str, ...] = (),
    atol: Bound = None,
    rtol: Bound = None,
    spec: str = "the spec",
) -> None:
    """torch.vmap of the op and of its wrapper equals one call per sample, through the op's own
    batching rule (Note [Own batching rule]).

    In_dims: every tensor batched first, each alone, and all at their last dim.
    The kernel runs once on the batched shape under the one-call rules
    ("elementwise", and "leading" when only `leading` inputs are batched), once
    per sample under "loop", at least once under a "custom" rule.
    """
    assert has_batching_rule(op), (
        f"{op} has no batching rule of its own: torch.vmap would run torch's per-sample "
        f"fallback (the rule of {spec} is {rule!r})"
    )
    base = next(
        (
            kwargs
            for kwargs in materialize(samples, device, dtype)
            if all(t.numel() for t in tensors_of(list(kwargs.values())))
        ),
        None,
    )
    if base is None:
        raise AssertionError(
            f"no sample of {spec} has only non-empty tensors: torch.vmap needs one"
        )
    names, rest = positional_names(schema, base)
    tensors = [n for n in names if tensors_of(base[n])]
    ranks = {n: min(t.dim() for t in tensors_of(base[n])) for n in tensors}
    for case in _in_dims_cases(tensors, ranks):
        args = [_batched(base[n], case[n]) if n in case else base[n] for n in names]
        in_dims = tuple(case.get(n) for n in names)
        for fn in (op, wrapper):
            label = f"torch.vmap({'torch.ops' if fn is op else 'wrapper'}, in_dims={in_dims})"
            expected = _loop(fn, names, args, case, rest)
            with _Calls() as calls:
                got = torch.vmap(
                    lambda *a, fn=fn: fn(**dict(zip(names, a, strict=True)), **rest),
                    in_dims=in_dims,
                )(*args)
            torch.testing.assert_close(
                got,
                expected,
                msg=lambda m, label=label: f"{label}: {m}",
                **tolerances(dtype, atol, rtol),
            )
            _no_fallback(calls, op.namespace, label)
            once = rule == "elementwise" or (rule == "leading" and set(case) <= set(leading))
            _assert_rule_ran(calls, op, rule, once, label)


def check_vmap_grad(
    op: Any,
    wrapper: Callable[..., Any],
    reference: Callable[..., Any],
    samples: Samples,
    device: str,
    *,
    differentiable: tuple[str, ...],
    spec: str = "the spec",
    dtype: Any = torch.float64,
) -> None:
    """Per-sample gradients: torch.vmap(torch.func.grad(wrapper)) equals torch.func.grad of the
    reference, sample by sample, and every op of `op`'s namespace that ran (the op, those its
    gradient formulas call) has its own batching rule (Note [Own batching rule])."""
    names = tensor_names(samples, differentiable)
    kwargs = pick(samples, device, dtype, names, reference)
    if kwargs is None:
        raise AssertionError(no_sample("vmap(grad)", spec))
    torch.manual_seed(11)
    batched = tuple(
        like(kwargs[n], lambda t: torch.randn(_BATCH, *t.shape, dtype=t.dtype, device=t.device))
        for n in names
    )
    argnums = tuple(range(len(names)))

    def scalar(op: Callable[..., Any]) -> Callable[..., Any]:
        fn = differentiable_outputs(function_of(op, kwargs, names))
        return lambda *t: sum(o.sum() for o in fn(*t))

    with _Calls() as calls:
        got = torch.vmap(torch.func.grad(scalar(wrapper), argnums))(*batched)
    _no_fallback(calls, op.namespace, "torch.vmap(torch.func.grad(wrapper))")

    def sample(index: int) -> tuple[Any, ...]:
        return tuple(like(b, lambda t: t[index]) for b in batched)

    expected = stacked(
        [torch.func.grad(scalar(reference), argnums)(*sample(i)) for i in range(_BATCH)]
    )
    torch.testing.assert_close(
        got, expected, msg=lambda m: f"torch.vmap(torch.func.grad(wrapper)): {m}"
    )
