"""Format generated Python with black, once, just before writing; only where it changes something.

Note [Black-stable output] in api/pyexpr.py: the built-in templates write
what black would, so their output is written as it is unless a line runs
past 100 columns (`is_black_stable`). Everything else (template overrides,
long lines) goes through black, many files at once in a process pool
(`format_many`).
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import Diagnostic, OpgenError

__all__ = ["format_python", "format_many", "is_black_stable", "FormatJob", "LINE_LENGTH"]

LINE_LENGTH = 100
# Below this many files a pool costs more than it saves: starting two forked
# workers takes ~20 ms, and black formats an opgen file in 30-60 ms
# (bench/format_pool.py measures it). A pool helps only with idle cores.
POOL_MIN_FILES = 4

_MODE = None


@dataclass(frozen=True)
class FormatJob:
    """One file for black: its text, the template that made it and its path (for error messages)."""

    text: str
    template: str
    path: str


def is_black_stable(text: str) -> bool:
    """Whether black could only break lines of `text`: it has none over 100 columns (but comments).

    Callers use it for output of the built-in templates only, which write
    black's layout for everything else (a test checks this over every
    template case, the reference set and random expressions). Wide
    characters count two columns, as black counts them.
    """
    for line in text.splitlines():
        if len(line) > LINE_LENGTH or (not line.isascii() and _width(line) > LINE_LENGTH):
            if not line.lstrip().startswith("#"):  # black leaves a long comment as it is
                return False
    return True


def _width(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def format_python(text: str, template: str, path: str) -> str:
    """`text` formatted by black (line length 100); invalid Python is a template bug, reported as one."""
    global _MODE
    import black

    if _MODE is None:
        _MODE = black.Mode(line_length=LINE_LENGTH)
    try:
        return black.format_str(text, mode=_MODE)
    except black.parsing.InvalidInput as exc:
        raise OpgenError(
            Diagnostic(
                None,
                None,
                f"template {template} produced invalid Python for {path}: {exc}",
                "this is a template bug: check the template (or your override of it)",
            )
        ) from None


def _format_job(job: FormatJob) -> str | list[Diagnostic]:
    try:
        return format_python(job.text, job.template, job.path)
    except OpgenError as exc:  # the diagnostics travel back; the exception would not pickle
        return exc.diagnostics


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def format_many(jobs: Sequence[FormatJob], pool: bool | None = None) -> list[str]:
    """Each job's text formatted, in order: in a pool of forked workers when there are enough
    files and idle cores (`pool` forces the choice, for bench/format_pool.py)."""
    if not jobs:
        return []
    cores = _cores()
    workers = min(cores, len(jobs))
    if pool is None:
        busy = os.getloadavg()[0] >= cores  # no idle core: more workers only take turns
        pool = len(jobs) >= POOL_MIN_FILES and not busy
    if workers < 2 or not pool or sys.platform != "linux":
        results = [_format_job(job) for job in jobs]
    else:
        # imported here: ~20 ms that a run with nothing to format (the usual one) never needs
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        import black  # noqa: F401  (imported once here, inherited by the forked workers)

        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as executor:
            chunk = max(1, len(jobs) // (4 * workers))
            results = list(executor.map(_format_job, jobs, chunksize=chunk))
    problems = [d for r in results if isinstance(r, list) for d in r]
    if problems:
        raise OpgenError(list(dict.fromkeys(problems)))
    return [r for r in results if isinstance(r, str)]
