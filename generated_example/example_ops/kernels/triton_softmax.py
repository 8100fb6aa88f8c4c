"""The Triton kernel of example::triton_softmax, and its launcher.

This file is yours: opgen created it from ops/triton_softmax.toml and will not
overwrite it. After a schema change, `opgen generate` merges the launcher's new
signature into it and keeps your bodies.

The Triton tutorial's fused softmax: one program per row, the row read once, its
maximum subtracted before exp; masked columns read as -inf so that they add nothing.
"""

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _softmax_kernel(out_ptr, x_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    shifted = x - tl.max(x, axis=0)
    numerator = tl.exp(shifted)
    tl.store(out_ptr + row * n_cols + cols, numerator / tl.sum(numerator, axis=0), mask=mask)

def launch_triton_softmax(x: Tensor) -> Tensor:
    x = x.contiguous()  # the kernel indexes flat rows
    out = torch.empty_like(x)
    n_cols = x.shape[-1]
    rows = x.numel() // n_cols if n_cols else 0
    if rows == 0:
        return out
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    torch.library.wrap_triton(_softmax_kernel)[(rows,)](out, x, n_cols, BLOCK_SIZE=BLOCK_SIZE)
    return out
