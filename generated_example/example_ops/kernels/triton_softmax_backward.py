"""The Triton kernel of example::triton_softmax_backward, and its launcher.

This file is yours: opgen created it from ops/triton_softmax_backward.toml and will
not overwrite it. After a schema change, `opgen generate` merges the launcher's new
signature into it and keeps your bodies.

y * (grad - sum(grad * y)) per row, one program per row.
"""

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _softmax_backward_kernel(out_ptr, grad_ptr, y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    grad = tl.load(grad_ptr + row * n_cols + cols, mask=mask, other=0.0)
    y = tl.load(y_ptr + row * n_cols + cols, mask=mask, other=0.0)
    dot = tl.sum(grad * y, axis=0)
    tl.store(out_ptr + row * n_cols + cols, y * (grad - dot), mask=mask)

def launch_triton_softmax_backward(grad: Tensor, y: Tensor) -> Tensor:
    grad, y = grad.contiguous(), y.contiguous()  # the kernel indexes flat rows
    out = torch.empty_like(y)
    n_cols = y.shape[-1]
    rows = y.numel() // n_cols if n_cols else 0
    if rows == 0:
        return out
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    torch.library.wrap_triton(_softmax_backward_kernel)[(rows,)](
        out, grad, y, n_cols, BLOCK_SIZE=BLOCK_SIZE
    )
    return out
