"""Batching rule of example::layer_norm: what torch.vmap runs for it.

This file is yours: opgen created it from ops/layer_norm.toml (`vmap = "custom"`)
and will not overwrite it. `fn` is the op's overload when the op itself is
vmapped, and its autograd.Function when its typed wrapper runs under
torch.func: call `fn` with the op's arguments (the batch dim moved where the op
can take it) and return `(output, out_dims)`. The generated tests compare it
with one call per sample. `_batching` holds the built-in rules (elementwise,
leading, loop) to start from or fall back to.
"""

from __future__ import annotations

from .. import _batching


def layer_norm_vmap(fn, info, in_dims, /, x, weight, bias, eps=1e-05):
    x_dim, weight_dim, bias_dim = in_dims[:3]
    if weight_dim is None and bias_dim is None:
        # the kernel normalizes each row of x: the batch is one more leading dim
        return _batching.leading(fn, (0,), info, in_dims, x, weight, bias, eps)
    # a weight or bias per sample: normalize once, then scale and shift per sample
    x = x.movedim(x_dim, 0) if x_dim is not None else x.expand(info.batch_size, *x.shape)
    normalized = fn(x, x.new_ones(x.shape[-1]), x.new_zeros(x.shape[-1]), eps)
    rows = (1,) * (x.dim() - 2)
    if weight_dim is not None:
        weight = weight.movedim(weight_dim, 0).reshape(info.batch_size, *rows, -1)
    if bias_dim is not None:
        bias = bias.movedim(bias_dim, 0).reshape(info.batch_size, *rows, -1)
    return normalized * weight + bias, 0
