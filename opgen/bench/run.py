"""Run `opgen bench` on a project: pick ops, build cases, time them, collect results."""

from __future__ import annotations

import importlib
import math
import platform
import sys
from dataclasses import dataclass, field
from typing import Any

from ..project.load import Project
from ..spec.model import OpSpec
from .agree import disagreement, oracle
from .cases import OPGEN, Case, CaseError, build_case, overhead_baseline, size_points
from .report import DIFFERS, OVERHEAD, Result
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
    plans: list[tuple[OpSpec, dict[str, int], bool, str, bool]] = []  # + at the smallest size
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
        sizes = size_points(op, options.quick)
        every = size_points(op, quick=False)
        # With one size, that size is the op's largest too: its target is the ratio.
        smallest = min(every, key=lambda s: math.prod(s.values())) if len(every) > 1 else None
        plans.extend(
            (op, size, backward, dtype, size == smallest)
            for backward in modes
            for dtype in dtypes
            for size in sizes
        )
    failed: set[tuple[str, bool, str]] = set()
    with progress(len(plans), options.show_progress) as bar:
        for op, size, backward, dtype, is_smallest in plans:
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
                    one_element = None
                    if is_smallest:
                        one_element = _one_element_calls(
                            op, namespace, case, options.device, backward, dtype, run
                        )
                    _time_case(case, options, run, one_element)
                    if options.compile:
                        _forget_compiled()
            bar.advance(op.name)
    return run


# Note [Overhead in the same run]
# The target for the smallest size is "no slower than the best baseline by more
# than the call overhead", the fixed cost of the wrapper against the native op on
# 1-element inputs. Timed in another run, the two figures come from moments at
# which the host may run at different speeds; at the smallest size of each op the
# 1-element calls of opgen and of its native op (the reference without one) are
# therefore timed in the same turns as that size's implementations, and the report
# sets the one gap against the other.
_ONE = "_one_element_"


def _one_element_calls(
    op: OpSpec,
    namespace: dict[str, Any],
    case: Case,
    device: str,
    backward: bool,
    dtype: str,
    run: BenchRun,
) -> str | None:
    """Put opgen's and the overhead baseline's 1-element calls into `case`'s globals, as
    `_one_element_opgen()` and `_one_element_<baseline>()`; the baseline's name, or None
    (with a note) when the op has neither a native op nor a reference or they cannot run."""
    try:
        ones = build_case(
            op, namespace[op.name], namespace, {k: 1 for k in case.size}, device, backward, dtype
        )
        stmts = {impl.name: impl.stmt for impl in ones.impls}
        base = overhead_baseline(stmts)
        if base is None:
            return None
        for name in (OPGEN, base):
            call = eval(f"lambda: {stmts[name]}", ones.globals)
            call()
            case.globals[_ONE + name] = call
    except Exception as exc:
        why = (str(exc).strip().splitlines() or [""])[0]
        note = (
            f"{case.op} call overhead ({case.mode}): 1-element inputs fail: "
            f"{type(exc).__name__}: {why}"
        )
        if note not in run.skipped:
            run.skipped.append(note)
        return None
    return base


def _time_case(
    case: Case, options: BenchOptions, run: BenchRun, one_element: str | None = None
) -> None:
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
    differs = _compare(case, stmts, run)
    ones = (OPGEN, one_element) if one_element and OPGEN in stmts else ()
    stmts.update({_ONE + name: f"{_ONE}{name}()" for name in ones})
    rounds = 1 if options.quick else 3
    timings = time_interleaved(
        stmts, case.globals, options.min_run_time, options.threads, rounds, options.clock
    )
    one_timings = {name: timings.pop(_ONE + name) for name in ones}
    name = case.op.split("::", 1)[-1]
    for impl_name, t in timings.items():
        extra: dict[str, Any] = {}
        if impl_name == OPGEN and differs:
            extra[DIFFERS] = differs
        if impl_name == OPGEN and one_timings:
            mine, theirs = one_timings[OPGEN], one_timings[str(one_element)]
            extra[OVERHEAD] = {
                "baseline": one_element,
                "opgen": [mine.median, mine.best],
                "base": [theirs.median, theirs.best],
            }
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
                extra=extra,
            )
        )


def _compare(case: Case, stmts: dict[str, str], run: BenchRun) -> str | None:
    """Why opgen's results differ from its oracle's at this case, or None (Note [The bench
    checks what it times]); a comparison that cannot run is a note, not a verdict."""
    try:
        return disagreement(case, stmts)
    except Exception as exc:
        why = (str(exc).strip().splitlines() or [""])[0]
        run.skipped.append(
            f"{case.op} at {case.size_label} ({case.mode}): results not compared with "
            f"{oracle(stmts)}: {type(exc).__name__}: {why}"
        )
        return None


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
