"""The variables each template receives, computed from the spec model.

Templates get finished strings only; see docs/templates.md for the list.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..spec.backends import backend_of
from ..spec.model import OpSpec, ProjectConfig
from ..spec.warnings import int_arguments, size_arguments, size_number_returns
from . import python as py
from .arg_checks import python_arg_checks, python_kernel_checks
from .decisions import decisions
from .devices import DISPATCH_KEYS
from .imports import (
    module_imports,
    pt2_testing_names,
    test_imports,
    testing_imports,
    transforms_testing_names,
)
from .layout import wrapped
from .literals import literal
from .names import Namer
from .pyexpr import expression
from .testing import test_context
from .transforms import class_name, function_context, public_name, vmap_context
from .triton import triton_context

__all__ = [
    "op_context",
    "project_context",
    "package_context",
    "ops_list",
    "spec_path",
    "siblings",
]


def _kernels(op: OpSpec) -> list[dict[str, Any]]:
    """One entry per registration: the kernel function each device (or each custom_op kernel) calls."""
    module = op.module
    if op.per_device:
        return [
            {
                "device": d,
                "function": f"{module}_{d}",
                "def_lines": py.def_lines(op, f"{module}_{d}", kernel=True),
                "device_types": literal((d,)),
                "dispatch_key": DISPATCH_KEYS[d],
            }
            for d in op.devices
        ]
    kernels = [
        {
            "device": d,
            "function": module,
            "def_lines": py.def_lines(op, module, kernel=True),
            "device_types": literal(tuple(op.devices)),
            "dispatch_key": DISPATCH_KEYS[d],
        }
        for d in op.devices
    ][: None if op.registration == "library" else 1]
    if op.registration == "library" and not any(a.differentiable for a in op.args):
        # a factory op: no tensor to dispatch on, so one kernel serves every device (it places
        # its outputs itself, on its Device argument or torch's default device)
        return [{**kernels[0], "dispatch_key": "CompositeExplicitAutograd"}]
    return kernels


def _kernel_functions(op: OpSpec) -> list[str]:
    """The functions of the Python kernel file: one per device with `per_device`, else one."""
    return [f"{op.module}_{d}" for d in op.devices] if op.per_device else [op.module]


# the module-level names of the op's generated module, by role; an argument may take any of them
_INTERNAL = {
    "op": "_op",
    "kernels": "_kernels",
    "lib": "_lib",
    "rule": "_rule",
    "needs_function": "needs_function",
    "tensors_of": "tensors_of",
    "elementwise": "elementwise",
    "leading": "leading",
    "loop": "loop",
    "flatten": "flatten",
    "unflatten": "unflatten",
    "nest": "nest",
    "result": "result",
    # Triton ops (Note [Triton ops] in api/triton.py)
    "launch": "_launch",
    "check_inputs": "_check_inputs",
    "interpreted": "_INTERPRETED",
}


def _internal_names(op: OpSpec) -> dict[str, str]:
    """Module-level names the generated op module uses (Note [Generated names]).

    Each keeps its name (`_op`, `needs_function`, `loop`...) unless an argument or the
    op has it, and then takes `_` suffixes (an import then reads `loop as loop_`);
    `torch` stays `torch` unless an argument is called `torch`, and then names an alias.
    """
    arguments = {a.name for a in op.args}
    namer = Namer(arguments | {op.name, op.module})
    names = {role: namer(preferred) for role, preferred in _INTERNAL.items()}
    names["bridge"] = namer(f"_{op.module}")
    # the fake kernel and the batching rule are registered by decorators and named `_`
    names["registered"] = namer("_")
    # the parameters torch's vmap passes the registered batching rule first
    names["info"] = namer("info")
    names["in_dims"] = namer("in_dims")
    names["Function"] = namer(class_name(op))
    # the fake calls torch._check: through an alias when an argument is called torch
    names["torch"] = namer("_torch") if "torch" in arguments else "torch"
    # the Function's refusing backward raises RuntimeError: through an alias when the op's
    # wrapper is called RuntimeError (the methods look it up when they run)
    shadowed = "RuntimeError" in (op.name, op.module)
    names["error"] = namer("_RuntimeError") if shadowed else "RuntimeError"
    return names


def _check(op: OpSpec, check: str, torch: str, indent: str = "    ") -> dict[str, Any]:
    """One `torch._check` of the fake kernel (`torch` is what the module calls torch): its parts,
    and the statement laid out as black does at `indent`."""
    code, message = expression(check), literal(f"{op.qualname}: expected {check}")
    lines = wrapped(f"{torch}._check(", [code, f"lambda: {message}"], ")", indent)
    # Note [Argument checks]: a Python op's registered kernel makes the call inside an `if`
    bridge = wrapped(f"{torch}._check(", [code, f"lambda: {message}"], ")", indent + "    ")
    return {"expression": code, "message": message, "lines": lines, "bridge_lines": bridge}


def spec_path(op: OpSpec, config: ProjectConfig) -> str:
    """The op's spec as generated files name it: relative to the project root."""
    return _relative(op.path, config.root)


