"""Batching rule of example::layer_norm_backward: what torch.vmap runs for it.

This file is yours: opgen created it from ops/layer_norm_backward.toml (`vmap = "custom"`)
and will not overwrite it. `fn` is the op's overload when the op itself is
vmapped, and its autograd.Function when its typed wrapper runs under
torch.func: call `fn` with the op's arguments (the batch dim moved where the op
can take it) and return `(output, out_dims)`. The generated tests compare it
with one call per sample. `_batching` holds the built-in rules (elementwise,
leading, loop) to start from or fall back to.
"""

from __future__ import annotations

from .. import _batching


def layer_norm_backward_vmap(fn, info, in_dims, /, grad_out, x, weight, eps):
    if in_dims[2] is not None:  # a weight per sample: one call per sample
        return _batching.loop(fn, info, in_dims, grad_out, x, weight, eps)
    grad_out = _batch_first(grad_out, in_dims[0], info.batch_size)
    x = _batch_first(x, in_dims[1], info.batch_size)
    # grad_x is row by row: the batch is one more leading dim
    grad_x, _, _ = fn(grad_out, x, weight, eps)
    # grad_weight and grad_bias sum over the leading dims, which must stop at the batch dim
    xhat = (x - x.mean(-1, keepdim=True)) * (x.var(-1, unbiased=False, keepdim=True) + eps).rsqrt()
    rows = tuple(range(1, x.dim() - 1))
    grad_weight = (grad_out * xhat).sum(rows) if rows else grad_out * xhat
    grad_bias = grad_out.sum(rows) if rows else grad_out
    return (grad_x, grad_weight, grad_bias), (0, 0, 0)


def _batch_first(tensor, dim, size):
    return tensor.movedim(dim, 0) if dim is not None else tensor.expand(size, *tensor.shape)
