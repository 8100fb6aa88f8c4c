"""Template variables of `backend = "triton"` ops (Note [Triton ops]).

Note [Triton ops]
A Triton op is registered by `torch.library.triton_op`, whose body calls the
user's launcher (`<package>/kernels/<op>.py`: a `@triton.jit` kernel and
`launch_<op>`, which launches it through `torch.library.wrap_triton`). torch.compile
traces into such a body and Inductor calls the kernel itself.

Triton's interpreter (`TRITON_INTERPRET=1`, read when `@triton.jit` decorates the
kernel) runs the kernel on CPU tensors, but not on fake ones: opcheck's fake-tensor
tests, torch.compile and export fail with "Cannot access data pointer of Tensor".
Under the interpreter the body therefore launches through an inner opaque op,
`<namespace>::_<op>_interpreted` (a custom_op with the spec's fake rule); without
it the body calls the launcher directly. The generated tests' conftest turns the
interpreter on when CUDA is absent, before the package is imported.

On CPU tensors without the interpreter, `[triton] cpu` decides: "error" (the
default) raises naming the op and what to do, "reference" runs the spec's
`[test] reference` expression (a PyTorch fallback).

The schema: triton_op infers it from the body's annotations (Note [Schemas of
Triton ops] in spec/registration.py says which schemas it reaches).
"""

from __future__ import annotations

from typing import Any

from ..spec.model import OpSpec, TensorSample
from . import python as py
from .layout import wrapped
from .literals import literal
from .pyexpr import expression

__all__ = ["triton_context", "launcher_name", "interpreted_name", "allowed_dtypes"]


def launcher_name(op: OpSpec) -> str:
    """The user's launcher function in `<package>/kernels/<op>.py`."""
    return f"launch_{op.module}"


def interpreted_name(op: OpSpec) -> str:
    """The inner opaque op the body launches through under Triton's interpreter."""
    return f"{op.namespace}::_{op.module}_interpreted"


def allowed_dtypes(op: OpSpec, name: str) -> tuple[str, ...]:
    """The dtypes a tensor argument may have: the spec's test dtypes, the gradient checks'
    dtype and any dtype a sample gives this argument."""
    wanted = [*op.test.dtypes]
    if op.grads or op.jvp.present:
        wanted.append(op.test.gradcheck_dtype)
    for sample in op.test.samples:
        for key, value in sample.values:
            items = value if isinstance(value, tuple) else (value,)
            for item in items:
                if key == name and isinstance(item, TensorSample) and item.dtype:
                    wanted.append(item.dtype)
    return tuple(dict.fromkeys(wanted))


def _check_lines(op: OpSpec) -> list[str]:
    """The body of the input checks: every tensor on the first tensor's device, in a dtype
    the spec declares. Lines relative to the function's indentation."""
    tensors = [a for a in op.args if a.family in ("Tensor", "Tensor?")]
    if not tensors:
        return ["pass"]
    first = tensors[0]
    lines: list[str] = []
    for arg in tensors:
        dtypes = allowed_dtypes(op, arg.name)
        optional = arg.family == "Tensor?"
        inner = "    " if optional else ""
        if optional:
            lines.append(f"if {arg.name} is not None:")
        allowed = (
            "(" + ", ".join(f"torch.{d}" for d in dtypes) + ("," if len(dtypes) == 1 else "") + ")"
        )
        lines += [
            f"{inner}if {arg.name}.dtype not in {allowed}:",
            f"{inner}    raise TypeError(",
            f'{inner}        f"{op.qualname}: {arg.name} has dtype {{{arg.name}.dtype}}; "',
            f'{inner}        "the Triton kernel takes {", ".join(dtypes)} (the spec\'s [test] dtypes)"',
            f"{inner}    )",
        ]
        if arg is not first:
            lines += [
                f"{inner}if {arg.name}.device != {first.name}.device:",
                f"{inner}    raise ValueError(",
                f'{inner}        f"{op.qualname}: {arg.name} is on {{{arg.name}.device}} "',
                f'{inner}        f"and {first.name} on {{{first.name}.device}}: pass tensors on one device"',
                f"{inner}    )",
            ]
    return lines


def _device_argument(op: OpSpec) -> str | None:
    tensors = [a for a in op.args if a.family == "Tensor"]
    return tensors[0].name if tensors else None


def _cpu_lines(op: OpSpec, path: str) -> list[str]:
    """What the body does with CPU tensors when the interpreter is off (`[triton] cpu`)."""
    if op.triton_cpu == "reference" and op.test.reference:
        value = expression(op.test.reference)
        if op.returns or not op.mutated:
            return [f"return {value}"]
        written = [a.name for a in op.mutated]
        if len(written) == 1:
            return [f"{written[0]}.copy_({value})", "return None"]
        return [
            f"for target, value in zip(({', '.join(written)},), {value}):",
            "    target.copy_(value)",
            "return None",
        ]
    parts = [
        f"{op.qualname} is a Triton op and got CPU tensors: Triton kernels run on CUDA. ",
        "Pass CUDA tensors, set TRITON_INTERPRET=1 before importing the package to run ",
        f'the kernel on CPU, or set [triton] cpu = "reference" in {path}',
    ]
    return ["raise RuntimeError(", *(f"    {literal(part)}" for part in parts), ")"]


def triton_context(op: OpSpec, path: str, names: dict[str, str]) -> dict[str, Any]:
    """The `op.triton` variables of the generated module and the launcher file."""
    launcher = launcher_name(op)
    body_def = py.def_lines(op, names["bridge"])
    launch_def = py.def_lines(op, names["launch"])
    device = _device_argument(op)
    return {
        "launcher": launcher,
        "interpreted": interpreted_name(op),
        "body_def": body_def,
        "launch_def": launch_def,
        "launcher_def": py.def_lines(op, launcher, kernel=True),
        "check_def": wrapped(
            f"def {names['check_inputs']}(",
            py.parameters(op, annotate=False),
            ") -> None:",
            "",
            is_def=True,
        ),
        "check_lines": _check_lines(op),
        "call": f"{names['check_inputs']}({py.call_arguments(op)})",
        "device_argument": device,
        "cpu_lines": _cpu_lines(op, path),
        "cpu_choice": op.triton_cpu,
        "needs_sequence": any("Sequence[" in py.annotation(a.type) for a in op.args),
    }
