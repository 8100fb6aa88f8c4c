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
Ops that write an argument or return a view of one get no Function (torch
registers no gradient formulas for them): Note [Mutating ops that return] in
the generated `_runtime.py` says what they get instead.

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
already redispatches in C++.

Where the kernels of an op that writes an argument are Python (Python
`library` ops, the stable target), the wrapper skips them the same way
(`mutation_fast_path`): it calls the op with ADInplaceOrView excluded (and
autograd too when the op's Autograd kernel only runs it below autograd), then
bumps the versions of what the op wrote itself. On the classic target both
kernels are C++ and the wrapper only calls `_handle._op`.
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
    "runs_below_autograd",
    "mutation_fast_path",
    "bumps_versions",
    "registers_in_cpp",
]


class AutogradKind(StrEnum):
    """What an op's Autograd kernel does (Note [Keyset Autograd kernel])."""

    FUNCTION = "function"  # formulas: the op's autograd.Function
    REFUSE = "refuse"  # no formulas: a Function whose backward and jvp raise
    REDISPATCH = "redispatch"  # writes or views an argument and returns: below autograd
    NONE = "none"  # nothing differentiable in or out: no kernel


def autograd_kind(op: OpSpec) -> AutogradKind:
    if runs_below_autograd(op):
        return AutogradKind.REDISPATCH
    tensor_out = any(r.family in ("Tensor", "Tensor?", "Tensor[]") for r in op.returns)
    if not op.functional or not tensor_out or not any(a.differentiable for a in op.args):
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


def registers_in_cpp(op: OpSpec) -> bool:
    """Whether the compiled library registers the op's Autograd and ADInplaceOrView kernels (classic target)."""
    return op.backend == "cpp" and op.cpp_target == "classic"


def refuses_backward_in_cpp(op: OpSpec) -> bool:
    """Whether the compiled library registers the op's refusing autograd kernel (classic target)."""
    return registers_in_cpp(op) and autograd_kind(op) is AutogradKind.REFUSE


def grad_in_python_from_cpp(op: OpSpec) -> bool:
    """Whether the library's C++ Autograd kernel hands gradients to the helper op `_<op>_autograd`."""
    return registers_in_cpp(op) and autograd_kind(op) is AutogradKind.FUNCTION


def cpp_autograd(op: OpSpec) -> bool:
    """Whether the op's Autograd kernel is C++ (csrc/registration_autograd.cpp)."""
    return registers_in_cpp(op) and autograd_kind(op) is not AutogradKind.NONE


def runs_below_autograd(op: OpSpec) -> bool:
    """An op that writes an argument (or returns a view of one) and returns values gets an
    Autograd kernel that runs it below autograd (Note [Mutating ops that return])."""
    return not op.functional and bool(op.returns)


def bumps_versions(op: OpSpec) -> bool:
    """Whether opgen registers the op's ADInplaceOrView kernel (custom_op registers its own)."""
    return bool(op.mutated) and not (op.backend == "python" and op.registration == "custom_op")


def mutation_fast_path(op: OpSpec) -> dict[str, object] | None:
    """For an op whose version-bumping kernel is Python: the arguments the wrapper bumps itself,
    and whether it also skips the Autograd kernel (which only runs the op below autograd)."""
    if not bumps_versions(op) or registers_in_cpp(op):
        return None
    return {
        "written": ", ".join(a.name for a in op.mutated),
        "autograd": runs_below_autograd(op),
    }


def fast_path_inputs(op: OpSpec) -> str | None:
    """The tensor arguments the wrapper tests for requires_grad, or None for no fast path."""
    kind = autograd_kind(op)
    if kind not in (AutogradKind.FUNCTION, AutogradKind.REFUSE) or cpp_autograd(op):
        return None
    return ", ".join(a.name for a in op.args if a.differentiable)
