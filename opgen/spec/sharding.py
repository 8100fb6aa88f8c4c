"""The `[sharding]` table of a spec: the op's DTensor sharding rule, checked against its schema.

What each rule generates is in templates/package/sharding.py.j2; the rule table
of docs/sharding.md says when each fits. A rule that does not fit the schema is an
error here, at generate time, rather than a wrong placement at run time.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from ..errors import DiagnosticSink
from .fields import check_keys, shown, string_list, suggest
from .load import LoadedToml
from .model import (
    ROW_OUTPUTS,
    SHARDING_RULES,
    Arg,
    OpSpec,
    Ret,
    RowOutput,
    ShardingRule,
    ShardingSpec,
)

__all__ = ["build_sharding", "called_ops", "unkeyed_arguments", "CacheKey"]

_KEYS = ("rule", "outputs")
_RULE_HINT = (
    'rule = "elementwise" (same-shape or broadcasting ops), "rowwise" (shard any dim but the '
    'last), "matmul", "replicate" (gather and run whole) or "custom" (your own function)'
)


def _tensors(args: tuple[Arg, ...]) -> list[Arg]:
    return [a for a in args if a.is_tensor and not a.kwarg_only]


def _rule_problem(
    rule: str, args: tuple[Arg, ...], rets: tuple[Ret, ...]
) -> tuple[str, str] | None:
    """Why `rule` does not fit the schema, with the fix; None when it fits."""
    tensors = _tensors(args)
    mutated = [a for a in args if a.mutated]
    if not tensors:
        return (
            f"sharding rule {rule!r} needs a Tensor argument: this op takes none, so it never "
            "sees a DTensor",
            "remove the [sharding] table",
        )
    if rule == "elementwise":
        if not (len(rets) == 1 and not mutated) and not (not rets and mutated):
            return (
                "sharding rule 'elementwise' needs one returned Tensor (or, for a mutating op, "
                f"none); this op returns {len(rets)} and mutates {len(mutated)} argument(s)",
                'use rule = "rowwise" with outputs = [...] for several outputs, or rule = "custom"',
            )
    elif rule == "rowwise":
        if tensors[0].family != "Tensor":
            return (
                f"sharding rule 'rowwise' shards the rows of the first tensor argument, and "
                f"{tensors[0].name!r} is optional ({tensors[0].type.spelling})",
                'put the row tensor (e.g. x) first in the schema, or use rule = "custom"',
            )
    elif rule == "matmul":
        names = ", ".join(a.name for a in tensors)
        if len(tensors) != 2 or any(a.family != "Tensor" for a in tensors):
            return (
                f"sharding rule 'matmul' needs exactly two Tensor arguments (a @ b); this op "
                f"takes {len(tensors)} ({names})",
                'use rule = "custom" for other products, or "replicate"',
            )
        if len(rets) != 1 or mutated:
            return (
                "sharding rule 'matmul' needs exactly one returned Tensor and no mutated argument",
                'use rule = "custom" (or "replicate")',
            )
    return None


def build_sharding(
    sink: DiagnosticSink,
    doc: LoadedToml,
    table: dict[str, Any],
    args: tuple[Arg, ...],
    rets: tuple[Ret, ...],
    present: bool,
) -> ShardingSpec | None:
    """The op's rule, or None when the spec has no [sharding] table (or it is wrong: reported)."""
    if not present:
        return None
    check_keys(sink, doc, table, _KEYS, ("sharding",))
    rule = table.get("rule")
    line = doc.line("sharding", "rule")
    if rule is None:
        sink.error(doc.line("sharding"), "[sharding] has no rule", _RULE_HINT)
        return None
    if rule not in SHARDING_RULES:
        near = suggest(str(rule), SHARDING_RULES) if isinstance(rule, str) else ""
        hint = near if near.startswith("did you mean") else _RULE_HINT
        sink.error(line, f"unknown sharding rule {shown(rule)}", hint)
        return None
    lists = [a for a in args if a.is_tensor_list] + [r for r in rets if r.family == "Tensor[]"]
    if lists:
        sink.error(
            line,
            "sharding rules do not support Tensor[] arguments or returns",
            "remove the [sharding] table, or take the tensors as separate Tensor arguments",
        )
        return None
    others = [r for r in rets if r.family != "Tensor" or r.aliased]
    if others:
        sink.error(
            line,
            f"sharding rules need new Tensor returns; this op returns {others[0].type.spelling}",
            "remove the [sharding] table",
        )
        return None
    problem = _rule_problem(rule, args, rets)
    if problem is not None:
        sink.error(line, *problem)
        return None
    return ShardingSpec(ShardingRule(rule), _outputs(sink, doc, table, rule, rets))


