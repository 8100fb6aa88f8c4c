"""Time statements with torch.utils.benchmark, with a progress display on stderr."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CLOCKS",
    "Timing",
    "time_stmt",
    "time_interleaved",
    "set_threads",
    "machine_cores",
    "progress",
]

# Note [Bench clocks]
# "wall" (default) times what a user waits for. On a shared machine another
# process holding a core stretches every wall-clock figure, and a parallel
# region waits for its slowest thread: at a load average of 7 on 2 cores no
# timing block of a 2-thread op runs undisturbed. "cpu" times the process's CPU
# time instead, which leaves out the time the op was not running; with one
# thread (it requires --threads 1) that is the op's own time. With several
# threads it would also count threads spinning at a barrier, so it is refused.
CLOCKS = ("wall", "cpu")


@dataclass(frozen=True)
class Timing:
    median: float  # seconds per call: the median block of the least disturbed round
    best: float  # the fastest block, per call: the least disturbed on a shared machine
    iqr: float  # interquartile range of that round's blocks, per call
    runs: int  # measurement blocks
    calls: int  # calls in all blocks
    rounds: tuple[float, ...] = ()  # the median of each round (time_interleaved)

    @property
    def disagreement(self) -> float:
        """How far the runs disagree: the larger of IQR / median and slowest / fastest round - 1."""
        spread = self.iqr / self.median if self.median > 0 else 0.0
        if len(self.rounds) > 1 and min(self.rounds) > 0:
            spread = max(spread, max(self.rounds) / min(self.rounds) - 1)
        return spread


def machine_cores() -> int:
    """Cores this process may run on (the affinity mask, not the whole machine)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def set_threads(threads: int | None = None) -> int:
    import torch

    threads = threads or machine_cores()
    torch.set_num_threads(threads)
    return threads


def _clock(name: str) -> Any:
    import time

    from torch.utils.benchmark.utils.timer import timer as wall

    return time.process_time if name == "cpu" else wall


def time_stmt(
    stmt: str, scope: dict[str, Any], min_run_time: float, threads: int, clock: str = "wall"
) -> Timing:
    """Median time per call of `stmt`, after one warm-up call (allocator, page faults, caches)."""
    from torch.utils.benchmark import Timer

    timer = Timer(stmt, globals=scope, num_threads=threads, timer=_clock(clock))
    timer.timeit(1)
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return Timing(m.median, min(m.times), m.iqr, len(m.times), int(m.number_per_run * len(m.times)))


def time_interleaved(
    stmts: dict[str, str],
    scope: dict[str, Any],
    min_run_time: float,
    threads: int,
    rounds: int = 3,
    clock: str = "wall",
) -> dict[str, Timing]:
    """Time each statement `rounds` times, taking turns, and keep each one's best median.

    On a shared machine another process can take a core for milliseconds; taking
    turns exposes every statement to the same disturbances, and the best round is
    the one least disturbed (what `timeit` recommends for short statements).
    """
    rounds_of: dict[str, list[Timing]] = {name: [] for name in stmts}
    for _ in range(rounds):
        for name, stmt in stmts.items():
            rounds_of[name].append(time_stmt(stmt, scope, min_run_time / rounds, threads, clock))
    best: dict[str, Timing] = {}
    for name, timings in rounds_of.items():
        kept = min(timings, key=lambda t: t.median)
        best[name] = Timing(
            kept.median,
            min(t.best for t in timings),
            kept.iqr,
            kept.runs,
            kept.calls,
            tuple(t.median for t in timings),
        )
    return best


class _Null:
    def advance(self, description: str) -> None:
        pass

    def describe(self, description: str) -> None:
        pass


@contextmanager
def progress(total: int, enabled: bool = True) -> Iterator[Any]:
    """A transient rich progress bar on stderr; `advance(text)` after each step."""
    if not enabled:
        yield _Null()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("bench", total=total)

        class _Bar:
            def advance(self, description: str) -> None:
                bar.update(task, advance=1, description=description)

            def describe(self, description: str) -> None:
                bar.update(task, description=description)

        yield _Bar()
