"""Note [Autograd fast path]

Every generated op with tensor inputs registers a Python autograd kernel
(gradient formulas, or one that raises "not differentiable"). The dispatcher
runs that kernel on every call, even when nothing requires grad; it then only
re-dispatches below autograd, which costs ~5 µs a call (MEASURED.md).

The typed wrapper users call does that step itself when it is safe to skip the
kernel: not while torch.compile traces (`is_compiling` first, so dynamo folds
the branch away), not under torch.func transforms, and only when grad mode is
off or no tensor input requires grad: the same test torch.library's kernel
makes (`_C.is_grad_enabled() and _C._any_requires_grad(*args)`), followed by the
same `_AutoDispatchBelowAutograd` guard. The registration itself is unchanged,
so `torch.ops` callers, opcheck and gradcheck see the regular op. Ops that
mutate an argument keep the plain call (the ADInplaceOrView bookkeeping).
"""

from __future__ import annotations

from ..spec.model import OpSpec

__all__ = ["fast_path_inputs"]


def fast_path_inputs(op: OpSpec) -> str | None:
    """The tensor arguments the wrapper tests for requires_grad, or None for no fast path."""
    if op.mutated or not op.returns:
        return None
    tensors = [a.name for a in op.args if a.differentiable]
    return ", ".join(tensors) if tensors else None
