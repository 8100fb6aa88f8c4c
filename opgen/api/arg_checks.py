"""The argument checks every generated op runs before its kernel: Note [Argument checks].

Note [Argument checks]
A kernel relies on what its schema cannot say: every tensor present (a raw
`torch.ops` call passes None to a `Tensor` argument as an undefined tensor),
every tensor on the device its kernel was dispatched for, and a written
tensor that neither has an expanded (stride-0) dimension nor partially
overlaps another argument. Broken, these give a crash, an error from deep in
torch that names neither the op nor the argument, or a silent wrong result, so
the generated code checks them where every call passes, before the kernel:
- C++ ops: a checking function in registration_<device>.cpp wraps each
  kernel (`cpp_boundary_checks`), so raw `torch.ops` calls are checked too,
  at the cost of a few tensor queries (no Python);
- the fake kernel, which also runs as the op's Meta kernel: a call that
  mixes a meta tensor with others dispatches there (`python_arg_checks`);
- Python ops: the registered kernel runs the same checks and the spec's
  `[fake] checks` before the user's kernel, so eager refuses what the fake
  kernel refuses.
A full alias (the same view written and read) is left to the kernel, as ATen's
`assert_no_partial_overlap` leaves it; non-contiguous views that interleave
are not compared (ATen calls that "too hard" and does the same).
"""

from __future__ import annotations

from typing import Any

from ..spec.model import Arg, OpSpec
from . import cpp
from .layout import wrapped
from .literals import literal
from .names import Namer, cpp_parameter_names

__all__ = ["python_arg_checks", "python_kernel_checks", "cpp_boundary_checks", "op_variable"]

_SINGLE = ("Tensor", "Tensor?")
_ONE_DEVICE = " pass every tensor argument on one device"
_LISTS = ("Tensor[]", "Tensor?[]", "Tensor[]?")


def _tensors(op: OpSpec) -> list[Arg]:
    return [a for a in op.args if a.family in _SINGLE or a.family in _LISTS]


def _statement(torch: str, code: str, message: str) -> dict[str, Any]:
    return {
        "expression": code,
        "lines": wrapped(f"{torch}._check(", [code, f"lambda: {message}"], ")", "    "),
        # the same call inside the `if` of a Python op's registered kernel
        "bridge_lines": wrapped(f"{torch}._check(", [code, f"lambda: {message}"], ")", "        "),
    }


def python_arg_checks(op: OpSpec, torch: str) -> list[dict[str, Any]]:
    """`torch._check` statements: required tensors are not None, all tensors on one device."""
    q = op.qualname
    checks = []
    for arg in op.args:
        if arg.family == "Tensor":
            message = literal(f"{q}: argument '{arg.name}' is None; pass a tensor")
            checks.append(_statement(torch, f"{arg.name} is not None", message))
    required = [a for a in op.args if a.family == "Tensor"]
    if not required:
        return checks
    first = required[0].name
    for arg in _tensors(op):
        if arg.name == first:
            continue
        name = arg.name
        if arg.family in _SINGLE:
            same = f"{name}.device == {first}.device"
            code = same if arg.family == "Tensor" else f"{name} is None or {same}"
            where = f"is on {{{name}.device}}"
        else:
            code = f"all(t is None or t.device == {first}.device for t in {name} or ())"
            where = "has a tensor on another device"
        parts = [
            "f" + literal(f"{q}: argument '{name}' {where}"),
            "f" + literal(f" but '{first}' is on {{{first}.device}};"),
            literal(_ONE_DEVICE),
        ]
        checks.append(_parenthesized(torch, code, parts))
    return checks


def python_kernel_checks(op: OpSpec, torch: str) -> list[dict[str, Any]]:
    """What a Python op's registered kernel checks beyond the fake kernel's: a written tensor
    has no expanded (stride-0) dimension, and two written tensors are not the same."""
    q = op.qualname
    checks = []
    written = [a for a in op.args if a.mutated and a.family in _SINGLE]
    for arg in written:
        name = arg.name
        code = f"all(s or n <= 1 for s, n in zip({name}.stride(), {name}.shape))"
        if arg.family == "Tensor?":
            code = f"{name} is None or {code}"
        parts = [
            f"{q}: argument '{name}' is written",
            " but has an expanded (stride-0) dimension;",
            " pass a tensor that owns its elements (e.g. .clone())",
        ]
        checks.append(_parenthesized(torch, code, [literal(p) for p in parts]))
    for i, arg in enumerate(written):
        for other in written[i + 1 :]:
            code = f"{arg.name} is not {other.name}"
            parts = [
                f"{q}: arguments '{arg.name}' and '{other.name}' are the same tensor,",
                " and the kernel writes both; pass two tensors",
            ]
            checks.append(_parenthesized(torch, code, [literal(p) for p in parts]))
    return checks