@functools.lru_cache(maxsize=4096)
def _relative(path: Path, root: Path) -> str:
    # asked several times per op and run (targets, keys, plan): pathlib's relative_to is slow
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name


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
    the specs of those ops (`called_ops`, Note [Generate cache] in incremental/inputs.py).
    """
    library = library if library is not None else {op.name: op.module}
    decided = decisions(op)
    differentiable = decided.formula_inputs
    path = spec_path(op, config)
    raw_transforms = "raw_handle_transforms" in config.private_torch
    fake = py.fake_outputs(op)
    names = _internal_names(op)
    context = {
        "qualname": op.qualname,
        "namespace": op.namespace,
        "name": op.name,
        "overload_name": op.overload_name,
        "module": op.module,
        "spec_path": path,
        "backend": op.backend,
        "registration": op.registration,
        "devices": literal(list(op.devices)),
        "device_list": list(op.devices),
        "schema_literal": literal(op.schema),
        "full_schema_literal": literal(op.full_schema),
        "tags": list(op.tags),
        "tags_literal": _tags(op),
        "library_reason": decided.library_reason,
        "mutated_names": literal(tuple(a.name for a in op.mutated)),
        "differentiable_names": literal(differentiable),
        "differentiable": list(differentiable),
        "signature": py.signature(op),
        "wrapper_def": py.def_lines(op, op.name),
        "plain_signature": py.signature(op, annotate=False),
        "fake_def": wrapped(
            f"def {names['registered']}(", py.parameters(op, annotate=False), "):", "", is_def=True
        ),
        "call_arguments": py.call_arguments(op),
        "return_annotation": py.return_annotation(op.returns),
        "kernel_return_annotation": py.return_annotation(op.returns, kernel=True),
        "handle": py.op_handle(op),
        "docstring": py.docstring(op.doc or f"The {op.qualname} operator."),
        "names": names,
        "kernels": _kernels(op),
        "kernel_functions": _kernel_functions(op),
        "kernel_defs": [py.def_lines(op, f, kernel=True) for f in _kernel_functions(op)],
        "fake_checks": [_check(op, c, names["torch"]) for c in op.fake.checks],
        # Note [Argument checks]: run by the fake kernel and by a Python op's registered kernel
        "arg_checks": python_arg_checks(op, names["torch"]),
        "kernel_checks": python_kernel_checks(op, names["torch"]),
        "kernel_note": literal(f"raised in {op.qualname}'s kernel (kernels/{op.module}.py)"),
        "fake_return": ", ".join(fake) if fake else "",
        "missing_fake": (
            None
            if fake is not None or not op.returns
            else literal(
                f"{op.qualname} has no fake kernel: add a [fake] table to {path} "
                '(like = "<tensor input>" or expr = "<expression per return>") so that '
                "torch.compile and opcheck know its outputs"
            )
        ),
        "function": function_context(op, library, names),
        "once_differentiable": decided.once_differentiable,
        "vmap": vmap_context(op, names),
        "autocast": [(device, f"torch.{dtype}") for device, dtype in op.autocast],
        "positional_arguments": ", ".join(a.name for a in op.args),
        "bumped": _bumped(op) if decided.wrapper_bumps_versions else [],
        "returns_nothing": not op.returns,
        "cpp_mutation_fallbacks": decided.cpp_mutation_fallbacks,
        "registered_name": op.registered_name,
        "double_backward": op.double_backward,
        **test_context(op, path),
        "test_imports": test_imports(op),
        "testing_imports": testing_imports(op, raw_transforms),
        "transforms_testing_names": transforms_testing_names(op, raw_transforms),
        # Note [Private torch checks]: the raw handle's torch.func refusal, forward mode and
        # written versions
        "raw_handle_refusal": raw_transforms,
        "raw_forward_ad": raw_transforms,
        "raw_versions": "raw_handle_versions" in config.private_torch,
        "pt2_testing_names": pt2_testing_names(op),
        "has_jvp": op.jvp.present,
        "vmap_leading": literal(op.vmap_leading),
        "sizes": literal(tuple(size_arguments(op))),
        "size_ints": literal(
            tuple(n for n in size_arguments(op) if n in int_arguments(op))
            + tuple(label for label, family in size_number_returns(op) if family == "int")
        ),
        "tag_names": literal(list(op.tags)),
        "public_name": public_name(op, config.package),
    }
    context["triton"] = None
    if backend_of(op).uses_triton:
        # the inner op's fake kernel sits one level deeper (Note [Triton ops])
        nested = [_check(op, c, names["torch"], "        ") for c in op.fake.checks]
        context["triton"] = {**triton_context(op, path, names), "fake_checks": nested}
    context["module_imports"] = module_imports(op, names, context)
    return context


def _bumped(op: OpSpec) -> list[dict[str, Any]]:
    """The written arguments whose versions the wrapper bumps (Note [Written arguments])."""
    return [{"name": a.name, "optional": a.is_optional} for a in op.mutated]


def _tags(op: OpSpec) -> str | None:
    """The spec's tags as a Python tuple literal of torch.Tag values, or None."""
    if not op.tags:
        return None
    items = [f"torch.Tag.{tag}" for tag in op.tags]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"  # black's spelling


def project_context(config: ProjectConfig) -> dict[str, Any]:
    """The `project` variables of every template: opgen.toml's values only.

    Note [Generate cache] in incremental/inputs.py: an op's files are rendered again only
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
        "has_cpp": any(backend_of(op).compiles_cpp for op in ops),
        "has_triton": any(backend_of(op).uses_triton for op in ops),
        "has_sharding": any(op.sharding is not None for op in ops),
    }


def ops_list(ops: Sequence[OpSpec]) -> list[dict[str, str]]:
    """The `ops` variable of project-wide templates."""
    return [{"name": op.name, "module": op.module} for op in ops]
