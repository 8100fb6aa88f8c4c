"""The spec model's choices are enums (Note [Choice enums] in opgen/spec/model.py)."""

from __future__ import annotations

import json

from opgen.spec.model import (
    Backend,
    CppTarget,
    Registration,
    RowOutput,
    ShardingRule,
    TritonCpu,
    VmapRule,
)
from opgen.spec.serial import op_from_json, op_to_json

from _specs import ROOT, op_from_toml

_SPEC = """
name = "mylib::norm"
schema = "(Tensor x) -> (Tensor, Tensor)"
backend = "cpp"
cpp_target = "classic"
vmap = "custom"
[sharding]
rule = "rowwise"
outputs = ["rows", "sum"]
[fake]
like = ["x", "x"]
[test]
[[test.samples]]
x = {shape = [2, 3]}
"""


def _choices(op: object) -> list[object]:
    return [
        op.backend,  # type: ignore[attr-defined]
        op.cpp_target,  # type: ignore[attr-defined]
        op.registration,  # type: ignore[attr-defined]
        op.vmap,  # type: ignore[attr-defined]
        op.triton_cpu,  # type: ignore[attr-defined]
        op.sharding.rule,  # type: ignore[attr-defined]
        *op.sharding.outputs,  # type: ignore[attr-defined]
    ]


def test_a_validated_spec_holds_enum_members() -> None:
    op = op_from_toml(_SPEC)
    assert _choices(op) == [
        Backend.CPP,
        CppTarget.CLASSIC,
        Registration.CUSTOM_OP,
        VmapRule.CUSTOM,
        TritonCpu.ERROR,
        ShardingRule.ROWWISE,
        RowOutput.ROWS,
        RowOutput.SUM,
    ]
    assert [type(c) for c in _choices(op)] == [
        Backend,
        CppTarget,
        Registration,
        VmapRule,
        TritonCpu,
        ShardingRule,
        RowOutput,
        RowOutput,
    ]


def test_a_choice_compares_prints_and_reprs_as_its_string() -> None:
    """Templates compare and print choices, and messages quote them, as they did strings."""
    assert CppTarget.CLASSIC == "classic"
    assert f"{CppTarget.CLASSIC} {CppTarget.CLASSIC!r}" == "classic 'classic'"
    assert {"cpp": 1}[Backend.CPP] == 1


def test_the_generate_cache_keeps_the_enum_members() -> None:
    op = op_from_toml(_SPEC)
    back = op_from_json(json.loads(json.dumps(op_to_json(op, ROOT))), ROOT)
    assert back == op
    assert [type(c) for c in _choices(back)] == [type(c) for c in _choices(op)]
