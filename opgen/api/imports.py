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

__all__ = ["module_imports", "test_imports", "testing_names"]


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
    used = _globals([*op.fake.checks, *py.fake_outputs(op), *(f.expression for f in op.grads)])
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
    used = _globals([op.test.reference] if op.test.reference else [])
    third_party = ["import pytest", "import torch"] + (
        ["import torch.nn.functional as F"] if "F" in used else []
    )
    return _grouped(["import math"] if "math" in used else [], third_party)


def testing_names(op: OpSpec, differentiable: Iterable[str]) -> list[str]:
    """What the op's tests import from the package's `_testing` module, sorted."""
    names = {"check_compile", "check_opcheck", "check_private_bindings", "device_params"}
    if any(
        hasattr(value, "shape")
        or (isinstance(value, tuple) and any(hasattr(v, "shape") for v in value))
        for s in op.test.samples
        for _, value in s.values
    ):
        names.add("TensorSpec")
    if op.test.reference:
        names.add("check_reference")
    if list(differentiable):
        names.add("check_gradients")
        if not op.double_backward:
            names.add("check_double_backward_refused")
    return sorted(names, key=lambda n: (n != "TensorSpec", n))
