"""The variables each template receives, computed from the spec model.

Templates get finished strings only; see docs/templates.md for the list.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from ..spec.model import OpSpec, ProjectConfig
from ..spec.warnings import int_arguments, size_arguments
from . import python as py
from .devices import DISPATCH_KEYS
from .fastpath import fast_path_inputs
from .imports import (
    module_imports,
    pt2_testing_names,
    runtime_imports,
    test_imports,
    testing_names,
    transforms_testing_names,
)
from .layout import wrapped
from .literals import literal
from .pyexpr import expression
from .transforms import function_context, kernel_context, public_name, vmap_context

__all__ = [
    "op_context",
    "project_context",
    "package_context",
    "ops_list",
    "spec_path",
    "siblings",
]


def _kernels(op: OpSpec) -> list[dict[str, Any]]:
    module = op.module
    if op.per_device:
        return [
            {
                "device": d,
                "function": f"{module}_{d}",
                "def_lines": py.def_lines(op, f"{module}_{d}"),
                "device_types": literal((d,)),
                "dispatch_key": DISPATCH_KEYS[d],
            }
            for d in op.devices
        ]
    return [
        {
            "device": d,
            "function": module,
            "def_lines": py.def_lines(op, module),
            "device_types": literal(tuple(op.devices)),
            "dispatch_key": DISPATCH_KEYS[d],
        }
        for d in op.devices
    ][: None if op.registration == "library" else 1]


def _check(op: OpSpec, check: str) -> dict[str, Any]:
    """One `torch._check` of the fake kernel: its parts, and the statement laid out as black does."""
    code, message = expression(check), literal(f"{op.qualname}: expected {check}")
    lines = wrapped("torch._check(", [code, f"lambda: {message}"], ")", "    ")
    return {"expression": code, "message": message, "lines": lines}


def spec_path(op: OpSpec, config: ProjectConfig) -> str:
    """The op's spec as generated files name it: relative to the project root."""
    return (
        op.path.relative_to(config.root).as_posix()
        if op.path.is_relative_to(config.root)
        else op.path.name
    )


def siblings(ops: Sequence[OpSpec]) -> dict[str, str]:
    """Op name -> module, for the names a formula can call through one typed wrapper (no overloads)."""
    modules: dict[str, list[str]] = {}
    for op in ops:
        modules.setdefault(op.name, []).append(op.module)
    return {name: found[0] for name, found in modules.items() if len(found) == 1}


def op_context(
    op: OpSpec, config: ProjectConfig, library: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The `op` variables of an op's templates (see docs/templates.md).

    `library` maps the names of the project's ops to their modules (`siblings`):
    formulas call those ops through their typed wrappers. Only the entries of
    the ops the formulas name are read, and the keys of the op's files cover
    the specs of those ops (`called_ops`, Note [Generate cache] in inputs.py).
    """
    library = library if library is not None else {op.name: op.module}
    samples = [
        [(name, py.sample_literal(value, op.arg(name).type)) for name, value in sample.values]
        for sample in op.test.samples
    ]
    differentiable = tuple(name for f in op.grads for name in f.inputs)
    differentiable = tuple(a.name for a in op.args if a.name in differentiable)
    return {
        "qualname": op.qualname,
        "namespace": op.namespace,
        "name": op.name,
        "overload_name": op.overload_name,
        "module": op.module,
        "spec_path": spec_path(op, config),
        "backend": op.backend,
        "registration": op.registration,
        "devices": literal(list(op.devices)),
        "device_list": list(op.devices),
        "schema_literal": literal(op.schema),
        "full_schema_literal": literal(op.full_schema),
        "mutated_names": literal(tuple(a.name for a in op.mutated)),
        "differentiable_names": literal(differentiable),
        "differentiable": list(differentiable),
        "signature": py.signature(op),
        "wrapper_def": py.def_lines(op, op.name),
        "plain_signature": py.signature(op, annotate=False),
        "call_arguments": py.call_arguments(op),
        "return_annotation": py.return_annotation(op.returns),
        "handle": py.op_handle(op),
        "docstring": py.docstring(op.doc or f"The {op.qualname} operator."),
        "kernels": _kernels(op),
        "fake_checks": [_check(op, c) for c in op.fake.checks],
        "fake_return": ", ".join(py.fake_outputs(op)),
        "function": function_context(op, library),
        "kernel": kernel_context(op, config.package),
        "vmap": vmap_context(op),
        "autocast": [(device, f"torch.{dtype}") for device, dtype in op.autocast],
        "tags_literal": _tags(op),
        "positional_arguments": ", ".join(a.name for a in op.args),
        "registered_name": op.registered_name,
        "fast_path": fast_path_inputs(op),
        "double_backward": op.double_backward,
        "samples": samples,
        "sample_dicts": [py.dict_lines(sample, indent="    ") for sample in samples],
        "reference": expression(op.test.reference) if op.test.reference else None,
        "test_dtypes": list(op.test.dtypes),
        "atol": literal(op.test.atol),
        "rtol": literal(op.test.rtol),
        "module_imports": module_imports(op),
        "runtime_imports": runtime_imports(op),
        "test_imports": test_imports(op),
        "testing_names": testing_names(op, differentiable),
        "transforms_testing_names": transforms_testing_names(op, differentiable),
        "pt2_testing_names": pt2_testing_names(op),
        "has_jvp": op.jvp.present,
        "vmap_leading": literal(op.vmap_leading),
        "sizes": literal(tuple(size_arguments(op))),
        "size_ints": literal(tuple(n for n in size_arguments(op) if n in int_arguments(op))),
        "tags": list(op.tags),
        "tag_names": literal(list(op.tags)),
        "public_name": public_name(op, config.package),
    }


def _tags(op: OpSpec) -> str | None:
    """The spec's tags as a Python tuple literal of torch.Tag values, or None."""
    if not op.tags:
        return None
    items = [f"torch.Tag.{tag}" for tag in op.tags]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"  # black's spelling


def project_context(config: ProjectConfig) -> dict[str, Any]:
    """The `project` variables of every template: opgen.toml's values only.

    Note [Generate cache] in inputs.py: an op's files are rendered again only
    when its spec (or a spec it calls) changes, so what its templates receive
    may not depend on the other ops; `package_context` adds what does.
    """
    return {
        "namespace": config.namespace,
        "package": config.package,
        "compile_backend": config.compile_backend,
        "cpp_target": config.cpp_target,
        "torch_target_version": config.torch_target_version,
    }


def package_context(config: ProjectConfig, ops: Sequence[OpSpec]) -> dict[str, Any]:
    """The `project` variables of project-wide templates: also what depends on every op."""
    return {
        **project_context(config),
        "has_cpp": any(op.backend == "cpp" for op in ops),
        "has_sharding": any(op.sharding is not None for op in ops),
        "schema_digest": _schema_digest(ops),
    }


def ops_list(ops: Sequence[OpSpec]) -> list[dict[str, str]]:
    """The `ops` variable of project-wide templates."""
    return [{"name": op.name, "module": op.module} for op in ops]


def _schema_digest(ops: Sequence[OpSpec]) -> str:
    """Names the compile cache of the generated tests; see the note in tests/conftest.py.j2."""
    schemas = sorted(f"{op.namespace}::{op.full_schema}" for op in ops)
    return hashlib.sha256("\n".join(schemas).encode()).hexdigest()[:12]
