"""The working first text of a fresh Triton op's kernel file (Note [Starter bodies] in starter.py).

The sine op of `opgen new` gets an elementwise `tl.sin` kernel; an op made with
--schema a copy kernel used as the copy-through of `copy_plan.py` (the same
outputs the spec's starter reference describes). Both show what every launcher
does: make the inputs contiguous (the kernel indexes flat arrays), allocate the
outputs, pick the grid and block size, and launch through `torch.library.wrap_triton`
so that torch.compile traces into the kernel.
"""

from __future__ import annotations

from ..spec.model import OpSpec
from .starter import _is_sine, _op_plan

__all__ = ["triton_starter"]

_ELEMENTWISE = """\
@triton.jit
def {kernel}(in_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements  # the last block runs past the end
    value = tl.load(in_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, {expression}, mask=mask)


def _launch(source: Tensor) -> Tensor:
    source = source.contiguous()  # the kernel indexes a flat array
    out = torch.empty_like(source)
    n_elements = out.numel()
    if n_elements == 0:
        return out
    BLOCK_SIZE = 1024
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    torch.library.wrap_triton({kernel})[grid](source, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out"""


def triton_starter(op: OpSpec) -> dict[str, list[str]] | None:
    """`kernel` (module-level lines before the launcher) and `body` (the launcher's body),
    or None where opgen has no working kernel for the schema."""
    if _is_sine(op):
        kernel = _ELEMENTWISE.format(kernel="_sin_kernel", expression="tl.sin(value)")
        return {"kernel": kernel.split("\n"), "body": ["return _launch(x)"]}
    plan = _op_plan(op)
    if plan is None or op.test.reference != plan.reference:
        return None
    kernel = _ELEMENTWISE.format(kernel="_copy_kernel", expression="value")
    copied = f"_launch({plan.source_expr})"
    body = [line.replace(f"{plan.source_expr}.clone()", copied) for line in plan.python_body()]
    body = [
        (
            line.replace(f".copy_({plan.source_expr})", f".copy_({copied})")
            if "copy_" in line
            else line
        )
        for line in body
    ]
    return {"kernel": kernel.split("\n"), "body": body}
