"""What each op gets, decided once per op: its autograd design, who registers it, who bumps the
versions of what it writes (`OpDecisions`).

The api modules, the targets and the build read these decisions from `decisions(op)`; none of
them works one out again, so a rule changes in one place and every reader follows.

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

Note [Keyword-only tensors]
torch.library.register_autograd refuses an op that takes a keyword-only
tensor (torch 2.13), and public torch has no other way to give the raw
`torch.ops` handle an Autograd kernel (it would have to redispatch below
autograd). Such an op registers no formulas: its typed wrapper applies the
Function for every gradient, plain autograd included, and the raw handle has
torch's autograd fallback (a backward through it warns that the op has no
autograd kernel). `[options] private_torch = ["raw_handle_transforms"]` gives
the raw handle the Function. Keyword-only tensors themselves get no gradient.

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

from dataclasses import dataclass
from enum import StrEnum

from ..errors import internal_errors
from ..spec.backends import backend_of, registers_custom_op
from ..spec.model import CppTarget, OpSpec
from ..spec.registration import custom_op_refusal

__all__ = ["AutogradKind", "Registrar", "OpDecisions", "decide", "decisions"]


class AutogradKind(StrEnum):
    """Whether an op has an autograd.Function (Note [One autograd.Function per op])."""

    FUNCTION = "function"  # formulas
    REFUSE = "refuse"  # differentiable in and out, no formulas: backward and jvp raise
    NONE = "none"  # nothing differentiable in or out, or it writes an argument


class Registrar(StrEnum):
    """What defines the op with torch and registers its kernels."""

    CUSTOM_OP = "custom_op"  # torch.library.custom_op (a Python op)
    LIBRARY = "library"  # torch.library.Library (a Python op custom_op cannot, or should not, take)
    TRITON_OP = "triton_op"  # torch.library.triton_op, itself a custom_op
    CPP_CLASSIC = "cpp_classic"  # TORCH_LIBRARY in the compiled library (classic ABI)
    CPP_STABLE = "cpp_stable"  # STABLE_TORCH_LIBRARY in the compiled library (stable ABI)


@dataclass(frozen=True, slots=True)
class OpDecisions:
    """Everything opgen decides about one op from its spec, beyond what the spec says.

    Made by `decide`; read through `decisions(op)`, which makes it once per op.
    """

    registrar: Registrar
    """What registers the op: from its backend, `registration` and `cpp_target`. It decides
    who owns the op's Autograd key and who bumps the versions of what it writes."""

    autograd: AutogradKind
    """Whether the op gets an autograd.Function, and whether its backward and jvp compute
    or refuse (Note [One autograd.Function per op], Note [Backward refusal])."""

    registers_autograd: bool
    """Whether the Function's backward is also the raw handle's `register_autograd` formula;
    if not (a differentiable keyword-only tensor), the typed wrapper applies the Function
    for every gradient, plain autograd included (Note [Keyword-only tensors])."""

    formula_inputs: tuple[str, ...]
    """The arguments a [grad] formula differentiates, in argument order: what the gradient
    tests check and what the templates list as differentiable."""

    once_differentiable: bool
    """Whether the Function's backward is `once_differentiable`: it has [grad] formulas and the
    spec says `double_backward = false`, so a second backward raises instead of being wrong."""

    no_grad_message: str | None
    """What a backward through the op raises when it has a Function but no [grad] formulas
    (Note [Backward refusal]); None when backward computes, or there is no Function."""

    no_jvp_message: str | None
    """What forward-mode AD through the op raises when it has a Function but no [jvp] table;
    None when jvp computes, or there is no Function."""

    library_reason: str | None
    """Why `torch.library.custom_op` cannot register this Python op's schema, so that
    `torch.library.Library` does (the generated module says so); None for other backends."""

    wrapper_bumps_versions: bool
    """Whether the typed wrapper bumps the versions of the tensors the op writes: where no
    custom_op and no ADInplaceOrView kernel does it (Note [Written arguments])."""

    cpp_mutation_fallbacks: bool
    """Whether the compiled library registers torch's ADInplaceOrView (and Autograd) fallbacks
    for what the op writes: a classic C++ op that writes an argument (Note [Written arguments])."""

    writes_below_autograd: bool
    """Whether the op writes an argument, returns values and has no Autograd kernel (a C++ op
    without the fallbacks above, or a Triton op): its kernel runs below autograd and its outputs
    never require grad, so opcheck also runs the tensors it does not write with requires_grad."""

    @property
    def has_function(self) -> bool:
        """Whether the op has an autograd.Function at all (computing or refusing)."""
        return self.autograd is not AutogradKind.NONE

    @property
    def custom_op(self) -> bool:
        """Whether custom_op registers the op, and so owns its Autograd key (one per device)."""
        return self.registrar in (Registrar.CUSTOM_OP, Registrar.TRITON_OP)


