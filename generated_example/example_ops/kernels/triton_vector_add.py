"""The Triton kernel of example::triton_vector_add, and its launcher.

This file is yours: opgen created it from ops/triton_vector_add.toml and will not
overwrite it. After a schema change, `opgen generate` merges the launcher's new
signature into it and keeps your bodies.

The Triton tutorial's vector addition: one program adds BLOCK_SIZE elements, the
last one masked.
"""

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements  # the last block runs past the end
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)

def launch_triton_vector_add(a: Tensor, b: Tensor) -> Tensor:
    a, b = a.contiguous(), b.contiguous()  # the kernel indexes flat arrays
    out = torch.empty_like(a)
    n_elements = out.numel()
    if n_elements == 0:
        return out
    BLOCK_SIZE = 16  # small, so that the tests' small samples span several blocks
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    torch.library.wrap_triton(_add_kernel)[grid](a, b, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out
