"""The `op.function`, `op.kernel` and `op.vmap` variables: the op's autograd.Function, its
Autograd kernel, its batching rule, autocast and tags, as the op module's template prints them.

Note [Batching rules]
`vmap` in a spec picks the rule torch.vmap runs for the op, registered with
torch.library.register_vmap (for `torch.vmap(torch.ops.ns.op)`) and as the
Function's `vmap` (for the typed wrapper under torch.func), one rule for both,
from the package's generated `_batching.py`:
- "elementwise": one call on (batch, *broadcast shape), every tensor expanded;
- "leading": the op treats the leading dims of `vmap_leading` (default: the
  first tensor) as independent rows, so the batch becomes one more: one call;
  a batched argument elsewhere falls back to one call per sample;
- "loop" (the default for functional ops): one call per sample, stacked; right
  for every op, as slow as torch's fallback but without its warning, and the
  only rule under which the wrapper composes vmap with grad for an op nobody
  wrote a rule for;
- "custom": `kernels/<op>_vmap.py`, created once (a loop to start from) and
  then yours;
- "none" (mutating ops, ops returning Tensor[]): no rule; torch's fallback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..spec.model import OpSpec
from . import python as py
from .autograd import list_positions, plan_function, sibling_call
from .devices import DISPATCH_KEYS
from .fastpath import (
    AutogradKind,
    autograd_kind,
    cpp_autograd,
    grad_in_python_from_cpp,
    no_grad_message,
    no_jvp_message,
)
from .literals import literal

__all__ = ["function_context", "kernel_context", "vmap_context", "class_name", "public_name"]


def class_name(op: OpSpec) -> str:
    """The Function's class: `_<Op>Function` (its backward node is `_<Op>FunctionBackward`)."""
    camel = "".join(part[:1].upper() + part[1:] for part in op.module.split("_") if part)
    name = f"_{camel}Function"
    return name if name != op.name else name + "_"


def public_name(op: OpSpec, package: str) -> str:
    """The typed wrapper as users import it, for messages."""
    return f"{package}.{op.name}"


def _positional(op: OpSpec) -> str:
    """Every argument by position: how the Function and the rules receive them."""
    return ", ".join(a.name for a in op.args)


def _targets(op: OpSpec) -> str:
    """Every argument as assignment targets, black's way: a lone one is `(x,)`."""
    return f"({op.args[0].name},)" if len(op.args) == 1 else _positional(op)


def _message(text: str | None) -> str | None:
    return literal(text) if text else None


def _rule_call(op: OpSpec, fn: str, arguments: str) -> str:
    if op.vmap == "custom":
        head = f"_rule.{op.module}_vmap({fn}, "
    elif op.vmap == "leading":
        positions = tuple(i for i, a in enumerate(op.args) if a.name in op.vmap_leading)
        head = f"_batching.leading({fn}, {literal(positions)}, "
    else:
        head = f"_batching.{op.vmap}({fn}, "
    return f"{head}info, in_dims, {arguments})"


def vmap_context(op: OpSpec) -> dict[str, Any] | None:
    """The batching rule called with the op's overload (`register_vmap`) and with `_apply` (Function.vmap)."""
    if op.vmap == "none":
        return None
    return {
        "rule": op.vmap,
        "handle_call": _rule_call(op, "_handle", py.call_arguments(op)),
        "function_call": _rule_call(op, "_apply", py.call_arguments(op)),
        "custom_module": f"{op.module}_vmap" if op.vmap == "custom" else None,
    }


def function_context(op: OpSpec, siblings: Mapping[str, str]) -> dict[str, Any] | None:
    """The op's autograd.Function (Note [One autograd.Function per op]), or None when it has none."""
    kind = autograd_kind(op)
    if kind not in (AutogradKind.FUNCTION, AutogradKind.REFUSE):
        return None
    plan = plan_function(op, siblings)
    lists = list_positions(op)
    list_returns = tuple(r.type == "Tensor[]" for r in op.returns)
    if lists:
        vmap_lines = [
            f"{_targets(op)} = _unflatten(_LISTS, _counts, _flat)",
            "in_dims = _unflatten(_LISTS, _counts, in_dims[1:])",
        ]
        apply_args = f"*_flatten(_LISTS, ({_positional(op)},))"
    else:
        vmap_lines = []
        apply_args = _positional(op)
    vmap = vmap_context(op)
    if vmap is not None:
        vmap_lines.append(f"return {vmap['function_call']}")
    applied = f"{class_name(op)}.apply({apply_args})"
    plain = f"_plain_apply({apply_args})"
    if any(list_returns):
        applied, plain = f"_nest(_RETURNS, {applied})", f"_nest(_RETURNS, {plain})"
    return {
        "class_name": class_name(op),
        "forward_params": plan.forward_params,
        "forward_lines": plan.forward_lines,
        "setup_lines": plan.setup_lines,
        "backward_lines": plan.backward_lines,
        "once_differentiable": bool(op.grads) and not op.double_backward,
        "jvp_lines": plan.jvp_lines,
        "vmap_params": plan.vmap_params,
        "vmap_lines": tuple(vmap_lines) if vmap is not None else (),
        "no_grad_message": _message(no_grad_message(op)),
        "no_jvp_message": _message(no_jvp_message(op)),
        "lists": literal(lists) if lists else None,
        "returns": literal(list_returns) if any(list_returns) else None,
        "return_lists": (
            literal(tuple(i for i, flag in enumerate(list_returns) if flag))
            if any(list_returns) and len(op.returns) > 1
            else None
        ),
        "apply": applied,
        "plain_apply": plain,
        "sibling_imports": _sibling_modules(op, siblings),
    }


def _sibling_modules(op: OpSpec, siblings: Mapping[str, str]) -> list[str]:
    """The other op modules whose wrappers the formulas call, sorted."""
    import ast

    texts = [f.expression for f in op.grads] + list(op.jvp.result)
    inputs = {a.name for a in op.args}
    names = {
        n.id
        for text in texts
        for n in ast.walk(ast.parse(text, mode="eval"))
        if isinstance(n, ast.Name) and n.id not in inputs
    }
    if op.jvp.auto == "auto_linear":
        names.add(op.name)
    modules = {
        siblings[name]
        for name in names
        if name in siblings and sibling_call(op, name, siblings).startswith("_op_")
    }
    return sorted(modules)


def kernel_context(op: OpSpec, package: str) -> dict[str, Any] | None:
    """The op's Python Autograd kernel (Note [Keyset Autograd kernel]), or None when it has none here."""
    kind = autograd_kind(op)
    if kind is AutogradKind.NONE:
        return None
    if op.backend == "python" and op.registration == "custom_op":
        keys = [f"Autograd{DISPATCH_KEYS[d]}" for d in op.devices]
    else:
        keys = ["Autograd"]
    tensors = ", ".join(a.name for a in op.args if a.differentiable)
    return {
        "kind": str(kind),
        "in_cpp": cpp_autograd(op),
        "helper": f"_{op.module}_autograd" if grad_in_python_from_cpp(op) else None,
        "keys": keys,
        "signature": py.signature(op, annotate=False),
        "call_arguments": py.call_arguments(op),
        "tensors": tensors,
        "public": public_name(op, package),
    }
