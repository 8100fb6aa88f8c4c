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

from ..spec.backends import backend_of
from ..spec.model import OpSpec
from . import python as py
from .decisions import AutogradKind, decisions
from .testing import compile_expectation, testing_names
from .transforms import wrapper_calls_tensors_of

__all__ = [
    "module_imports",
    "test_imports",
    "transforms_testing_names",
    "pt2_testing_names",
    "testing_imports",
]


def _globals(expressions: Iterable[str]) -> set[str]:
    return {
        node.id
        for text in expressions
        for node in ast.walk(ast.parse(text, mode="eval"))
        if isinstance(node, ast.Name)
    }


def _grouped(*groups: list[str]) -> list[str]:
    """Import lines, a blank string between groups (as isort groups them)."""
    lines: list[str] = []
    for group in (g for g in groups if g):
        lines += ([""] if lines else []) + group
    return lines


def _as(name: str, local: str) -> str:
    return name if name == local else f"{name} as {local}"


def module_imports(op: OpSpec, names: Mapping[str, str], context: Mapping[str, Any]) -> list[str]:
    """Every import of the op's generated module (`_generated/<op>.py`), grouped as isort does."""
    fake = py.fake_outputs(op) or ()
    # a Triton op with [triton] cpu = "reference" runs the reference expression on CPU
    fallback = [op.test.reference] if op.triton_cpu == "reference" and op.test.reference else []
    expressions = [*op.fake.checks, *fake, *(f.expression for f in op.grads), *op.jvp.result]
    used = _globals([*expressions, *fallback])
    used -= {a.name for a in op.args}  # an argument's name means the argument
    annotations = [py.annotation(a.type) for a in op.args] + [py.return_annotation(op.returns)]
    stdlib = ["import math"] if "math" in used else []
    if backend_of(op).uses_triton:
        stdlib.append("import os")
    if any("Sequence[" in text for text in annotations):
        stdlib.append("from collections.abc import Sequence")
    third_party = ["import torch"]
    if "F" in used:
        third_party.append("import torch.nn.functional as F")
    if any(re.search(r"\bTensor\b", text) for text in annotations):
        third_party.append("from torch import Tensor")
    function = context["function"]
    if function and context["once_differentiable"]:
        third_party.append("from torch.autograd.function import once_differentiable")
    package: list[str] = []
    if backend_of(op).compiles_cpp:
        package.append("from .. import _library  # noqa: F401  (defines the op)")
    rules = {op.vmap} if op.vmap in ("elementwise", "leading", "loop") else set()
    if rules:
        package.append(
            "from .._batching import " + ", ".join(_as(r, names[r]) for r in sorted(rules))
        )
    if function:
        helpers = ("flatten", "needs_function", "nest", "tensors_of", "unflatten")
        wanted = [h for h in helpers if h == "needs_function" or _wants(h, op, function)]
        package.append("from .._autograd import " + ", ".join(_as(h, names[h]) for h in wanted))
    if backend_of(op).kernel_package:
        package.append(f"from ..kernels import {op.module} as {names['kernels']}")
    if op.vmap == "custom":
        package.append(f"from ..kernels import {op.module}_vmap as {names['rule']}")
    if function:
        package += [f"from . import {m} as _op_{m}" for m in function["sibling_imports"]]
    return _grouped(stdlib, third_party, sorted(package, key=_isort_key))


def _wants(helper: str, op: OpSpec, function: Mapping[str, Any]) -> bool:
    """Whether the op's module calls one of `_autograd`'s helpers besides needs_function."""
    if helper == "tensors_of":
        return wrapper_calls_tensors_of(op)
    return bool(function["uses_lists"])


def _isort_key(line: str) -> tuple[int, str]:
    """isort's order of relative imports: farther packages (`..`) first, then by module."""
    module = line.split()[1]
    return (-(len(module) - len(module.lstrip("."))), module.lstrip("."))


def test_imports(op: OpSpec) -> list[str]:
    """The standard-library and third-party imports of the op's generated tests."""
    used = _globals([op.test.reference] if op.test.reference and op.test.has_samples else [])
    used -= {a.name for a in op.args}
    third_party = ["import pytest", "import torch"] + (
        ["import torch.nn.functional as F"] if "F" in used else []
    )
    return _grouped(["import math"] if "math" in used else [], third_party)


def transforms_testing_names(op: OpSpec, raw_handle_transforms: bool = False) -> list[str]:
    """The torch.func and torch.vmap checks the op's tests take from `opgen.testing`, sorted;
    the raw handle's refusal only where the project opts into it (Note [Private torch checks])."""
    if not op.test.has_samples:
        return []
    names: set[str] = set()
    decided = decisions(op)
    gradients = bool(decided.formula_inputs) and decided.autograd is AutogradKind.FUNCTION
    if gradients and op.test.has_reference:
        names.add("check_torch_func")
    if gradients and raw_handle_transforms:  # Note [Private torch checks]
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
    """The PyTorch 2 checks (shapes, export, autocast, tags, CUDA graphs) the op's tests take
    from `opgen.testing`, sorted.

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


def testing_imports(op: OpSpec, raw_handle_transforms: bool = False) -> list[str]:
    """Every name the op's tests import from `opgen.testing`, sorted as isort sorts them
    (the class first)."""
    names = {*testing_names(op), *pt2_testing_names(op)}
    if backend_of(op).uses_triton and "cuda" in op.devices and op.test.has_samples:
        names.add("check_inductor_traces_kernel")
    names |= set(transforms_testing_names(op, raw_handle_transforms))
    return sorted(names, key=lambda n: (n != "TensorSpec", n))
