"""Which Autograd kernel an op registers, and how its typed wrapper calls the op.

Note [One autograd.Function per op]
Every functional op with tensor inputs and outputs gets one generated
`torch.autograd.Function`: `forward` calls the op below autograd,
`setup_context` saves what the formulas read (Note [Saving only what formulas
use]), `backward` holds the [grad] formulas, `jvp` the [jvp] formulas and
`vmap` the batching rule (Note [Batching rules]). torch's `register_autograd`
builds a Function without setup_context, jvp or vmap, so torch.func.grad
through it raises and torch.func.jvp silently returns zeros (torch 2.13); this
one composes with every transform. An op without formulas gets the same
Function with a backward and jvp that raise "no gradient formula" (Note
[Backward refusal]): formulas call other ops (gelu's calls gelu_backward), and
under torch.func.grad those calls must be Functions too.

Note [Keyset Autograd kernel]
The op's Autograd kernel replaces `register_autograd`: a keyset-aware Python
kernel (`Library.impl(..., "Autograd", with_keyset=True)`; per device for
custom_op, which owns the Autograd alias) that
- redispatches below autograd when nothing needs a gradient or a tangent (the
  test is `_any_requires_grad` and grad mode, or an open forward-AD level with
  a tangent on some input);
- applies the Function for plain autograd and forward-mode AD
  (`fwAD.dual_level`), so the raw `torch.ops` handle has gradients, gradcheck
  and forward-mode AD;
- raises under torch.func transforms: the dispatcher runs it inside
  functorch's front-mode fallback, from where a Function cannot reach the
  transforms' interpreters, so a gradient there is an error naming the typed
  wrapper, never a zero.
On the classic C++ target the kernel is C++ (csrc/registration_autograd.cpp):
without grad it redispatches without entering Python; with grad it calls the
helper op `_<op>_autograd` (same schema), whose Python kernel is the one above.
Mutating ops that return tensors get a kernel that only redispatches (PyTorch
has no autograd for mutating custom ops; gradients for them are refused at
generate time).

Note [Backward refusal]
A compiled op with no autograd kernel only warns at backward and returns
grad=None (MEASURED.md), so every functional op with tensor inputs and no
gradient formulas refuses backward with "<ns>::<op> has no gradient formula:
add a [grad] table to <spec>": through its Function (above), and on the
classic target through a C++ kernel that computes the outputs below autograd
and gives them a grad_fn (torch::autograd::Error) raising the message; dual
tensors are refused at once. The stable ABI cannot host C++ autograd kernels:
its C shim has no redispatch below a key, no `requires_grad` getter and no
autograd graph nodes (torch 2.13).

Note [Autograd fast path]
The dispatcher runs a Python Autograd kernel on every call, even when it only
redispatches (~2 µs, README "Call overhead"). The typed wrapper users call
skips it when that is safe: not while torch.compile traces (`is_compiling`
first, so dynamo folds the branch away and traces the plain `_handle` call),
not under torch.func transforms (the wrapper applies the Function: the only
place it composes with them), not when an input requires grad under grad mode
or a forward-AD level is open (the wrapper applies the Function through its
C++ `apply`, bound once). Otherwise it calls the op with the
AutogradFunctionality key excluded in thread-local state, as
`_AutoDispatchBelowAutograd` does, with three plain calls (the guard object
costs ~270 ns, the calls ~180 ns). `_any_requires_grad` is asked before grad
mode: with no input requiring grad that is one call instead of two. Ops with a
C++ Autograd kernel (classic) or none are called directly: the C++ kernel
already redispatches in C++. Ops that mutate an argument get no fast path
(the ADInplaceOrView bookkeeping): their wrapper only calls `_handle._op`.
"""

from __future__ import annotations

from enum import StrEnum

from ..spec.model import OpSpec

__all__ = [
    "AutogradKind",
    "autograd_kind",
    "no_grad_message",
    "no_jvp_message",
    "refuses_backward_in_cpp",
    "grad_in_python_from_cpp",
    "cpp_autograd",
    "fast_path_inputs",
]


class AutogradKind(StrEnum):
    """What an op's Autograd kernel does (Note [Keyset Autograd kernel])."""

    FUNCTION = "function"  # formulas: the op's autograd.Function
    REFUSE = "refuse"  # no formulas: a Function whose backward and jvp raise
    REDISPATCH = "redispatch"  # mutating op that returns tensors: below autograd, no gradients
    NONE = "none"  # nothing differentiable in or out: no kernel


def autograd_kind(op: OpSpec) -> AutogradKind:
    differentiable = any(a.differentiable and not a.mutated for a in op.args)
    if not op.returns or not any(a.differentiable for a in op.args):
        return AutogradKind.NONE
    if op.mutated:
        return AutogradKind.REDISPATCH
    if not differentiable:
        return AutogradKind.NONE
    if op.grads or op.jvp.present:
        return AutogradKind.FUNCTION
    return AutogradKind.REFUSE


def no_grad_message(op: OpSpec) -> str | None:
    """The error a backward through `op` raises when it has no [grad] formulas (Note [Backward refusal])."""
    if op.grads or autograd_kind(op) not in (AutogradKind.FUNCTION, AutogradKind.REFUSE):
        return None
    return f"{op.qualname} has no gradient formula: add a [grad] table to {op.path.name}"


def no_jvp_message(op: OpSpec) -> str | None:
    """The error forward-mode AD through `op` raises when it has no [jvp] table."""
    if op.jvp.present or autograd_kind(op) not in (AutogradKind.FUNCTION, AutogradKind.REFUSE):
        return None
    if not op.grads:
        return f"{op.qualname} has no gradient formula: add a [grad] table to {op.path.name} (and a [jvp] table for forward mode)"
    return f"{op.qualname} has no forward-mode formula: add a [jvp] table to {op.path.name}"


def refuses_backward_in_cpp(op: OpSpec) -> bool:
    """Whether the compiled library registers the op's refusing autograd kernel (classic target)."""
    return (
        op.backend == "cpp"
        and op.cpp_target == "classic"
        and autograd_kind(op) is AutogradKind.REFUSE
    )


def grad_in_python_from_cpp(op: OpSpec) -> bool:
    """Whether the library's C++ Autograd kernel hands gradients to the helper op `_<op>_autograd`."""
    return (
        op.backend == "cpp"
        and op.cpp_target == "classic"
        and autograd_kind(op) is AutogradKind.FUNCTION
    )


def cpp_autograd(op: OpSpec) -> bool:
    """Whether the op's Autograd kernel is C++ (csrc/registration_autograd.cpp)."""
    return refuses_backward_in_cpp(op) or grad_in_python_from_cpp(op)


def fast_path_inputs(op: OpSpec) -> str | None:
    """The tensor arguments the wrapper tests for requires_grad, or None for no fast path."""
    kind = autograd_kind(op)
    if kind not in (AutogradKind.FUNCTION, AutogradKind.REFUSE) or cpp_autograd(op):
        return None
    return ", ".join(a.name for a in op.args if a.differentiable)
