"""Which autograd kernel an op registers, and how its wrapper calls it.

Note [Backward refusal]
A compiled op with no autograd kernel only warns at backward and returns
grad=None (MEASURED.md), so every functional op with tensor inputs and no
gradient formulas registers an autograd kernel whose backward raises
"<ns>::<op> has no gradient formula: add a [grad] table to <spec>".
- classic C++ target, ops that mutate nothing: the library registers it in C++
  (csrc/registration_autograd.cpp, on the Autograd key). With nothing requiring
  grad it redispatches below autograd without entering Python; otherwise it
  computes the outputs the same way and gives them a grad_fn
  (torch::autograd::Error) that raises the message; dual tensors (forward-mode
  AD) are refused at once. The autograd headers make that one file compile in
  ~6 s (a kernel file's time; registration.cpp takes ~3 s); it is written, and
  so rebuilt, only when the set of such ops changes.
- everything else (Python ops, the stable target): a Python
  `register_autograd` kernel; torch refuses that for an op with keyword-only
  tensors, which instead gets a Python Autograd kernel that refuses at the
  call when an input requires grad (`refuses_at_call`). The stable ABI cannot host the C++ kernel: its C
  shim has no redispatch below a dispatch key, no `requires_grad` getter and no
  autograd graph nodes (torch 2.13), so the refusal stays in Python and the
  wrapper's fast path keeps the no-grad call out of it.

Note [Autograd fast path]
The dispatcher runs a Python autograd kernel on every call, even when nothing
requires grad; it then only re-dispatches below autograd, which costs ~2 µs
a call (README, "Call overhead"). The typed wrapper users call does that step
itself when it is safe to skip the kernel: not while torch.compile traces (`is_compiling`
first, so dynamo folds the branch away and traces the plain `_handle` call),
not under torch.func transforms, and only when grad mode is off or no tensor
input requires grad: the test torch.library's kernel makes
(`_C.is_grad_enabled() and _C._any_requires_grad(*args)`). It then calls the op
with the AutogradFunctionality key excluded in thread-local state, as
`_AutoDispatchBelowAutograd` does, but read, set and restored with three
plain calls (the guard object costs ~270 ns, the calls ~180 ns); dense CPU/CUDA tensors
skip the autograd kernel, and tensors whose autograd key is AutogradOther or
AutogradNestedTensor still reach the registered kernel, which is correct and
only slower. Outside torch.compile every wrapper calls the overload's C++
callable (`_handle._op`), saving the Python frame of `OpOverload.__call__`.
The registration itself is unchanged, so `torch.ops` callers, opcheck and
gradcheck see the regular op. Ops that mutate an argument get no fast path
(the ADInplaceOrView bookkeeping): their wrapper only calls `_handle._op`.

Ops that write to an argument never get a gradient formula or the refusing
kernel (torch registers neither on them): Note [Mutating ops that return] in
the generated `_runtime.py` says what they get instead. Where those kernels
are Python (Python `library` ops, the stable target), the wrapper skips them
the same way (`mutation_fast_path`): it calls the op with ADInplaceOrView
excluded (and autograd too when the op's Autograd kernel only runs it below
autograd), then bumps the versions of what the op wrote itself.
"""

from __future__ import annotations

from ..spec.model import OpSpec

__all__ = [
    "fast_path_inputs",
    "no_grad_message",
    "refuses_backward_in_cpp",
    "runs_below_autograd",
    "refuses_at_call",
    "mutation_fast_path",
    "bumps_versions",
    "registers_in_cpp",
]


def no_grad_message(op: OpSpec) -> str | None:
    """The error a backward through `op` raises when it has no formulas (Note [Backward refusal])."""
    tensor_out = any(r.family in ("Tensor", "Tensor?", "Tensor[]") for r in op.returns)
    if (
        op.grads
        or not tensor_out
        or not op.functional
        or not any(a.differentiable for a in op.args)
    ):
        return None
    return f"{op.qualname} has no gradient formula: add a [grad] table to {op.path.name}"


def refuses_backward_in_cpp(op: OpSpec) -> bool:
    """Whether the compiled library registers the op's refusing autograd kernel (classic target)."""
    return op.backend == "cpp" and op.cpp_target == "classic" and no_grad_message(op) is not None


def refuses_at_call(op: OpSpec) -> bool:
    """A Python refusal for an op with keyword-only tensors (register_autograd cannot take them)."""
    return (
        no_grad_message(op) is not None
        and not refuses_backward_in_cpp(op)
        and any(a.kwarg_only and a.differentiable for a in op.args)
    )


def runs_below_autograd(op: OpSpec) -> bool:
    """An op that writes an argument (or returns a view of one) and returns values gets an
    Autograd kernel that runs it below autograd (Note [Mutating ops that return])."""
    return not op.functional and bool(op.returns)


def bumps_versions(op: OpSpec) -> bool:
    """Whether opgen registers the op's ADInplaceOrView kernel (custom_op registers its own)."""
    return bool(op.mutated) and not (op.backend == "python" and op.registration == "custom_op")


def registers_in_cpp(op: OpSpec) -> bool:
    """Whether the compiled library registers the op's Autograd and ADInplaceOrView kernels (classic target)."""
    return op.backend == "cpp" and op.cpp_target == "classic"


def mutation_fast_path(op: OpSpec) -> dict[str, object] | None:
    """For an op whose version-bumping kernel is Python: the arguments the wrapper bumps itself,
    and whether it also skips the Autograd kernel (which only runs the op below autograd)."""
    if not bumps_versions(op) or registers_in_cpp(op):
        return None
    return {
        "written": ", ".join(a.name for a in op.mutated),
        "autograd": runs_below_autograd(op),
    }


def _python_autograd(op: OpSpec) -> bool:
    return bool(op.grads) or (no_grad_message(op) is not None and not refuses_backward_in_cpp(op))


def fast_path_inputs(op: OpSpec) -> str | None:
    """The tensor arguments the wrapper tests for requires_grad, or None for no fast path."""
    if op.mutated or not op.returns or not _python_autograd(op):
        return None
    tensors = [a.name for a in op.args if a.differentiable]
    return ", ".join(tensors) if tensors else None
