"""Run `opgen bench` on a project: pick ops, build cases, time them, collect results."""

from __future__ import annotations

import importlib
import platform
import sys
from dataclasses import dataclass, field
from typing import Any

from ..project.load import Project
from ..spec.model import OpSpec
from .cases import Case, CaseError, build_case, size_points
from .report import Result
from .timing import progress, time_interleaved

__all__ = [
    "BenchOptions",
    "BenchRun",
    "select_ops",
    "import_package",
    "run_bench",
    "run_overhead",
    "meta",
]


@dataclass(frozen=True)
class BenchOptions:
    device: str = "cpu"
    quick: bool = False
    min_run_time: float = 0.2
    threads: int = 1
    show_progress: bool = True
    dtypes: tuple[str, ...] = ()  # `--dtype`: only these of each op's [bench] dtypes; () all
    compile: bool = True  # time torch.compile of the reference too (Note [Bench baselines])
    clock: str = "wall"  # or "cpu": Note [Bench clocks]


@dataclass
class BenchRun:
    results: list[Result] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "op: why"


def select_ops(project: Project, names: list[str]) -> tuple[list[OpSpec], list[str]]:
    """The ops named (by op name or namespace::op), all when none; and the unknown names."""
    if not names:
        return list(project.ops), []
    by_name = {op.name: op for op in project.ops} | {op.qualname: op for op in project.ops}
    return [by_name[n] for n in names if n in by_name], [n for n in names if n not in by_name]


def import_package(project: Project) -> Any:
    """Import the project's package from its root (C++ ops load their built library)."""
    root = str(project.root)
    if root not in sys.path:
        sys.path.insert(0, root)
    return importlib.import_module(project.config.package)


def _namespace(package: Any, project: Project) -> dict[str, Any]:
    return {op.name: getattr(package, op.name) for op in project.ops if hasattr(package, op.name)}


def run_bench(project: Project, ops: list[OpSpec], options: BenchOptions) -> BenchRun:
    """Time every op at every size; skipped ops are reported, not fatal."""
    package = import_package(project)
    namespace = _namespace(package, project)
    if options.compile:
        _quiet_compile_logs()
    run = BenchRun()
    plans: list[tuple[OpSpec, dict[str, int], bool, str]] = []
    for op in ops:
        if options.device not in op.devices:
            run.skipped.append(
                f"{op.name}: no {options.device} kernel (devices = {list(op.devices)})"
            )
            continue
        dtypes = [d for d in op.bench.dtypes if not options.dtypes or d in options.dtypes]
        if not dtypes:
            run.skipped.append(
                f"{op.name}: benchmarked in {', '.join(op.bench.dtypes)} ([bench] dtypes), "
                f"not in {', '.join(options.dtypes)}"
            )
            continue
        modes = (False, True) if op.bench.backward else (False,)
        plans.extend(
            (op, size, backward, dtype)
            for backward in modes
            for dtype in dtypes
            for size in size_points(op, options.quick)
        )
    failed: set[tuple[str, bool, str]] = set()
    with progress(len(plans), options.show_progress) as bar:
        for op, size, backward, dtype in plans:
            bar.describe(f"{op.name} {size} {dtype}{' fwd+bwd' if backward else ''}")
            if (op.name, backward, dtype) not in failed:
                try:
                    case = build_case(
                        op,
                        namespace[op.name],
                        namespace,
                        size,
                        options.device,
                        backward,
                        dtype,
                        compiled=options.compile,
                    )
                except (CaseError, RuntimeError, TypeError, ValueError) as exc:
                    run.skipped.append(f"{op.name}: {exc}")
                    failed.add((op.name, backward, dtype))
                else:
                    run.skipped.extend(n for n in case.notes if n not in run.skipped)
                    _time_case(case, options, run)
                    if options.compile:
                        _forget_compiled()
            bar.advance(op.name)
    return run


def _time_case(case: Case, options: BenchOptions, run: BenchRun) -> None:
    stmts: dict[str, str] = {}
    for impl in case.impls:
        try:  # a failing reference must not end the whole run
            eval(impl.stmt, case.globals)
        except Exception as exc:
            why = (str(exc).strip().splitlines() or [""])[0]  # compile errors run to pages
            run.skipped.append(
                f"{case.op} {impl.name} at {case.size_label}: {type(exc).__name__}: {why}"
            )
        else:
            stmts[impl.name] = impl.stmt
    rounds = 1 if options.quick else 3
    timings = time_interleaved(
        stmts, case.globals, options.min_run_time, options.threads, rounds, options.clock
    )
    name = case.op.split("::", 1)[-1]
    for impl_name, t in timings.items():
        run.results.append(
            Result(
                name,
                impl_name,
                case.size_label,
                t.median,
                case.mode,
                t.best,
                case.numel,
                t.iqr,
                t.runs,
                case.bytes,
                case.flops,
                case.derived_bytes,
                disagreement=t.disagreement,
            )
        )


def _quiet_compile_logs() -> None:
    """Graph-break and recompile warnings of the compiled references would bury the tables."""
    import logging

    import torch

    torch._logging.set_logs(dynamo=logging.ERROR, inductor=logging.ERROR)


def _forget_compiled() -> None:
    """Drop the compiled graphs of the last case: each case compiles its own sizes, and a
    reference function compiled at many sizes would reach dynamo's recompile limit."""
    import torch

    torch._dynamo.reset()


def run_overhead(project: Project, ops: list[OpSpec], options: BenchOptions) -> BenchRun:
    from .overhead import baseline_calls, op_calls

    package = import_package(project)
    namespace = _namespace(package, project)
    run = BenchRun()
    with progress(len(ops) + 1, options.show_progress) as bar:
        run.results.extend(baseline_calls(options.min_run_time, options.threads, bar))
        for op in ops:
            bar.describe(f"overhead: {op.name}")
            if "cpu" not in op.devices:
                run.skipped.append(f"{op.name}: no cpu kernel")
                continue
            try:
                run.results.extend(
                    op_calls(
                        op, namespace[op.name], namespace, options.min_run_time, options.threads
                    )
                )
            except (CaseError, RuntimeError, TypeError, ValueError) as exc:
                run.skipped.append(f"{op.name}: {exc}")
            bar.advance(op.name)
    return run


def meta(options: BenchOptions, mode: str) -> dict[str, Any]:
    import torch

    return {
        "mode": mode,
        "torch": torch.__version__,
        "threads": options.threads,
        "device": options.device,
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "min_run_time": options.min_run_time,
        "clock": options.clock,
        "python": platform.python_version(),
    }
