"""The imports of generated Python files: exactly the names each file uses.

A name a spec expression may use (`math`, `F`) is imported only where an
expression of the file uses it; annotation types only where a signature
needs them. `tests/test_generated_lint.py` runs a linter over the output.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from ..spec.model import OpSpec
from . import python as py

__all__ = ["module_imports", "test_imports", "runtime_imports"]


def _globals(expressions: Iterable[str]) -> set[str]:
    return {
        node.id
        for text in expressions
        for node in ast.walk(ast.parse(text, mode="eval"))
        if isinstance(node, ast.Name)
    }


def _grouped(stdlib: list[str], third_party: list[str]) -> list[str]:
    """Import lines, a blank string between the standard library's and the rest (as isort groups them)."""
    return stdlib + ([""] if stdlib and third_party else []) + third_party


def module_imports(op: OpSpec) -> list[str]:
    """The standard-library and torch imports of the op's generated module (`_generated/<op>.py`)."""
    fake = py.fake_outputs(op) or ()
    used = _globals([*op.fake.checks, *fake, *(f.expression for f in op.grads)])
    used -= {a.name for a in op.args}  # an argument's name means the argument
    annotations = [py.annotation(a.type) for a in op.args] + [py.return_annotation(op.returns)]
    stdlib = ["import math"] if "math" in used else []
    if any("Sequence[" in text for text in annotations):
        stdlib.append("from collections.abc import Sequence")
    third_party = ["import torch"]
    if "F" in used:
        third_party.append("import torch.nn.functional as F")
    if any(re.search(r"\bTensor\b", text) for text in annotations):
        third_party.append("from torch import Tensor")
    if op.grads and not op.double_backward:
        third_party.append("from torch.autograd.function import once_differentiable")
    return _grouped(stdlib, third_party)


def test_imports(op: OpSpec) -> list[str]:
    """The standard-library and third-party imports of the op's generated tests."""
    used = _globals([op.test.reference] if op.test.reference and op.test.samples else [])
    used -= {a.name for a in op.args}
    third_party = ["import pytest", "import torch"] + (
        ["import torch.nn.functional as F"] if "F" in used else []
    )
    return _grouped(["import math"] if "math" in used else [], third_party)


def runtime_imports(op: OpSpec, names: dict[str, str], flags: dict[str, object]) -> list[str]:
    """`name as alias` of each helper the op's module takes from `<package>/_runtime.py`."""
    wanted = ["direct_call"]
    if flags["fast_path"]:
        wanted += [
            "AUTOGRAD",
            "any_requires_grad",
            "is_excluded",
            "set_excluded",
            "transforms_active",
        ]
    mutation = flags["mutation_fast_path"]
    if isinstance(mutation, dict):
        wanted += ["INPLACE_OR_VIEW", "bump_versions", "is_excluded", "set_excluded"]
        wanted += ["transforms_active"] + (["AUTOGRAD"] if mutation["autograd"] else [])
    helpers = ("missing_fake", "no_gradient", "register_below_autograd", "register_version_bump")
    for flag in (*helpers, "register_grad_refusal"):
        if flags[flag]:
            wanted.append(flag)
    aliases = {
        "direct_call": "_direct_call",
        "AUTOGRAD": names["AUTOGRAD"],
        "any_requires_grad": names["any_requires_grad"],
        "is_excluded": names["excluded"],
        "set_excluded": names["exclude"],
        "transforms_active": names["transforms_active"],
        "missing_fake": names["missing_fake"],
        "no_gradient": names["no_gradient"],
        "register_below_autograd": names["register_below_autograd"],
        "register_version_bump": names["register_version_bump"],
        "register_grad_refusal": names["register_grad_refusal"],
        "INPLACE_OR_VIEW": names["INPLACE_OR_VIEW"],
        "bump_versions": names["bump_versions"],
    }
    return sorted(f"{name} as {aliases[name]}" for name in set(wanted))