def _parenthesized(torch: str, code: str, parts: list[str]) -> dict[str, Any]:
    """`torch._check(code, lambda: (parts))`, one string a line: black keeps this layout, and
    no line passes 100 columns however long the op's name."""
    lines = [f"{torch}._check(", f"    {code},", "    lambda: ("]
    lines += [f"        {part}" for part in parts] + ["    ),", ")"]
    return {"expression": code, "lines": lines, "bridge_lines": lines}


def op_variable(op: OpSpec) -> str:
    """The C++ name of the checking function's `op` (the op's name), unlike every parameter's."""
    return Namer(set(cpp_parameter_names(op).values()))("op")


def cpp_boundary_checks(op: OpSpec, device: str) -> list[str]:
    """The body lines of the checking function that wraps `op`'s kernel for `device` (C++)."""
    target = op.cpp_target
    p = cpp_parameter_names(op)
    on = "is_cpu" if device == "cpu" else "is_cuda"
    q = cpp.cpp_string(op.qualname)
    op_, t = op_variable(op), Namer(set(p.values()) | {op_variable(op)})("t")
    lines = [f"constexpr const char* {op_} = {q};"]
    singles = [a for a in op.args if a.family in _SINGLE]
    for arg in op.args:
        name, label = p[arg.name], cpp.cpp_string(arg.name)
        if arg.family == "Tensor":
            lines.append(f"opgen_checks::present({name}.defined(), {op_}, {label});")
            lines.append(f"opgen_checks::on_device({name}.{on}(), {op_}, {label});")
        elif arg.family == "Tensor?":
            lines.append(f"if ({name}.has_value()) {{")
            lines.append(f"  opgen_checks::present({name}->defined(), {op_}, {label});")
            lines.append(f"  opgen_checks::on_device({name}->{on}(), {op_}, {label});")
            lines.append("}")
        elif arg.family == "Tensor[]":
            lines.append(f"for (const auto& {t} : {name}) {{")
            lines.append(f"  opgen_checks::present({t}.defined(), {op_}, {label});")
            lines.append(f"  opgen_checks::on_device({t}.{on}(), {op_}, {label});")
            lines.append("}")
    required = [a for a in op.args if a.family == "Tensor"]
    if device == "cuda" and required:
        first = required[0]
        index = "get_device_index()" if target == "stable" else "device().index()"
        for arg in singles:
            if arg is first:
                continue
            value = f"{p[arg.name]}->" if arg.family == "Tensor?" else f"{p[arg.name]}."
            same = f"{value}{index} == {p[first.name]}.{index}"
            if arg.family == "Tensor?":
                same = f"!{p[arg.name]}.has_value() || {same}"
            lines.append(
                f"opgen_checks::same_device({same}, {op_}, {cpp.cpp_string(arg.name)}, "
                f"{cpp.cpp_string(first.name)});"
            )
    lines += _overlap_checks(op, p, op_)
    return lines


def _overlap_checks(op: OpSpec, p: dict[str, str], op_: str) -> list[str]:
    """A written tensor has no expanded dimension and overlaps no other argument partially."""
    lines: list[str] = []
    singles = [a for a in op.args if a.family in _SINGLE]
    written = [a for a in singles if a.mutated]
    for w in written:
        call = f"opgen_checks::not_expanded({_value(w, p)}, {op_}, {cpp.cpp_string(w.name)});"
        lines.append(_when((w,), p, call))
    seen: set[frozenset[str]] = set()
    for w in written:
        for other in singles:
            pair = frozenset((w.name, other.name))
            if other is w or pair in seen:
                continue
            seen.add(pair)
            # two written tensors may not even be the same view: the kernel writes both
            check = "no_overlap" if other.mutated else "no_partial_overlap"
            call = (
                f"opgen_checks::{check}({_value(w, p)}, {_value(other, p)}, {op_}, "
                f"{cpp.cpp_string(w.name)}, {cpp.cpp_string(other.name)});"
            )
            lines.append(_when((w, other), p, call))
    return lines


def _value(arg: Arg, p: dict[str, str]) -> str:
    return f"*{p[arg.name]}" if arg.family == "Tensor?" else p[arg.name]


def _when(args: tuple[Arg, ...], p: dict[str, str], call: str) -> str:
    """`call`, run only when the optional tensors among `args` are present."""
    optional = [f"{p[a.name]}.has_value()" for a in args if a.family == "Tensor?"]
    return f"if ({' && '.join(optional)}) {call}" if optional else call
