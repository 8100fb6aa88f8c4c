"""The check of Triton ops on CUDA: Inductor compiles the user's kernel into its code.

A triton_op's body launches its kernels through `torch.library.wrap_triton`, which
lets torch.compile trace into the body: Inductor then schedules the kernel itself
(its source appears in the code Inductor writes). An op that hid its kernel behind
an opaque call (the interpreter's inner op, Note [Triton ops] in opgen/api/triton.py)
would not show it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch

from ._compare import describe
from ._samples import Samples, materialize

__all__ = ["check_inductor_traces_kernel", "triton_kernel_names"]


def triton_kernel_names(module: ModuleType) -> list[str]:
    """The `@triton.jit` kernels a module defines (autotuned ones too), by name."""
    names = []
    for name, value in vars(module).items():
        inner = value
        while hasattr(inner, "fn") and not hasattr(inner, "src"):
            inner = inner.fn  # triton.autotune and triton.heuristics wrap the JITFunction
        if hasattr(inner, "src") and hasattr(inner, "run"):
            names.append(getattr(getattr(inner, "fn", None), "__name__", name))
    return names


def check_inductor_traces_kernel(
    op: Any, kernels: ModuleType, samples: Samples, device: str, dtype: Any, *, spec: str
) -> None:
    """torch.compile with Inductor writes one of the kernels of `kernels` into its code."""
    from torch._inductor.utils import run_and_get_code

    names = triton_kernel_names(kernels)
    assert names, f"{kernels.__name__} defines no @triton.jit kernel ({spec})"
    for kwargs in materialize(samples, device, dtype):
        tensors = [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
        if not tensors or any(t.numel() == 0 for t in tensors):
            continue
        torch.compiler.reset()
        compiled = torch.compile(lambda kw: op(**kw), backend="inductor", fullgraph=True)
        _, code = run_and_get_code(compiled, kwargs)
        text = "\n".join(code)
        assert any(name in text for name in names), (
            f"{describe(op)}: Inductor's code calls none of {', '.join(names)} ({spec}): "
            "launch the kernels through torch.library.wrap_triton in the launcher"
        )
        return
    raise AssertionError(f"{describe(op)}: no sample with non-empty tensors ({spec})")
