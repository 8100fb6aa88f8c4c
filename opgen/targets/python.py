"""The Python side of every op: its generated module, its kernel stub (Python ops) and its tests."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..api.context import spec_path
from ..api.names import kernel_raise
from ..spec.backends import backend_of
from ..spec.model import OpSpec, ProjectConfig
from ..spec.paths import Owner
from . import Artifact, Context, header

__all__ = [
    "kernel_path",
    "vmap_rule_path",
    "module_path",
    "test_path",
    "op_module_artifact",
    "python_kernel_artifact",
    "vmap_rule_artifact",
    "test_artifact",
]


def kernel_path(package: str, module: str) -> str:
    """The user's kernel file of a Python op."""
    return f"{package}/kernels/{module}.py"


def vmap_rule_path(package: str, module: str) -> str:
    """The user's batching rule of an op with `vmap = "custom"` (Note [Batching rules])."""
    return f"{package}/kernels/{module}_vmap.py"


def vmap_rule_artifact(config: ProjectConfig, op: OpSpec, base: Callable[[], Context]) -> Artifact:
    """`<package>/kernels/<op>_vmap.py`: created once with a per-sample loop, then the user's."""
    source = spec_path(op, config)
    return Artifact(
        vmap_rule_path(config.package, op.module),
        "python/vmap_rule.py.j2",
        Owner.USER,
        source,
        lambda: {**base(), "header": header(source)},
    )


def module_path(package: str, module: str) -> str:
    """The generated module of an op."""
    return f"{package}/_generated/{module}.py"


def test_path(module: str) -> str:
    """The generated tests of an op."""
    return f"tests/test_{module}.py"


def op_module_artifact(config: ProjectConfig, op: OpSpec, base: Callable[[], Context]) -> Artifact:
    """`<package>/_generated/<op>.py`: definition, fake, autograd and the typed wrapper."""
    source = spec_path(op, config)
    template = backend_of(op).op_template
    path = module_path(config.package, op.module)
    return Artifact(
        path, template, Owner.GENERATED, source, lambda: {**base(), "header": header(source)}
    )


def python_kernel_artifact(
    config: ProjectConfig, op: OpSpec, base: Callable[[], Context], fresh: bool = False
) -> Artifact:
    """`<package>/kernels/<op>.py`: the user's implementation of a Python op.

    `fresh`: the op's spec is being created; its kernel starts with a starter body where opgen has one.
    """
    source = spec_path(op, config)
    path = kernel_path(config.package, op.module)

    def context(starter_lines: list[str] | None = None) -> Context:
        exception, where = kernel_raise(op, path)
        values = base()
        return {
            **values,
            "header": header(source),
            "kernel_file": path,
            "kernel_exception": exception,
            "kernel_source": where,
            "starter": starter_lines,
            "imported": None,
            **kernel_imports(values["op"]["kernel_defs"], starter_lines or []),
        }

    body = None
    if fresh:
        # imported here: the starters (and the C++ planning they share) serve only new specs
        from ..api.starter import starter

        body = starter(op)
    lines = body.python if body else None
    initial = (lambda: context(list(lines))) if lines else None
    return Artifact(path, "python/kernel.py.j2", Owner.USER, source, context, initial)


def kernel_imports(defs: list[list[str]], body: list[str]) -> Context:
    """Which of the stub's usual imports its signatures and starter body use: none unused (ruff F401)."""
    text = "\n".join([line for lines in defs for line in lines] + body)
    return {
        "import_sequence": re.search(r"\bSequence\b", text) is not None,
        "import_torch": re.search(r"\btorch\.", text) is not None,
        "import_tensor": re.search(r"\bTensor\b", text) is not None,
    }


def test_artifact(config: ProjectConfig, op: OpSpec, base: Callable[[], Context]) -> Artifact:
    """`tests/test_<op>.py`: the op's generated tests."""
    source = spec_path(op, config)
    return Artifact(
        test_path(op.module),
        "tests/test_op.py.j2",
        Owner.GENERATED,
        source,
        lambda: {**base(), "header": header(source)},
    )
