"""The `op.function` and `op.vmap` variables: the op's autograd.Function and its batching rule,
as the op module's template prints them.

Note [Batching rules]
`vmap` in a spec picks the rule torch.vmap runs for the op, registered with
torch.library.register_vmap (for `torch.vmap(torch.ops.ns.op)`) and as the
Function's `vmap` (for a gradient or a tangent asked for under vmap), one rule
for both, from the package's `_batching.py`:
- "elementwise": one call on (batch, *broadcast shape), every tensor expanded;
- "leading": the op treats the leading dims of `vmap_leading` (default: the
  first tensor) as independent rows, so the batch becomes one more: one call;
  a batched argument elsewhere falls back to one call per sample;
- "loop" (the default for functional ops): one call per sample, stacked; right
  for every op, as slow as torch's fallback but without its warning, and the
  only rule under which vmap composes with grad for an op nobody wrote a rule
  for;
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
from .autograd import FunctionNames, list_positions, plan_function, sibling_call
from .decisions import decisions
from .layout import condition, wrapped
from .literals import literal

__all__ = ["function_context", "vmap_context", "class_name", "public_name"]


def class_name(op: OpSpec) -> str:
    """The Function's class: `_<Op>Function` (its backward node is `_<Op>FunctionBackward`)."""
    camel = "".join(part[:1].upper() + part[1:] for part in op.module.split("_") if part)
    name = f"_{camel}Function"
    return name if name != op.name else name + "_"


def public_name(op: OpSpec, package: str) -> str:
    """The typed wrapper as users import it, for messages."""
    return f"{package}.{op.name}"


def _rule(op: OpSpec, n: Mapping[str, str], fn: str, arguments: str) -> str:
    """A call of the op's batching rule with `fn` (the overload, or the wrapper)."""
    if op.vmap == "custom":
        head = f"{n['rule']}.{op.module}_vmap({fn}, "
    elif op.vmap == "leading":
        positions = tuple(i for i, a in enumerate(op.args) if a.name in op.vmap_leading)
        head = f"{n['leading']}({fn}, {literal(positions)}, "
    else:
        head = f"{n[op.vmap]}({fn}, "
    return f"{head}{n['info']}, {n['in_dims']}, {arguments})"


def vmap_context(op: OpSpec, n: Mapping[str, str]) -> dict[str, Any] | None:
    """The batching rule torch.vmap runs for the raw op (`register_vmap`)."""
    if op.vmap == "none":
        return None
    parameters = [n["info"], n["in_dims"], *py.parameters(op, annotate=False)]
    return {
        "rule": op.vmap,
        "def_lines": wrapped(f"def {n['registered']}(", parameters, "):", "", is_def=True),
        "call": _rule(op, n, n["op"], py.call_arguments(op)),
        "custom_module": f"{op.module}_vmap" if op.vmap == "custom" else None,
    }


def function_context(
    op: OpSpec, siblings: Mapping[str, str], n: Mapping[str, str]
) -> dict[str, Any] | None:
    """The op's autograd.Function (Note [One autograd.Function per op]), or None when it has none."""
    decided = decisions(op)
    if not decided.has_function:
        return None
    names = FunctionNames(
        op=n["op"],
        wrapper=op.name,
        flatten=n["flatten"],
        unflatten=n["unflatten"],
        nest=n["nest"],
        error=n["error"],
        reserved=tuple(v for k, v in n.items() if k not in ("info", "in_dims")),
    )
    plan = plan_function(op, siblings, names)
    local = plan.locals
    vmap_lines = list(plan.vmap_unpack)
    if op.vmap != "none":
        arguments = ", ".join(
            f"{a.name}={local[a.name]}" if a.kwarg_only else local[a.name] for a in op.args
        )
        vmap_lines.append(f"return {_rule(op, n, op.name, arguments)}")
    lists = list_positions(op)
    list_returns = tuple(r.family == "Tensor[]" for r in op.returns)
    arguments = ", ".join(a.name for a in op.args)
    if lists:
        arguments = (
            f"*{n['flatten']}({literal(lists)}, ({arguments}{',' if len(op.args) == 1 else ''}))"
        )
    applied = f"{n['Function']}.apply({arguments})"
    if any(list_returns):
        applied = f"{n['nest']}({literal(list_returns)}, {applied})"
    return {
        "class_name": n["Function"],
        "forward_params": plan.forward_params,
        "forward_lines": plan.forward_lines,
        "setup_lines": plan.setup_lines,
        "backward_params": plan.backward_params,
        "backward_lines": plan.backward_lines,
        "once_differentiable": decided.once_differentiable,
        "jvp_params": plan.jvp_params,
        "jvp_lines": plan.jvp_lines,
        "vmap_params": plan.vmap_params,
        "vmap_lines": tuple(vmap_lines) if op.vmap != "none" else (),
        "apply": applied,
        "uses_lists": plan.uses_lists,
        "sibling_imports": _sibling_modules(op, siblings),
        "tracked_lines": _tracked(op, n),
        "lists_literal": literal(lists) if lists else None,
        # torch leaves trailing arguments equal to their defaults out of needs_input_grad
        "padded_needs": any(a.differentiable and a.default is not None for a in op.args),
        "keyword_only": [a.name for a in op.args if a.kwarg_only],
        "keyword_only_literal": literal(tuple(a.name for a in op.args if a.kwarg_only)),
        "positional_count": sum(1 for a in op.args if not a.kwarg_only),
        "registered": decided.registers_autograd,
        "register_lines": wrapped(
            f"{n['torch']}.library.register_autograd(",
            [
                literal(op.registered_name),
                f"{n['Function']}.backward",
                f"setup_context={n['Function']}.setup_context",
            ],
            ")",
            "",
        ),
    }


def wrapper_calls_tensors_of(op: OpSpec) -> bool:
    """Whether the wrapper hands needs_function its tensors through `_autograd.tensors_of`:
    an optional or Tensor[] differentiable argument (needs_function takes plain tensors)."""
    return any(a.differentiable and a.family != "Tensor" for a in op.args)


def _tracked(op: OpSpec, n: Mapping[str, str]) -> list[str]:
    """The wrapper's `if` that applies the Function (the package's `_autograd.needs_function`).

    An op with no register_autograd formulas needs the Function for plain autograd too
    (Note [Keyword-only tensors]).
    """
    tensors = [a.name for a in op.args if a.differentiable]
    if wrapper_calls_tensors_of(op):
        tensors = [f"*{n['tensors_of']}({', '.join(tensors)})"]
    if not decisions(op).registers_autograd:
        tensors.append("registered=False")
    call = f"{n['needs_function']}({', '.join(tensors)})"
    return condition("if", [call], "and", "    ")


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
