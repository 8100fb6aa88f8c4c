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
- "none": no rule; torch's fallback. The default, and the only rule, for
  mutating ops and for ops whose outputs no rule can stack: a Tensor[],
  Tensor?, number or other non-tensor return (torch.vmap returns tensors
  only), or an output whose size depends on the values (`new_dynamic_size()`
  in [fake]: each sample's output has its own size). No vmap test is generated
  for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..spec.model import OpSpec
from . import python as py
from .autograd import FUNCTION_GLOBALS, list_positions, plan_function, sibling_call
from .devices import DISPATCH_KEYS
from .fastpath import (
    AutogradKind,
    autograd_kind,
    cpp_autograd,
    grad_in_python_from_cpp,
    no_grad_message,
    no_jvp_message,
    runs_below_autograd,
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


def _message(text: str | None) -> str | None:
    return literal(text) if text else None


def _rule_call(
    op: OpSpec, n: Mapping[str, str], fn: str, arguments: str, params: str = "info, in_dims"
) -> str:
    if op.vmap == "custom":
        head = f"{n['rule']}.{op.module}_vmap({fn}, "
    elif op.vmap == "leading":
        positions = tuple(i for i, a in enumerate(op.args) if a.name in op.vmap_leading)
        head = f"{n['batching']}.leading({fn}, {literal(positions)}, "
    else:
        head = f"{n['batching']}.{op.vmap}({fn}, "
    return f"{head}{params}, {arguments})"


def _call_arguments(op: OpSpec, local: Mapping[str, str]) -> str:
    return ", ".join(
        f"{a.name}={local[a.name]}" if a.kwarg_only else local[a.name] for a in op.args
    )


def vmap_context(
    op: OpSpec, n: Mapping[str, str], local: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """The batching rule called with the op's overload (`register_vmap`) and with `_apply`
    (Function.vmap, whose parameters are `local`)."""
    if op.vmap == "none":
        return None
    local = local if local is not None else {a.name: a.name for a in op.args}
    return {
        "rule": op.vmap,
        "params": f"{n['info']}, {n['in_dims']}",
        "handle_call": _rule_call(
            op, n, n["handle"], py.call_arguments(op), f"{n['info']}, {n['in_dims']}"
        ),
        "function_call": _rule_call(op, n, n["apply"], _call_arguments(op, local)),
        "custom_module": f"{op.module}_vmap" if op.vmap == "custom" else None,
    }


def function_context(
    op: OpSpec, siblings: Mapping[str, str], n: Mapping[str, str]
) -> dict[str, Any] | None:
    """The op's autograd.Function (Note [One autograd.Function per op]), or None when it has none."""
    kind = autograd_kind(op)
    if kind not in (AutogradKind.FUNCTION, AutogradKind.REFUSE):
        return None
    plan = plan_function(
        op,
        siblings,
        {role: n[role] for role in FUNCTION_GLOBALS},
        reserved=(n["apply"], n["batching"], n["rule"]),
    )
    local = plan.locals
    lists = list_positions(op)
    list_returns = tuple(r.family == "Tensor[]" for r in op.returns)
    positional = ", ".join(local[a.name] for a in op.args)
    if lists:
        targets = f"({positional},)" if len(op.args) == 1 else positional
        counts, flat = plan.vmap_params.split(", ")[2], plan.vmap_params.split(", ")[3][1:]
        vmap_lines = [
            f"{targets} = {n['unflatten']}({n['LISTS']}, {counts}, {flat})",
            f"in_dims = {n['unflatten']}({n['LISTS']}, {counts}, in_dims[1:])",
        ]
    else:
        vmap_lines = []
    vmap = vmap_context(op, n, local)
    if vmap is not None:
        vmap_lines.append(f"return {vmap['function_call']}")
    plain_args = ", ".join(a.name for a in op.args)
    if lists:
        apply_args = f"*{n['flatten']}({n['LISTS']}, ({plain_args},))"
    else:
        apply_args = plain_args
    applied = f"{n['Function']}.apply({apply_args})"
    plain = f"{n['plain_apply']}({apply_args})"
    if any(list_returns):
        applied = f"{n['nest']}({n['RETURNS']}, {applied})"
        plain = f"{n['nest']}({n['RETURNS']}, {plain})"
    return {
        "class_name": n["Function"],
        "forward_params": plan.forward_params,
        "forward_lines": plan.forward_lines,
        "setup_lines": plan.setup_lines,
        "backward_params": plan.backward_params,
        "backward_lines": plan.backward_lines,
        "once_differentiable": bool(op.grads) and not op.double_backward,
        "jvp_params": plan.jvp_params,
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
    if kind is AutogradKind.NONE or runs_below_autograd(op):
        return None  # a mutating op's kernel: Note [Mutating ops that return] in _runtime.py
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
