"""Checks that need more than one spec, or the project's C++ target.

`spec/validate.py` checks each spec on its own; these run once over every op
that passed, so that `load_project` reports all problems of a project in one
list before anything is rendered or written.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import Diagnostic
from ..spec.backends import backend_of
from ..spec.dialect.types import TypeKind
from ..spec.model import OpSpec
from ..spec.sharding import called_ops

__all__ = ["project_problems", "duplicate_problems", "cpp_problems", "sharding_problems"]

_STABLE_HINT = (
    'set cpp_target = "classic" for this op; all C++ ops of a project share one target, '
    "so set it under [options] in opgen.toml"
)


def project_problems(root: Path, ops: list[OpSpec], cpp_target: str) -> list[Diagnostic]:
    """Every cross-spec and C++ target problem of `ops`."""
    return (
        duplicate_problems(root, ops) + cpp_problems(ops, cpp_target) + sharding_problems(root, ops)
    )


def _shown(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name


def duplicate_problems(root: Path, ops: list[OpSpec]) -> list[Diagnostic]:
    """Two specs for one op, or two ops that would share generated file names."""
    problems: list[Diagnostic] = []
    by_name: dict[str, OpSpec] = {}
    by_module: dict[str, OpSpec] = {}
    for op in ops:
        line = op.lines.get("name", 1)
        first = by_name.get(op.registered_name)
        other = by_module.get(op.module)
        if first is not None:
            problems.append(
                Diagnostic(
                    op.path,
                    line,
                    f"op {op.registered_name} is also defined in {_shown(root, first.path)}",
                    "keep one spec per op: delete this file or rename the op",
                )
            )
        elif other is not None:
            problems.append(
                Diagnostic(
                    op.path,
                    line,
                    f"op {op.registered_name} would generate the same files ({op.module}.py) as "
                    f"{other.registered_name} in {_shown(root, other.path)}",
                    "rename one of the two ops",
                )
            )
        by_name.setdefault(op.registered_name, op)
        by_module.setdefault(op.module, op)
    return problems


def _op_cpp_problems(op: OpSpec) -> list[Diagnostic]:
    """Every reason the op cannot be generated for its C++ target."""
    from ..api.cpp import arg_type  # here: a project of Python ops never needs the C++ types

    problems: list[Diagnostic] = []
    for arg in op.args:
        try:
            arg_type(arg.type, op.cpp_target)
        except ValueError:
            why = ""
            if arg.type.element == "Scalar":
                why = " (the stable ABI has no Scalar; use float or int)"
            elif arg.type.unwrapped.kind is TypeKind.TUPLE:
                why = " (the stable ABI cannot pass a tuple to a kernel; use int[] or separate arguments)"
            problems.append(
                Diagnostic(
                    op.path,
                    op.lines.get("schema"),
                    f"argument {arg.name!r}: the {op.cpp_target} C++ target cannot carry schema type {arg.type.spelling}{why}",
                    (
                        _STABLE_HINT
                        if op.cpp_target == "stable"
                        else "use a type from the table in docs/cpp.md"
                    ),
                )
            )
    for index, ret in enumerate(op.returns):
        if op.cpp_target == "stable" and ret.family == "bool[]":
            problems.append(
                Diagnostic(
                    op.path,
                    op.lines.get("schema"),
                    f"return {index + 1}: the stable C++ target cannot return bool[] (the stable "
                    "ABI converts lists through their data pointer, which std::vector<bool> has not)",
                    'return int[] (0 and 1), or set cpp_target = "classic" (c10::List<bool>)',
                )
            )
    if op.pybind and op.cpp_target != "classic":
        problems.append(
            Diagnostic(
                op.path,
                op.lines.get("pybind"),
                "pybind = true needs the classic C++ target (pybind11 binds at::Tensor, which the stable ABI does not expose)",
                'set cpp_target = "classic" (in opgen.toml [options] or this spec), or remove pybind',
            )
        )
    return problems


def cpp_problems(ops: list[OpSpec], project_target: str) -> list[Diagnostic]:
    """Note [Mixed C++ targets]
    A namespace is defined by one library block, and a block is either a
    STABLE_TORCH_LIBRARY or a TORCH_LIBRARY: the two cannot share it, and
    `opgen build` links one shared library per project whose ABI (abi3 or
    not) is a single choice. So every C++ op of a project uses the same
    target; an op that disagrees is reported with the project's choice.
    """
    problems: list[Diagnostic] = []
    for op in ops:
        if not backend_of(op).compiles_cpp:
            continue
        problems.extend(_op_cpp_problems(op))
        if op.cpp_target != project_target:
            problems.append(
                Diagnostic(
                    op.path,
                    op.lines.get("cpp_target", op.lines.get("backend")),
                    f"cpp_target {op.cpp_target!r} differs from the project's {project_target!r}; "
                    "all C++ ops of a namespace share one library block and one ABI",
                    f'set [options] cpp_target = "{op.cpp_target}" in opgen.toml for every op, or remove cpp_target from this spec',
                )
            )
    return problems


def sharding_problems(root: Path, ops: list[OpSpec]) -> list[Diagnostic]:
    """An op with a sharding rule whose gradient formulas call an op without one.

    Its forward would run on DTensors and its backward fail, at `backward()`
    only, with "Operator ... does not have a sharding strategy registered".
    """
    problems: list[Diagnostic] = []
    by_name: dict[str, list[OpSpec]] = {}
    for op in ops:
        by_name.setdefault(op.name, []).append(op)
    for op in ops:
        if op.sharding is None:
            continue
        for formula in op.grads:
            inputs = {a.name for a in op.args}
            for name in called_ops(formula.expression, frozenset(by_name) - inputs):
                missing = [other for other in by_name[name] if other.sharding is None]
                if missing:
                    problems.append(
                        Diagnostic(
                            op.path,
                            formula.line,
                            f"the gradient formula for {', '.join(formula.inputs)!r} calls "
                            f"{name}, which has no sharding rule: backward on DTensors would fail",
                            f"add a [sharding] table to {_shown(root, missing[0].path)} "
                            '(e.g. rule = "elementwise"), or remove [sharding] from this spec',
                        )
                    )
    return problems