def _outputs(
    sink: DiagnosticSink, doc: LoadedToml, table: dict[str, Any], rule: str, rets: tuple[Ret, ...]
) -> tuple[RowOutput, ...]:
    """`outputs` of a row-wise rule: one entry per returned tensor, `rows` when left out."""
    line = doc.line("sharding", "outputs")
    if "outputs" not in table:
        return (RowOutput.ROWS,) * len(rets) if rule == "rowwise" else ()
    if rule != "rowwise":
        sink.error(
            line, f"sharding.outputs applies to rule 'rowwise' only, not {rule!r}", "remove outputs"
        )
        return ()
    outputs = string_list(sink, doc, table["outputs"], "sharding", "outputs")
    if outputs is None:
        return ()
    for value in outputs:
        if value not in ROW_OUTPUTS:
            sink.error(
                line,
                f"sharding.outputs entry {shown(value)} is not one of {', '.join(map(repr, ROW_OUTPUTS))}",
                "'rows': sharded like the rows (e.g. the normalised output); 'sum': a sum over the "
                "rows, e.g. the gradient of a weight",
            )
    if len(outputs) != len(rets):
        sink.error(
            line,
            f"sharding.outputs has {len(outputs)} entries but the schema returns {len(rets)} tensor(s)",
            'give one entry per returned tensor, e.g. outputs = ["rows", "sum", "sum"]',
        )
    return tuple(RowOutput(v) for v in outputs if v in ROW_OUTPUTS)  # an error above: no spec


def called_ops(expression: str, op_names: frozenset[str]) -> list[str]:
    """The project's ops a (validated) gradient formula calls, each once."""
    found: list[str] = []
    for node in ast.walk(ast.parse(expression, mode="eval")):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in op_names and node.func.id not in found:
                found.append(node.func.id)
    return found


# DTensor keys its sharding cache on the arguments from the first of these on
# (Note [Private torch checks], "sharding_cache_key").
_KEYED_TYPES = ("int", "int?")


@dataclass(frozen=True)
class CacheKey:
    """Where DTensor's cache key must start for an op: `first` positional argument on, with
    the keyword-only `keywords`; `unkeyed`: the arguments DTensor leaves out today."""

    first: int
    keywords: tuple[str, ...]
    unkeyed: tuple[str, ...]


def unkeyed_arguments(op: OpSpec) -> CacheKey | None:
    """The arguments an op's sharding decision depends on that DTensor's cache key leaves out.

    The built-in rules depend only on the tensors; an output shape (`[fake] expr`)
    or a `custom` rule may depend on any argument. None when nothing is left out.
    """
    if op.sharding is None:
        return None
    positional = [a for a in op.args if not a.kwarg_only]
    derived = next(
        (i for i, a in enumerate(positional) if a.family in _KEYED_TYPES), len(positional)
    )
    unkeyed = [a.name for a in positional[:derived] if not a.is_tensor]
    unkeyed += [a.name for a in op.args if a.kwarg_only and a.family not in _KEYED_TYPES]
    shape_names = {
        node.id
        for text in op.fake.expr
        for node in ast.walk(ast.parse(text, mode="eval"))
        if isinstance(node, ast.Name)
    }
    depends = op.sharding.rule == "custom" or bool(shape_names & set(unkeyed))
    if not unkeyed or not depends:
        return None
    first = next((i for i, a in enumerate(positional) if not a.is_tensor), len(positional))
    keywords = tuple(a.name for a in op.args if a.kwarg_only)
    return CacheKey(first, keywords, tuple(unkeyed))
