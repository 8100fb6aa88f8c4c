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
from .autograd import list_positions
from .fastpath import (
    AutogradKind,
    autograd_kind,
    cpp_autograd,
    fast_path_inputs,
    grad_in_python_from_cpp,
)

__all__ = [
    "module_imports",
    "runtime_imports",
    "test_imports",
    "testing_names",
    "transforms_testing_names",
    "pt2_testing_names",
]

# How an op module names what it imports from `<package>/_runtime.py`.
_RUNTIME_ALIASES = {
    "is_excluded": "_excluded",
    "set_excluded": "_exclude",
    "plain_apply": "_plain_apply_of",
    "redispatch": "_redispatch_of",
    "op_instead_of_function": "_op_instead",
}


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


def runtime_imports(op: OpSpec) -> list[str]:
    """What the op's module imports from `<package>/_runtime.py`, as `name as alias`, sorted by name."""
    kind = autograd_kind(op)
    function = kind in (AutogradKind.FUNCTION, AutogradKind.REFUSE)
    names = {"direct_call"}
    if function:
        names |= {"below_autograd", "plain_apply", "op_instead_of_function", "transforms_active"}
        if list_positions(op):
            names |= {"flatten", "unflatten"}
        if any(r.type == "Tensor[]" for r in op.returns):
            names |= {"nest"} | ({"flatten"} if len(op.returns) > 1 else set())
    if kind is not AutogradKind.NONE and not cpp_autograd(op):
        names |= {"redispatch", "AFTER_AUTOGRAD"}
        if function:
            names |= {
                "any_requires_grad",
                "FORWARD_AD",
                "needs_autograd",
                "refuse_under_transforms",
            }
    if grad_in_python_from_cpp(op):
        names.add("refuse_under_transforms")
    if fast_path_inputs(op):
        names |= {"AUTOGRAD", "is_excluded", "set_excluded", "any_requires_grad", "FORWARD_AD"}
    return [
        f"{name} as {_RUNTIME_ALIASES.get(name, '_' + name)}"
        for name in sorted(names, key=lambda n: (not n.isupper(), n))
    ]


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


def transforms_testing_names(op: OpSpec, differentiable: Iterable[str]) -> list[str]:
    """What the op's tests import from `<package>/_testing_transforms.py`, sorted."""
    names: set[str] = set()
    gradients = bool(list(differentiable)) and autograd_kind(op) is AutogradKind.FUNCTION
    if gradients and op.test.reference:
        names.add("check_torch_func")
    if gradients:
        names.add("check_raw_handle_refuses")
    if op.vmap != "none":
        names.add("check_vmap")
        if gradients and op.test.reference:
            names.add("check_vmap_grad")
    return sorted(names)


def pt2_testing_names(op: OpSpec) -> list[str]:
    """What the op's tests import from `<package>/_testing_pt2.py`, sorted."""
    names = {"check_dynamic_shapes", "check_export"}
    if op.autocast and op.test.reference:
        names.add("check_autocast")
    if op.tags:
        names.add("check_tags")
    if "cuda" in op.devices:
        names |= {"check_cuda_graph", "check_cuda_graph_compiled"}
    return sorted(names)
