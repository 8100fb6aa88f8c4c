"""The `private` variables: what `<package>/_private_torch.py` installs for the checks a project
opts into (Note [Private torch checks] in opgen/runtime/private_torch.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..spec.model import OpSpec, ProjectConfig
from ..spec.sharding import unkeyed_arguments
from . import python as py
from .autograd import list_positions
from .decisions import decisions
from .devices import DISPATCH_KEYS
from .literals import literal
from .transforms import class_name, public_name

__all__ = ["private_context"]


def _autograd_keys(op: OpSpec) -> tuple[str, ...]:
    """Where the op's Autograd kernel goes: custom_op owns the Autograd alias, so per device."""
    if decisions(op).custom_op:  # triton_op registers through custom_op too
        return tuple(f"Autograd{DISPATCH_KEYS[d]}" for d in op.devices)
    return ("Autograd",)


def _apply(op: OpSpec) -> str:
    """A lambda applying the op's Function from `_private_torch.py` (its module is `_<module>`)."""
    module = f"_{op.module}"
    arguments = ", ".join(a.name for a in op.args)
    # the Autograd kernel gets keyword-only arguments by keyword, and leaves defaults out
    params = ", ".join(py.parameters(op, annotate=False))
    lists = list_positions(op)
    if lists:
        arguments = (
            f"*_autograd.flatten({literal(lists)}, ({arguments}{',' if len(op.args) == 1 else ''}))"
        )
    applied = f"{module}.{class_name(op)}.apply({arguments})"
    returns = tuple(r.family == "Tensor[]" for r in op.returns)
    if any(returns):
        applied = f"_autograd.nest({literal(returns)}, {applied})"
    return f"lambda {params}: {applied}"


def private_context(config: ProjectConfig, ops: Sequence[OpSpec]) -> dict[str, Any]:
    """What `_private_torch.py.j2`, `__init__.py.j2` and `sharding.py.j2` print for the opt-in."""
    checks = set(config.private_torch)
    transforms = [
        {
            "module": op.module,
            "handle": py.op_handle(op),
            "apply": _apply(op),
            "public": literal(public_name(op, config.package)),
            "autograd_keys": literal(_autograd_keys(op)),
        }
        for op in ops
        if "raw_handle_transforms" in checks and decisions(op).has_function
    ]
    versions = [
        {"handle": py.op_handle(op), "returns_values": bool(op.returns)}
        for op in ops
        if "raw_handle_versions" in checks and decisions(op).wrapper_bumps_versions
    ]
    keys = []
    for op in ops:
        key = unkeyed_arguments(op) if "sharding_cache_key" in checks else None
        if key is not None:
            keys.append(
                {"handle": py.op_handle(op), "first": key.first, "keywords": literal(key.keywords)}
            )
    return {
        "checks": sorted(checks),
        "installs": bool(transforms or versions),
        "transforms": transforms,
        "modules": sorted({t["module"] for t in transforms}),
        "uses_lists": any(
            list_positions(op) or any(r.family == "Tensor[]" for r in op.returns)
            for op in ops
            if "raw_handle_transforms" in checks and decisions(op).has_function
        ),
        "versions": versions,
        "cache_keys": keys,
    }
