"""`opgen bench`: time the generated ops against their baselines (reference, compiled, native, original)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._support import err, fail, project_root

if TYPE_CHECKING:
    from ..bench.report import Result

_MIN_TIME = 0.2
_QUICK_MIN_TIME = 0.01


def register(app: typer.Typer) -> None:
    app.command()(bench)


def bench(
    ops: Annotated[
        list[str] | None,
        typer.Argument(show_default=False, metavar="OP", hidden=True),
    ] = None,
    overhead: Annotated[
        bool,
        typer.Option(
            "--overhead", help="Time 1-element calls: per-call overhead of each registration."
        ),
    ] = False,
    quick: Annotated[
        bool, typer.Option("--quick", help="Smallest size only, short runs (a smoke test).")
    ] = False,
    json_file: Annotated[
        Path | None,
        typer.Option("--json", help="Write every measurement to this JSON file.", metavar="FILE"),
    ] = None,
    plot_file: Annotated[
        Path | None,
        typer.Option("--plot", help="Write a PNG plot (needs matplotlib).", metavar="FILE"),
    ] = None,
    metric: Annotated[
        str,
        typer.Option("--metric", help="Plot throughput or time.", metavar="throughput|time"),
    ] = "throughput",
    stat: Annotated[
        str,
        typer.Option(
            "--stat",
            help="median (of timing blocks) or min (the least disturbed block: for a busy machine).",
            metavar="median|min",
        ),
    ] = "median",
    device: Annotated[
        str, typer.Option("--device", help="cpu or cuda.", metavar="cpu|cuda")
    ] = "cpu",
    min_time: Annotated[
        float | None,
        typer.Option(
            "--min-time",
            help=f"Seconds of timing per measurement (default {_MIN_TIME}, --quick {_QUICK_MIN_TIME}).",
            metavar="SECONDS",
        ),
    ] = None,
    threads: Annotated[
        int | None,
        typer.Option(
            "--threads",
            help="torch threads (default: the cores this process may use).",
            metavar="N",
        ),
    ] = None,
    clock: Annotated[
        str,
        typer.Option(
            "--clock",
            help="wall (time waited) or cpu (the process's CPU time, with --threads 1: for a shared machine).",
            metavar="wall|cpu",
        ),
    ] = "wall",
    no_compile: Annotated[
        bool,
        typer.Option(
            "--no-compile",
            help="Leave out the torch.compile of each reference (it compiles first).",
        ),
    ] = False,
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="No progress bar on stderr.")
    ] = False,
    dtype: Annotated[
        list[str] | None,
        typer.Option(
            "--dtype",
            help="Time only this dtype of each op's [bench] dtypes (repeat for several).",
            metavar="DTYPE",
        ),
    ] = None,
) -> None:
    """Benchmark the ops named (default: all) against their baselines: the spec's reference,
    torch.compile of it, PyTorch's native op and the original library's op. At each size
    opgen's results are first compared with the reference's (else the native op's); where they
    differ the row shows no ratio and the command exits 1.

    What each op is timed on is its spec's [bench] table (docs/performance.md).
    """
    from ..bench.host import host
    from ..bench.report import differing
    from ..bench.run import BenchOptions, meta, run_bench, run_overhead, select_ops
    from ..bench.timing import machine_cores, set_threads
    from ..errors import OpgenError
    from ..project.load import load_project
    from ._tool_caches import CACHE_DIR, confine_caches

    _check_options(device, metric, stat, clock, threads, overhead)
    wanted = _wanted_dtypes(dtype, overhead)
    root = project_root()
    try:
        project = load_project(root)
        confine_caches(root)
    except OpgenError as exc:
        raise fail(exc, root) from None
    selected, unknown = select_ops(project, list(ops or []))
    if unknown:
        err(
            f"error: unknown op(s): {', '.join(unknown)}\n  hint: ops: {', '.join(op.name for op in project.ops)}"
        )
        raise typer.Exit(1)
    _check_device(device, overhead)
    count = set_threads(threads)
    options = BenchOptions(
        device,
        quick,
        min_time or (_QUICK_MIN_TIME if quick else _MIN_TIME),
        count,
        not no_progress,
        dtypes=wanted,
        compile=not (no_compile or overhead),
        clock=clock,
    )
    machine = host()
    typer.echo(machine.line())
    typer.echo(
        f"threads: {count} (torch.set_num_threads; {machine_cores()} cores available), device: {device}"
    )
    try:
        with _inductor_cache(root / CACHE_DIR / "inductor-bench"):
            run = (run_overhead if overhead else run_bench)(project, selected, options)
    except ImportError as exc:
        err(f"error: cannot import {project.config.package}: {exc}")
        raise typer.Exit(1) from None
    _print(run.results, overhead, stat, quick, clock)
    for note in run.skipped:
        err(f"skipped {note}")
    wrong = differing(run.results)
    for message in wrong:
        err(f"error: {message}")
    _write(
        run.results,
        {**meta(options, "overhead" if overhead else "bench"), **machine.as_dict()},
        json_file,
        plot_file,
        metric,
        overhead,
    )
    if wrong or not run.results:
        raise typer.Exit(1)


def _check_options(
    device: str, metric: str, stat: str, clock: str, threads: int | None, overhead: bool
) -> None:
    """Exit 2 on an option value bench does not know, or on --clock cpu where it would mislead."""
    if (
        device not in ("cpu", "cuda")
        or metric not in ("throughput", "time")
        or stat not in ("median", "min")
        or clock not in ("wall", "cpu")
    ):
        err(
            "error: --device is cpu or cuda; --metric is throughput or time; --stat is median or min;"
            " --clock is wall or cpu"
        )
        raise typer.Exit(2)
    if clock == "cpu" and (threads != 1 or device != "cpu" or overhead):
        err(
            "error: --clock cpu times one CPU thread: add --threads 1 (with several threads it would"
            " count threads spinning at a barrier; on CUDA the work is not the process's CPU time;"
            " --overhead times by the wall clock)"
        )
        raise typer.Exit(2)


def _wanted_dtypes(dtype: list[str] | None, overhead: bool) -> tuple[str, ...]:
    """The dtypes --dtype names (repeated or comma-separated), each once; exit 2 on an unknown one."""
    from ..spec.types import DTYPES

    wanted = tuple(dict.fromkeys(d.strip() for item in dtype or [] for d in item.split(",")))
    unknown_dtypes = [d for d in wanted if d not in DTYPES]
    if unknown_dtypes:
        err(f"error: --dtype {unknown_dtypes[0]} is no dtype\n  hint: one of {', '.join(DTYPES)}")
        raise typer.Exit(2)
    if wanted and overhead:
        err("error: --overhead times 1-element float32 calls; drop --dtype")
        raise typer.Exit(2)
    return wanted


def _check_device(device: str, overhead: bool) -> None:
    """Exit 0 (skipped) on --device cuda without CUDA; exit 2 on --overhead off the CPU."""
    if device != "cuda" and not overhead:
        return
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        err(
            "skipped: CUDA is not available (this torch or machine has no GPU); run with --device cpu"
        )
        raise typer.Exit(0)
    if overhead and device != "cpu":
        err("error: --overhead times CPU calls; drop --device")
        raise typer.Exit(2)


@contextmanager
def _inductor_cache(folder: Path) -> Iterator[None]:
    """Inductor's compile cache where opgen test puts it (the project's .opgen/cache/), unless
    the environment names one other than torch's default (opgen.testing.use_inductor_cache_dir);
    for this command only, so that a later command in the same
    process (another project) does not inherit it."""
    from ..testing._cache import torch_default_cache_dir

    previous = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if previous is not None and os.path.abspath(previous) != torch_default_cache_dir():
        yield
        return
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous


def _print(
    results: list[Result], overhead: bool, stat: str, quick: bool = False, clock: str = "wall"
) -> None:
    from ..bench.report import noisy_warnings, op_table, overhead_line, overhead_table, stat_note

    note = stat_note(stat, rounds=1 if quick and not overhead else 3)
    if clock == "cpu":
        note = "CPU time of the process (--clock cpu), not time waited; " + note
    for warning in noisy_warnings(results):
        err(f"warning: {warning}")
    if overhead:
        typer.echo(f"1-element float32 calls, no input requires grad; {note}\n")
        typer.echo(overhead_table(results, stat))
        return
    typer.echo(f"every implementation allocates its outputs; {note}\n")
    typer.echo(
        "baselines: reference (the spec's), compiled (torch.compile of the reference), native "
        "(PyTorch's op), original (the original library's op); vs best = time(fastest baseline) / "
        "time(opgen)\n"
    )
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.op, r.mode), []).append(r)
    for group in groups.values():
        line = overhead_line(group, stat)
        typer.echo(op_table(group, stat) + ("\n\n" + line if line else "") + "\n")


def _write(
    results: list[Result],
    info: dict[str, Any],
    json_file: Path | None,
    plot_file: Path | None,
    metric: str,
    overhead: bool,
) -> None:
    from ..bench.report import to_json

    if json_file is not None:
        json_file.write_text(to_json(results, info) + "\n", encoding="utf-8")
        typer.echo(f"wrote {json_file}")
    if plot_file is not None:
        if overhead:
            err("note: --plot draws size sweeps; nothing to plot with --overhead")
            return
        from ..bench.plot import MissingMatplotlib, plot

        try:
            plot(results, plot_file, metric)
        except MissingMatplotlib as exc:
            err(f"error: {exc}")
            raise typer.Exit(1) from None
        typer.echo(f"wrote {plot_file}")
