"""The Triton kernel of example::triton_rms_norm, and its launcher.

This file is yours: opgen created it from ops/triton_rms_norm.toml and will not
overwrite it. After a schema change, `opgen generate` merges the launcher's new
signature into it and keeps your bodies.

vLLM's rms_norm, one program per row: the row's mean square and the scaling in
float32, the scaled row cast back to the input's dtype before the weight multiplies
it (RMSNorm.forward_native). A row is one block (BLOCK_SIZE, the next power of two
of its width, masked).
"""

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _rms_norm_kernel(out_ptr, x_ptr, w_ptr, n_cols, epsilon, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    xf = x.to(tl.float32)
    mean_square = tl.sum(xf * xf, axis=0) / n_cols
    scaled = (xf * tl.rsqrt(mean_square + epsilon)).to(x.dtype)
    w = tl.load(w_ptr + cols, mask=mask)
    tl.store(out_ptr + row * n_cols + cols, scaled * w, mask=mask)

def launch_triton_rms_norm(result: Tensor, input: Tensor, weight: Tensor, epsilon: float) -> None:
    n_cols = input.shape[-1]
    rows = input.numel() // n_cols if n_cols else 0
    if rows == 0:
        return None
    x, w = input.contiguous(), weight.contiguous()  # the kernel indexes flat rows
    # a strided `result` is written through a contiguous copy
    out = result if result.is_contiguous() else torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    torch.library.wrap_triton(_rms_norm_kernel)[(rows,)](
        out, x, w, n_cols, epsilon, BLOCK_SIZE=BLOCK_SIZE
    )
    if out is not result:
        result.copy_(out)
    return None
