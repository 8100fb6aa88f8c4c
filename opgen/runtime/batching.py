"""Batching rules of the package's operators: what torch.vmap runs.

An op's spec picks one (`vmap = "elementwise" | "leading" | "loop"`, or
"custom" for a rule of your own in `kernels/<op>_vmap.py`, which may call
these). Every rule has the signature of a torch.library.register_vmap rule
with the callable to run first: `rule(fn, info, in_dims, *args, **kwargs)`
returns `(output, out_dims)`. `fn` is the op's overload when the op itself is
vmapped, and its autograd.Function's `apply` when a gradient or a tangent is
asked for under vmap, so one rule serves both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["elementwise", "leading", "loop"]


def _out_dims(output: Any) -> Any:
    return 0 if isinstance(output, torch.Tensor) else (0,) * len(output)


def _logical_shape(tensor: torch.Tensor, dim: int | None) -> list[int]:
    shape = list(tensor.shape)
    if dim is not None:
        del shape[dim]
    return shape


def elementwise(
    fn: Callable[..., Any], info: Any, in_dims: Sequence[Any], /, *args: Any, **kwargs: Any
) -> tuple[Any, Any]:
    """One call on (batch, *broadcast shape): every tensor argument gets the batch dim first.

    Unbatched tensors are expanded to the batch, batched ones broadcast to the
    common shape (right-aligned, as broadcasting does), so ops that require equal
    shapes still receive them.
    """
    tensors = [(a, d) for a, d in zip(args, in_dims, strict=False) if isinstance(a, torch.Tensor)]
    shape = torch.broadcast_shapes(*(_logical_shape(a, d) for a, d in tensors))
    full = (info.batch_size, *shape)
    moved = []
    for arg, dim in zip(args, in_dims, strict=False):
        if not isinstance(arg, torch.Tensor):
            moved.append(arg)
        elif dim is None:
            moved.append(arg.expand(full))
        else:
            arg = arg.movedim(dim, 0)
            pad = (1,) * (len(shape) - (arg.dim() - 1))
            moved.append(arg.reshape(arg.shape[:1] + pad + arg.shape[1:]).expand(full))
    output = fn(*moved, **kwargs)
    return output, _out_dims(output)


def leading(
    fn: Callable[..., Any],
    positions: tuple[int, ...],
    info: Any,
    in_dims: Sequence[Any],
    /,
    *args: Any,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """One call when only the arguments at `positions` are batched: the op treats their
    leading dims as independent rows, so the batch dim becomes one more leading dim.

    A batched argument elsewhere (a per-sample weight) cannot ride along: then
    one call per sample, as `loop`.
    """
    if any(d is not None for i, d in enumerate(in_dims) if i not in positions):
        return loop(fn, info, in_dims, *args, **kwargs)
    moved = []
    for index, (arg, dim) in enumerate(zip(args, in_dims, strict=False)):
        if dim is not None:
            moved.append(arg.movedim(dim, 0))
        elif index in positions and isinstance(arg, torch.Tensor):
            moved.append(arg.expand(info.batch_size, *arg.shape))
        else:
            moved.append(arg)
    output = fn(*moved, **kwargs)
    return output, _out_dims(output)


def _select(value: Any, dim: Any, index: int) -> Any:
    if isinstance(value, (list, tuple)):
        dims = dim if isinstance(dim, (list, tuple)) else (dim,) * len(value)
        return [_select(v, d, index) for v, d in zip(value, dims, strict=True)]
    return value if dim is None else value.select(dim, index)


def _zeros(value: Any, dim: Any) -> Any:
    if isinstance(value, (list, tuple)):
        dims = dim if isinstance(dim, (list, tuple)) else (dim,) * len(value)
        return [_zeros(v, d) for v, d in zip(value, dims, strict=True)]
    return value if dim is None else value.new_zeros(_logical_shape(value, dim))


def loop(
    fn: Callable[..., Any], info: Any, in_dims: Sequence[Any], /, *args: Any, **kwargs: Any
) -> tuple[Any, Any]:
    """One call per sample, stacked: right for every op, and as slow as torch's fallback."""
    if info.batch_size == 0:  # no sample to call: the shape of one, on zeros
        probe = fn(*(_zeros(a, d) for a, d in zip(args, in_dims, strict=False)), **kwargs)
        output = (
            probe.new_empty((0, *probe.shape))
            if isinstance(probe, torch.Tensor)
            else tuple(p.new_empty((0, *p.shape)) for p in probe)
        )
        return output, _out_dims(output)
    samples = [
        fn(*(_select(a, d, index) for a, d in zip(args, in_dims, strict=False)), **kwargs)
        for index in range(info.batch_size)
    ]
    if isinstance(samples[0], torch.Tensor):
        return torch.stack(samples), 0
    outputs = tuple(torch.stack(parts) for parts in zip(*samples, strict=True))
    return outputs, _out_dims(outputs)
