"""What the sharding templates print: each rule's Python, and the distributed tests' arguments.

`templates/package/sharding.py.j2` lays out the rules, `tests/test_sharding.py.j2`
the tests; the user's function of a `custom` rule comes from
`python/sharding_rule.py.j2`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..spec.model import Arg, OpSpec
from . import python as py
from .decisions import decisions
from .literals import literal
from .testing import registered_schema, schema_assignment, tolerance

__all__ = ["sharded_ops", "sharding_context", "sharding_test_context", "rule_module"]


def sharded_ops(ops: Sequence[OpSpec]) -> list[OpSpec]:
    return [op for op in ops if op.sharding is not None]


def rule_module(op: OpSpec) -> str:
    """The module of a `custom` rule's function, relative to the package."""
    return f"sharding_rules.{op.module}"


def _positional(op: OpSpec) -> list[Arg]:
    return [a for a in op.args if not a.kwarg_only]


def _tuple(names: Sequence[str]) -> str:
    return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"


def _rule_call(op: OpSpec) -> str:
    """The expression that makes the op's strategies from its arguments."""
    assert op.sharding is not None
    args = _tuple([a.name for a in _positional(op)])
    outputs = len(op.returns)
    rule = op.sharding.rule
    if rule == "elementwise":
        return (
            f"_elementwise({args}, outputs={outputs})" if outputs != 1 else f"_elementwise({args})"
        )
    if rule == "rowwise":
        return f"_rowwise({args}, {literal(tuple(op.sharding.outputs))})"
    if rule == "matmul":
        return f"_matmul({args})"
    if rule == "replicate":
        return f"[_replicated({args}, {outputs})]"
    return f"{op.module}_rule.strategies({py.call_arguments(op)})"


def _rule_context(op: OpSpec) -> dict[str, Any]:
    assert op.sharding is not None
    function = f"{op.module}_strategies"
    mutated = {a.name: i for i, a in enumerate(_positional(op)) if a.mutated}
    registered = (
        f"_keeping({literal(op.registered_name)}, {function}, {literal(mutated)})"
        if mutated
        else function
    )
    what = op.sharding.rule if op.sharding.rule != "custom" else "custom (your function)"
    return {
        "registered_name": op.registered_name,
        "handle": py.op_handle(op),
        "function": function,
        "signature": py.signature(op, annotate=False),
        "docstring": py.docstring(f"{op.registered_name}: {what}."),
        "body": _rule_call(op),
        "registered": registered,
    }


def sharding_context(ops: Sequence[OpSpec]) -> dict[str, Any]:
    """The `sharding` variables of `<package>/sharding.py`."""
    sharded = sharded_ops(ops)
    rules = {op.sharding.rule for op in sharded if op.sharding is not None}
    helpers = {
        "replicated": rules != {"custom"},
        "elementwise": "elementwise" in rules,
        "rowwise": "rowwise" in rules,
        "matmul": "matmul" in rules,
        "keeping": any(op.mutated for op in sharded),
    }
    partial = helpers["matmul"] or helpers["rowwise"]
    names = ["Partial"] * partial + ["Placement"]
    names += ["Replicate"] * helpers["replicated"]
    names += ["Shard"] * any(helpers[k] for k in ("elementwise", "rowwise", "matmul", "keeping"))
    custom = [op for op in sharded if op.sharding is not None and op.sharding.rule == "custom"]
    return {
        "rules": [_rule_context(op) for op in sharded],
        "helpers": helpers,
        "tensor_imports": ", ".join(names),
        "custom_imports": [
            f"from .sharding_rules import {op.module} as {op.module}_rule" for op in custom
        ],
    }


def sharding_test_context(op: OpSpec) -> dict[str, Any]:
    """One entry of `tests/test_sharding.py`: what `check_sharded` gets for the op."""
    assert op.sharding is not None
    samples = [
        [(name, py.sample_literal(value, op.arg(name).type)) for name, value in sample.values]
        for sample in op.test.samples
    ]
    return {
        "registered_name": op.registered_name,
        "schema_lines": schema_assignment("schema", registered_schema(op), 4),
        "name": op.name,
        "module": op.module,
        "rule": op.sharding.rule,
        "outputs": literal(tuple(op.sharding.outputs)),
        "samples": samples,
        "samples_from": op.test.samples_from,  # a generator of testing_helpers.py, after the tables
        "dtypes": list(op.test.dtypes),
        "differentiable": literal(decisions(op).formula_inputs),
        "mutated": literal(tuple(a.name for a in op.mutated)),
        "atol": literal(tolerance(op.test.atol)),
        "rtol": literal(tolerance(op.test.rtol)),
    }
