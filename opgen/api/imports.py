"""The imports of generated Python files: exactly the names each file uses.

A name a spec expression may use (`math`, `F`) is imported only where an
expression of the file uses it; annotation types only where a signature
needs them. `tests/test_generated_lint.py` runs a linter over the output.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..spec.model import OpSpec
from . import python as py
from .autograd import list_positions
from .fastpath import (
    AutogradKind,
    autograd_kind,
    cpp_autograd,
    grad_in_python_from_cpp,
)
from .testing import compile_expectation

__all__ = [
    "module_imports",
    "runtime_imports",
    "test_imports",
    "transforms_testing_names",
    "pt2_testing_names",
]


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
    used = _globals([*op.fake.checks, *fake, *(f.expression for f in op.grads), *op.jvp.result])
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
    used = _globals([op.test.reference] if op.test.reference and op.test.has_samples else [])
    used -= {a.name for a in op.args}
    third_party = ["import pytest", "import torch"] + (
        ["import torch.nn.functional as F"] if "F" in used else []
    )
    return _grouped(["import math"] if "math" in used else [], third_party)


def runtime_imports(op: OpSpec, names: Mapping[str, str], flags: Mapping[str, Any]) -> list[str]:
    """`name as alias` of each helper the op's module takes from `<package>/_runtime.py`."""
    kind = autograd_kind(op)
    function = kind in (AutogradKind.FUNCTION, AutogradKind.REFUSE)
    wanted = {"direct_call"}
    if function:
        wanted |= {"below_autograd", "plain_apply", "op_instead_of_function", "transforms_active"}
        if not op.grads or not op.jvp.present:
            wanted.add("no_gradient")
        if list_positions(op):
            wanted |= {"flatten", "unflatten"}
        if any(r.family == "Tensor[]" for r in op.returns):
            wanted |= {"nest"} | ({"flatten"} if len(op.returns) > 1 else set())
        if not cpp_autograd(op):
            wanted |= {"redispatch", "AFTER_AUTOGRAD", "any_requires_grad", "FORWARD_AD"}
            wanted |= {"needs_autograd", "refuse_under_transforms"}
    if grad_in_python_from_cpp(op):
        wanted.add("refuse_under_transforms")
    if flags["fast_path"]:
        wanted |= {"AUTOGRAD", "is_excluded", "set_excluded", "any_requires_grad", "FORWARD_AD"}
    mutation = flags["mutation_fast_path"]
    if isinstance(mutation, dict):
        wanted |= {"INPLACE_OR_VIEW", "bump_versions", "is_excluded", "set_excluded"}
        wanted |= {"transforms_active"} | ({"AUTOGRAD"} if mutation["autograd"] else set())
    for flag in ("missing_fake", "register_below_autograd", "register_version_bump"):
        if flags[flag]:
            wanted.add(flag)
    return sorted(f"{name} as {names[_ROLES.get(name, name)]}" for name in wanted)


# the role in `op.names` of each `_runtime.py` name whose alias is not `_<name>`
_ROLES = {
    "is_excluded": "excluded",
    "set_excluded": "exclude",
    "plain_apply": "plain_apply_of",
    "redispatch": "redispatch_of",
    "op_instead_of_function": "op_instead",
}


def transforms_testing_names(op: OpSpec, differentiable: Iterable[str]) -> list[str]:
    """What the op's tests import from `<package>/_testing_transforms.py`, sorted."""
    if not op.test.has_samples:
        return []
    names: set[str] = set()
    gradients = bool(list(differentiable)) and autograd_kind(op) is AutogradKind.FUNCTION
    if gradients and op.test.has_reference:
        names.add("check_torch_func")
    if gradients:
        names.add("check_raw_handle_refuses")
    if op.vmap != "none":
        names.add("check_vmap")
        if gradients and op.test.has_reference:
            names.add("check_vmap_grad")
    return sorted(names)


def captured_in_cuda_graph(op: OpSpec) -> bool:
    """Whether the op's CUDA tests capture it in a CUDA graph (`[test] cuda_graph`).

    Not by default where an output's size depends on the values: the kernel
    must copy a count to the host, which a capture refuses, and a graph could
    not replay another size anyway.
    """
    if op.test.cuda_graph is not None:
        return op.test.cuda_graph
    return not op.fake.data_dependent


def pt2_testing_names(op: OpSpec) -> list[str]:
    """What the op's tests import from `<package>/_testing_pt2.py`, sorted.

    The dynamic-shape, export and CUDA-graph checks compile the op: an op that
    torch cannot compile gets none of them (its compile test asserts torch's
    documented error instead, Note [What the generated tests expect]).
    """
    names = {"check_tags"} if op.tags else set()
    if not op.test.has_samples:
        return sorted(names)
    if compile_expectation(op) == "run":
        names |= {"check_dynamic_shapes", "check_export"}
        if "cuda" in op.devices and captured_in_cuda_graph(op):
            names |= {"check_cuda_graph", "check_cuda_graph_compiled"}
    if op.autocast and op.test.has_reference:
        names.add("check_autocast")
    return sorted(names)
