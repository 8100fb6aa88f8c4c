"""`opgen bench --overhead`: the per-call cost of 1-element calls.

Two parts: the project's ops (the generated wrapper, the raw `torch.ops`
handle and the native op, each on 1-element inputs), and baselines for every
registration opgen can generate, built here on a 1-element add so that all
are compared with the same `torch.add` in the same run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..runtime.autograd import needs_function
from ..spec.backends import backend_of
from ..spec.model import OpSpec
from .cases import HANDLE, OPGEN, CaseError, build_case, overhead_baseline
from .report import Result
from .timing import time_interleaved

__all__ = ["baseline_calls", "op_calls", "kind_of"]

_NS = "opgen_bench"
_baselines: dict[str, Callable[..., Any]] | None = None


def _typed_wrapper(handle: Any, function: Any) -> Callable[..., Any]:
    """The typed wrapper opgen generates for an op with formulas (api/transforms.py)."""

    def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if needs_function(a, b):
            return function.apply(a, b)
        return handle(a, b)

    return add


def _define() -> dict[str, Callable[..., Any]]:
    """Register the baseline ops once per process (torch.library cannot unregister cleanly)."""
    lib = torch.library.Library(_NS, "FRAGMENT")
    kernel = lambda a, b: torch.add(a, b)  # noqa: E731
    backward = lambda ctx, grad: (grad, grad)  # noqa: E731
    setup = lambda ctx, inputs, output: None  # noqa: E731
    for name, autograd in (("lib_add", False), ("lib_add_grad", True)):
        lib.define(f"{name}(Tensor a, Tensor b) -> Tensor")
        lib.impl(name, kernel, "CPU")
        if autograd:
            torch.library.register_autograd(
                f"{_NS}::{name}", backward, setup_context=setup, lib=lib
            )
    for name, autograd in (("custom_add", False), ("custom_add_grad", True)):
        op = torch.library.custom_op(
            f"{_NS}::{name}",
            mutates_args=(),
            device_types="cpu",
            schema="(Tensor a, Tensor b) -> Tensor",
        )(kernel)
        if autograd:
            op.register_autograd(backward, setup_context=setup)

    class _Add(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.add(a, b)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return grad, grad

    ops = torch.ops.opgen_bench
    _define.lib = lib  # type: ignore[attr-defined]  # keep the registrations alive
    return {
        "lib": ops.lib_add.default,
        "lib_grad": ops.lib_add_grad.default,
        "lib_grad_wrapped": _typed_wrapper(ops.lib_add_grad.default, _Add),
        "custom": ops.custom_add.default,
        "custom_grad": ops.custom_add_grad.default,
        "custom_grad_wrapped": _typed_wrapper(ops.custom_add_grad.default, _Add),
        "function": _Add.apply,
    }


_BASELINES = (  # (name in globals, registration, how it is called)
    ("torch.add", "native", "torch.add(a, b)"),
    ("lib", "python library", "torch.ops handle"),
    ("lib_grad", "python library + register_autograd", "torch.ops handle"),
    ("lib_grad_wrapped", "python library + register_autograd", "opgen's typed wrapper"),
    ("custom", "python custom_op", "torch.ops handle"),
    ("custom_grad", "python custom_op + register_autograd", "torch.ops handle"),
    ("custom_grad_wrapped", "python custom_op + register_autograd", "opgen's typed wrapper"),
    ("function", "autograd.Function", "Function.apply"),
)


def baseline_calls(min_run_time: float, threads: int, bar: Any) -> list[Result]:
    """1-element adds through each registration opgen offers, beside torch.add."""
    global _baselines
    if _baselines is None:
        _baselines = _define()
    scope: dict[str, Any] = {"torch": torch, **_baselines, "a": torch.randn(1), "b": torch.randn(1)}
    stmts = {
        name: "torch.add(a, b)" if name == "torch.add" else f"{name}(a, b)"
        for name, _, _ in _BASELINES
    }
    bar.describe("overhead: baselines")
    timings = time_interleaved(stmts, scope, min_run_time * len(stmts) / 2, threads)
    bar.advance("overhead: baselines")
    return [
        Result(
            "add (baseline)",
            call,
            "1",
            timings[name].median,
            best=timings[name].best,
            iqr=timings[name].iqr,
            kind=kind,
            runs=timings[name].runs,
            disagreement=timings[name].disagreement,
        )
        for name, kind, call in _BASELINES
    ]


def kind_of(op: OpSpec) -> str:
    traits = backend_of(op)
    if traits.chooses_registration:
        base = f"{op.backend} {op.registration}"
    elif traits.compiles_cpp:
        base = f"{op.backend} {op.cpp_target}"
    else:
        base = str(op.backend)
    return base + (" + autograd" if op.grads else "")


def op_calls(
    op: OpSpec, fn: Any, namespace: dict[str, Any], min_run_time: float, threads: int
) -> list[Result]:
    """The op's wrapper, its torch.ops handle and its native op (or reference) on 1-element
    inputs; with `[bench] backward`, the wrapper and the native op forward+backward too (what
    the op costs under autograd at any size beyond its kernels)."""
    variables = [k for k, _ in op.bench.sizes[0]] if op.bench.sizes else ["n"]
    ones = {k: 1 for k in variables}
    case = build_case(op, fn, namespace, ones, "cpu", backward=False)
    stmts = {i.name: i.stmt for i in case.impls}
    stmts[HANDLE] = stmts[OPGEN].replace("_op(", "_handle(", 1)
    case.globals["_handle"] = getattr(
        getattr(getattr(torch.ops, op.namespace), op.name), op.overload or "default"
    )
    base_name = overhead_baseline(stmts)
    if base_name is None:
        raise CaseError(
            f"{op.qualname}: give bench.native or test.reference to compare the call overhead with"
        )
    shown = stmts[base_name] if len(stmts[base_name]) <= 48 else stmts[base_name][:45] + "..."
    labels = {
        base_name: f"{base_name}: {shown}",
        OPGEN: "opgen wrapper",
        HANDLE: "torch.ops handle",
    }
    results = _timed(
        op, case.globals, stmts, [base_name, OPGEN, HANDLE], labels, min_run_time, threads
    )
    if op.bench.backward:
        both = build_case(op, fn, namespace, ones, "cpu", backward=True)
        stmts = {i.name: i.stmt for i in both.impls}
        labels = {name: f"{label}, forward+backward" for name, label in labels.items()}
        results += _timed(
            op, both.globals, stmts, [base_name, OPGEN], labels, min_run_time, threads
        )
    return results


def _timed(
    op: OpSpec,
    scope: dict[str, Any],
    stmts: dict[str, str],
    order: list[str],
    labels: dict[str, str],
    min_run_time: float,
    threads: int,
) -> list[Result]:
    """Rows of `order`'s statements timed in turns; the first is the native call of its group."""
    timings = time_interleaved({name: stmts[name] for name in order}, scope, min_run_time, threads)
    return [
        Result(
            op.name,
            labels[name],
            "1",
            t.median,
            best=t.best,
            iqr=t.iqr,
            kind=kind_of(op) if name != order[0] else "native",
            runs=t.runs,
            disagreement=t.disagreement,
        )
        for name, t in timings.items()
    ]
