"""The spec keys that say how an op composes with PyTorch's transforms.

`[jvp]` (forward-mode formulas), `vmap` (the batching rule), `autocast` (the
dtype inputs are cast to) and `tags` (torch.Tag values on the definition).
Note [Batching rules] in opgen/api/transforms.py says what each vmap rule
generates; docs in the spec table of docs/spec.md.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import DiagnosticSink
from .expr import ExprProblem, check_expression
from .fields import shown, suggest, typed
from .formulas import EXPR_GLOBALS, callable_ops
from .load import LoadedToml
from .model import VMAP_RULES, Arg, FakeRule, GradFormula, JvpRule, Ret
from .tangents import tangent_names

__all__ = [
    "JVP_AUTO",
    "TAG_NAMES",
    "REFUSED_TAGS",
    "AUTOCAST_DTYPES",
    "tangent_names",
    "build_jvp",
    "build_vmap",
    "build_autocast",
    "build_tags",
]

JVP_AUTO = ("auto_element_wise", "auto_linear")

# torch.Tag in torch 2.13 (torch/headeronly/core/enum_tag.h), read without importing torch.
TAG_NAMES = (
    "core cudagraph_unsafe data_dependent_output dynamic_output_shape flexible_layout generated "
    "inplace inplace_view maybe_aliasing_or_mutating needs_contiguous_strides needs_exact_strides "
    "needs_fixed_stride_order nondeterministic_bitwise nondeterministic_seeded out out_variant "
    "pointwise pt2_compliant_tag reduction view_copy"
).split()
# Tags whose meaning is a schema shape (returns aliasing mutated arguments): torch checks
# them against the schema, and the stable ABI aborts at load on them (torch 2.13).
REFUSED_TAGS = ("inplace", "out")
# register_autocast casts floating inputs to one of these.
AUTOCAST_DTYPES = ("float16", "bfloat16", "float32")


def _result_names(rets: tuple[Ret, ...]) -> set[str]:
    names = {f"result{i}" for i in range(len(rets))}
    return names | {"result"} if len(rets) == 1 else names


def build_jvp(
    sink: DiagnosticSink,
    doc: LoadedToml,
    table: dict[str, Any],
    args: tuple[Arg, ...],
    rets: tuple[Ret, ...],
    grads: tuple[GradFormula, ...],
    op_names: frozenset[str],
) -> JvpRule:
    """The `[jvp]` table: forward-mode formulas, or one of the two derived rules."""
    if not table:
        return JvpRule()
    line = doc.line("jvp")
    if _no_tangents(sink, line, args, rets):
        return JvpRule()
    results = ["result"] + ([f"result{i}" for i in range(len(rets))] if len(rets) > 1 else [])
    allowed_keys = (*results, *JVP_AUTO)
    for key in table:
        if key not in allowed_keys:
            sink.error(doc.line("jvp", key), f"unknown key 'jvp.{key}'", suggest(key, allowed_keys))
    autos = [k for k in JVP_AUTO if k in table]
    exprs = {k: v for k, v in table.items() if k in results}
    if len(autos) + bool(exprs) > 1:
        sink.error(
            line,
            "the [jvp] table gives more than one rule",
            'keep one: result = "...", auto_element_wise = true or auto_linear = true',
        )
        return JvpRule()
    if autos:
        return _auto_rule(sink, doc, table, autos[0], args, rets, grads, line)
    if not exprs:
        return JvpRule()
    return _formula_rule(sink, doc, exprs, args, rets, op_names, line)


def _no_tangents(
    sink: DiagnosticSink, line: int, args: tuple[Arg, ...], rets: tuple[Ret, ...]
) -> bool:
    """Whether the op can have no forward-mode rule (reported): it returns nothing or mutates."""
    if not rets:
        sink.error(line, "this op returns nothing, so it has no tangents", "remove the [jvp] table")
        return True
    if any(a.mutated for a in args):
        sink.error(
            line,
            "this op mutates an argument, and PyTorch has no forward-mode AD for mutating custom ops",
            "remove the [jvp] table",
        )
        return True
    return False


def _formula_rule(
    sink: DiagnosticSink,
    doc: LoadedToml,
    exprs: dict[str, Any],
    args: tuple[Arg, ...],
    rets: tuple[Ret, ...],
    op_names: frozenset[str],
    line: int,
) -> JvpRule:
    """The rule of `result = "..."` (or one `resultN` per output): each formula checked."""
    keys = _formula_keys(sink, exprs, rets, line)
    if keys is None:
        return JvpRule()
    allowed = (
        {a.name for a in args}
        | set(tangent_names(args).values())
        | _result_names(rets)
        | set(EXPR_GLOBALS)
        | callable_ops(op_names)
    )
    good: list[str] = []
    for key in keys:
        text = exprs[key]
        if not typed(sink, doc, text, str, "jvp", key):
            continue
        try:
            shadowing = {a.name for a in args} | (allowed - set(EXPR_GLOBALS))
            check_expression(text, allowed, f"forward-mode formula jvp.{key}", shadowing)
        except ExprProblem as exc:
            sink.error(doc.line("jvp", key), exc.message, exc.hint)
            continue
        good.append(text.strip())
    if len(good) != len(keys):
        return JvpRule()
    return JvpRule(result=tuple(good), line=line)


def _formula_keys(
    sink: DiagnosticSink, exprs: dict[str, Any], rets: tuple[Ret, ...], line: int
) -> list[str] | None:
    """The keys of the formulas, in output order: `result`, or every `resultN`; None (reported)
    when both forms are given or an output has none."""
    if "result" in exprs and len(exprs) > 1:
        sink.error(line, "[jvp] gives both result and resultN", "keep one form")
        return None
    keys = ["result"] if "result" in exprs else [f"result{i}" for i in range(len(rets))]
    missing = [k for k in keys if k not in exprs]
    if missing:
        sink.error(
            line,
            f"[jvp] has no formula for {', '.join(missing)}",
            f"give one formula per output ({', '.join(keys)}), or result = \"(..., ...)\" for all",
        )
        return None
    return keys


def _auto_rule(
    sink: DiagnosticSink,
    doc: LoadedToml,
    table: dict[str, Any],
    key: str,
    args: tuple[Arg, ...],
    rets: tuple[Ret, ...],
    grads: tuple[GradFormula, ...],
    line: int,
) -> JvpRule:
    if table[key] is not True:
        sink.error(
            doc.line("jvp", key),
            f"jvp.{key} must be true, not {shown(table[key])}",
            f"write {key} = true, or remove the line",
        )
        return JvpRule()
    if key == "auto_linear":
        return JvpRule(auto=key, line=line)
    if not grads:
        sink.error(
            doc.line("jvp", key),
            "auto_element_wise derives the tangents from the [grad] formulas, and this op has none",
            'add a [grad] table, or write the formula: result = "..."',
        )
        return JvpRule()
    if len(rets) != 1:
        sink.error(
            doc.line("jvp", key),
            "auto_element_wise needs an op with one output",
            'write one formula per output: result0 = "...", result1 = "..."',
        )
        return JvpRule()
    shared = next((g for g in grads if len(g.inputs) > 1), None)
    if shared is not None:
        sink.error(
            doc.line("jvp", key),
            f"auto_element_wise needs one [grad] formula per input; {', '.join(shared.inputs)!r} share one",
            'write the forward-mode formula: result = "..."',
        )
        return JvpRule()
    if any(a.is_tensor_list for a in args if a.name in {g.inputs[0] for g in grads}):
        sink.error(
            doc.line("jvp", key),
            "auto_element_wise does not apply to Tensor[] inputs",
            'write the forward-mode formula: result = "..."',
        )
        return JvpRule()
    return JvpRule(auto=key, line=line)


def build_vmap(
    sink: DiagnosticSink,
    doc: LoadedToml,
    data: dict[str, Any],
    args: tuple[Arg, ...],
    rets: tuple[Ret, ...],
    fake: FakeRule,
) -> tuple[str, tuple[str, ...]]:
    """`vmap` and `vmap_leading`: the batching rule and, for "leading", the batch-agnostic inputs.

    Only ops whose every return is a Tensor of a size the input shapes fix get a
    rule (Note [Batching rules] in opgen/api/transforms.py): torch.vmap returns
    tensors only (a None, a number or a list has no batch dim), and samples whose
    outputs have sizes of their own cannot be stacked.
    """
    tensors = [a for a in args if a.differentiable]
    functional = bool(rets) and bool(tensors) and not any(a.mutated for a in args)
    list_returns = any(r.type.family == "Tensor[]" for r in rets)
    unbatchable = _unbatchable(args, rets, fake)
    default = "loop" if functional and not list_returns and not unbatchable else "none"
    rule = data.get("vmap", default)
    leading = data.get("vmap_leading")
    if rule not in VMAP_RULES:
        sink.error(
            doc.line("vmap"),
            f"vmap is {shown(rule)}",
            f"use one of {', '.join(map(repr, VMAP_RULES))} (see `vmap` in docs/spec.md)",
        )
        return default, ()
    if rule != "none" and not functional:
        why = "mutates an argument" if any(a.mutated for a in args) else "has no tensor in and out"
        sink.error(
            doc.line("vmap"),
            f"vmap = {rule!r}: this op {why}, and opgen generates batching rules for functional ops only",
            'remove the line (vmap = "none")',
        )
        return "none", ()
    if rule != "none" and list_returns:
        sink.error(
            doc.line("vmap"),
            f"vmap = {rule!r}: opgen generates no batching rules for ops returning Tensor[]",
            'remove the line (vmap = "none": torch\'s per-sample fallback)',
        )
        return "none", ()
    if rule != "none" and unbatchable:
        sink.error(
            doc.line("vmap"),
            f"vmap = {rule!r}: this op {unbatchable}",
            'remove the line (vmap = "none": no batching rule)',
        )
        return "none", ()
    lists = [a.name for a in tensors if a.is_tensor_list]
    if rule in ("elementwise", "leading") and lists:
        sink.error(
            doc.line("vmap"),
            f"vmap = {rule!r} does not batch Tensor[] arguments ({', '.join(lists)})",
            'use vmap = "loop" or vmap = "custom" (your own rule)',
        )
        return default, ()
    if leading is not None and rule != "leading":
        sink.error(
            doc.line("vmap_leading"),
            'vmap_leading applies to vmap = "leading" only',
            'remove vmap_leading, or set vmap = "leading"',
        )
        return rule, ()
    if rule != "leading":
        return rule, ()
    names = [a.name for a in args if a.is_tensor]
    if leading is None:
        return rule, tuple(names[:1])
    if isinstance(leading, str):
        leading = [leading]
    if not isinstance(leading, list) or not leading or any(n not in names for n in leading):
        sink.error(
            doc.line("vmap_leading"),
            f"vmap_leading must list tensor inputs, not {shown(leading)}",
            f"tensor inputs: {', '.join(names)}",
        )
        return rule, tuple(names[:1])
    return rule, tuple(n for n in names if n in leading)


def _unbatchable(args: tuple[Arg, ...], rets: tuple[Ret, ...], fake: FakeRule) -> str | None:
    """Why no batching rule can be registered for the op, or None (Tensor[] returns aside)."""
    kwarg_only = [a.name for a in args if a.differentiable and a.kwarg_only]
    if kwarg_only:
        return (
            f"takes keyword-only tensors ({', '.join(kwarg_only)}), and "
            "torch.library.register_vmap refuses those (torch 2.13)"
        )
    other = [r.type.spelling for r in rets if r.type.family not in ("Tensor", "Tensor[]")]
    if other:
        return f"returns {', '.join(other)}, and torch.vmap returns tensors only"
    if fake.data_dependent:
        return (
            "returns a size that depends on the values ([fake] expr calls new_dynamic_size()): "
            "the outputs of a batch's samples cannot be stacked"
        )
    return None


def build_autocast(
    sink: DiagnosticSink,
    doc: LoadedToml,
    value: Any,
    args: tuple[Arg, ...],
    devices: tuple[str, ...],
    dtypes: tuple[str, ...],
) -> tuple[tuple[str, str], ...]:
    """`autocast = {cpu = "bfloat16"}`: per device, the dtype floating inputs are cast to."""
    if value is None:
        return ()
    line = doc.line("autocast")
    example = 'autocast = {cpu = "bfloat16", cuda = "float16"}'
    if not isinstance(value, dict) or not value:
        sink.error(line, f"autocast must be a table of device = dtype, not {shown(value)}", example)
        return ()
    kwarg_only = [a.name for a in args if a.kwarg_only]
    if kwarg_only:
        sink.error(
            line,
            f"autocast cannot cast an op with keyword-only arguments ({', '.join(kwarg_only)}): "
            "torch.library.register_autocast does not pass them (torch 2.13)",
            "make those arguments positional (remove the `*`), or remove autocast",
        )
        return ()
    out: list[tuple[str, str]] = []
    for device, dtype in value.items():
        if device not in devices:
            sink.error(
                doc.line("autocast", device),
                f"autocast names device {device!r}, which is not in devices",
                f"devices: {', '.join(devices)}",
            )
            continue
        if dtype not in AUTOCAST_DTYPES:
            sink.error(
                doc.line("autocast", device),
                f"autocast.{device} is {shown(dtype)}",
                f"use one of {', '.join(map(repr, AUTOCAST_DTYPES))}",
            )
            continue
        if dtype not in dtypes:
            sink.error(
                doc.line("autocast", device),
                f"autocast.{device} casts inputs to {dtype}, which is not in test.dtypes: "
                "the kernel would receive a dtype it was never tested with",
                f'add "{dtype}" to test.dtypes (and make the kernel accept it)',
            )
            continue
        out.append((device, dtype))
    return tuple(out)


_TAG_HINT = "known tags: " + ", ".join(t for t in TAG_NAMES if t not in REFUSED_TAGS)


def build_tags(sink: DiagnosticSink, doc: LoadedToml, value: Any) -> tuple[str, ...]:
    """`tags = ["needs_fixed_stride_order", ...]`: torch.Tag names for the op's definition."""
    if value is None:
        return ()
    line = doc.line("tags")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        sink.error(line, f"tags must be a list of torch.Tag names, not {shown(value)}", _TAG_HINT)
        return ()
    good: list[str] = []
    for tag in value:
        name = re.sub(r"^(torch\.Tag\.|at::Tag::)", "", tag)
        if name in REFUSED_TAGS:
            sink.error(
                line,
                f"tag {tag!r} describes a schema whose returns alias its mutated arguments; "
                "opgen adds it itself where the schema's annotations say so",
                "remove it from tags",
            )
        elif name not in TAG_NAMES:
            sink.error(line, f"unknown tag {shown(tag)}", suggest(name, TAG_NAMES, "known tags"))
        elif name in good:
            sink.error(line, f"tag {name!r} is listed twice", "keep one")
        else:
            good.append(name)
    return tuple(good)