def decide(op: OpSpec) -> OpDecisions:
    """Every decision about `op` (`decisions(op)` makes it once per op)."""
    registrar = _registrar(op)
    autograd = _autograd(op)
    written = bool(op.mutated)
    fallbacks = written and registrar is Registrar.CPP_CLASSIC
    formulas = {name for formula in op.grads for name in formula.inputs}
    return OpDecisions(
        registrar=registrar,
        autograd=autograd,
        registers_autograd=not any(a.differentiable and a.kwarg_only for a in op.args),
        formula_inputs=tuple(a.name for a in op.args if a.name in formulas),
        once_differentiable=bool(op.grads) and not op.double_backward,
        no_grad_message=_no_grad_message(op, autograd),
        no_jvp_message=_no_jvp_message(op, autograd),
        library_reason=(
            custom_op_refusal(op.args, op.returns, op.overload)
            if backend_of(op).chooses_registration
            else None
        ),
        wrapper_bumps_versions=written and registrar in (Registrar.LIBRARY, Registrar.CPP_STABLE),
        cpp_mutation_fallbacks=fallbacks,
        writes_below_autograd=(
            not op.functional
            and bool(op.returns)
            and registrar not in (Registrar.CUSTOM_OP, Registrar.LIBRARY)
            and not fallbacks
        ),
    )


# Made once per op object: the entry holds its op, so the op's id cannot be reused while it is
# here. Bounded so that a long process (the test suite) does not keep every op it ever saw.
_MADE: dict[int, tuple[OpSpec, OpDecisions]] = {}
_MAX_MADE = 4096


def decisions(op: OpSpec) -> OpDecisions:
    """The decisions about `op`, made on first use and then read."""
    entry = _MADE.get(id(op))
    if entry is not None and entry[0] is op:
        return entry[1]
    if len(_MADE) >= _MAX_MADE:
        _MADE.clear()
    # first read anywhere: a project-wide file may ask first (Note [Internal errors])
    with internal_errors(op.path, f"op {op.qualname}"):
        made = decide(op)
    _MADE[id(op)] = (op, made)
    return made


def _registrar(op: OpSpec) -> Registrar:
    traits = backend_of(op)  # an unknown backend: UnknownBackendError, never another's path
    if traits.compiles_cpp:
        return Registrar.CPP_STABLE if op.cpp_target == CppTarget.STABLE else Registrar.CPP_CLASSIC
    if traits.uses_triton:
        return Registrar.TRITON_OP
    if registers_custom_op(op):
        return Registrar.CUSTOM_OP
    return Registrar.LIBRARY


def _autograd(op: OpSpec) -> AutogradKind:
    tensor_out = any(r.family in ("Tensor", "Tensor?", "Tensor[]") for r in op.returns)
    if not op.functional or not tensor_out or not any(a.differentiable for a in op.args):
        return AutogradKind.NONE
    if op.grads or op.jvp.present:
        return AutogradKind.FUNCTION
    return AutogradKind.REFUSE


def _no_grad_message(op: OpSpec, autograd: AutogradKind) -> str | None:
    if op.grads or autograd is AutogradKind.NONE:
        return None
    return f"{op.qualname} has no gradient formula: add a [grad] table to {op.path.name}"


def _no_jvp_message(op: OpSpec, autograd: AutogradKind) -> str | None:
    if op.jvp.present or autograd is AutogradKind.NONE:
        return None
    if not op.grads:
        return f"{op.qualname} has no gradient formula: add a [grad] table to {op.path.name} (and a [jvp] table for forward mode)"
    return f"{op.qualname} has no forward-mode formula: add a [jvp] table to {op.path.name}"
