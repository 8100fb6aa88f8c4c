"""What autograd an op gets, and who bumps the versions of the tensors it writes.

Note [One autograd.Function per op]
Every functional op with tensor inputs and outputs gets one generated
`torch.autograd.Function`: `forward` calls the op, `setup_context` saves what
the formulas read and what `ctx.needs_input_grad` asks for (Note [Saving only
what formulas use] in autograd.py), `backward` holds the [grad] formulas,
`jvp` the [jvp] formulas and `vmap` the batching rule (Note [Batching rules]).
Its `setup_context` and `backward` are also the op's `register_autograd`
formulas, so the raw `torch.ops` handle has gradients (and torch.compile,
which traces the op, its backward). torch's register_autograd serves plain
autograd only (torch 2.13: under torch.func.grad it raises, under jvp it
returns zeros), so the typed wrapper applies the Function whenever a
gradient or a forward-mode tangent is asked for: that is where every
torch.func transform composes. An op without formulas gets the same Function
with a backward and jvp that raise "no gradient formula" (Note [Backward
refusal]).

Note [Backward refusal]
A compiled op with no autograd formula only warns at backward and returns
grad=None, so every functional op with tensor inputs and outputs and no
[grad] table registers a backward that raises "<ns>::<op> has no gradient
formula: add a [grad] table to <spec>", and its Function's jvp raises too.

Note [Written arguments]
torch registers no gradient formula for an op that writes an argument, so
such an op has no Function. What it writes must still bump the tensors'
version counters, as torch's in-place ops do (a kernel writing through a
data pointer does not), or autograd could not tell that a tensor saved for a
backward was overwritten: `custom_op` registers that itself; on the classic
C++ target the library registers an ADInplaceOrView kernel that does it (and,
for an op that also returns values, torch's `autogradNotImplementedFallback`
for the Autograd key, so a backward through it raises); for the stable ABI
(whose C shim has no redispatch below a key) and Python `library` ops the
typed wrapper bumps them after the call, with
`torch.autograd.graph.increment_version`.
"""

from __future__ import annotations

from enum import StrEnum

from ..spec.model import Backend, OpSpec

__all__ = [
    "AutogradKind",
    "autograd_kind",
    "no_grad_message",
    "no_jvp_message",
    "wrapper_bumps_versions",
    "cpp_mutation_fallbacks",
]


class AutogradKind(StrEnum):
    """Whether an op has an autograd.Function (Note [One autograd.Function per op])."""

    FUNCTION = "function"  # formulas
    REFUSE = "refuse"  # differentiable in and out, no formulas: backward and jvp raise
    NONE = "none"  # nothing differentiable in or out, or it writes an argument


def autograd_kind(op: OpSpec) -> AutogradKind:
    tensor_out = any(r.family in ("Tensor", "Tensor?", "Tensor[]") for r in op.returns)
    if not op.functional or not tensor_out or not any(a.differentiable for a in op.args):
        return AutogradKind.NONE
    if op.grads or op.jvp.present:
        return AutogradKind.FUNCTION
    return AutogradKind.REFUSE


def no_grad_message(op: OpSpec) -> str | None:
    """The error a backward through `op` raises when it has no [grad] formulas (Note [Backward refusal])."""
    if op.grads or autograd_kind(op) is AutogradKind.NONE:
        return None
    return f"{op.qualname} has no gradient formula: add a [grad] table to {op.path.name}"


def no_jvp_message(op: OpSpec) -> str | None:
    """The error forward-mode AD through `op` raises when it has no [jvp] table."""
    if op.jvp.present or autograd_kind(op) is AutogradKind.NONE:
        return None
    if not op.grads:
        return f"{op.qualname} has no gradient formula: add a [grad] table to {op.path.name} (and a [jvp] table for forward mode)"
    return f"{op.qualname} has no forward-mode formula: add a [jvp] table to {op.path.name}"


def cpp_mutation_fallbacks(op: OpSpec) -> bool:
    """Whether the compiled library registers torch's fallbacks for a written argument (classic)."""
    return bool(op.mutated) and op.backend == Backend.CPP and op.cpp_target == "classic"


def wrapper_bumps_versions(op: OpSpec) -> bool:
    """Whether the typed wrapper bumps the versions of what the op writes (Note [Written arguments])."""
    if not op.mutated:
        return False
    backend = Backend(op.backend)
    if backend is Backend.PYTHON:
        return op.registration == "library"
    if backend is Backend.TRITON:
        return False  # triton_op is a custom_op, which bumps them itself
    return op.cpp_target == "stable"
