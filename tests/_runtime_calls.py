"""Run calls of a built project's ops in child processes, so that a crash is counted, not fatal.

`fuzz` runs the seeded cases of `_runtime_fuzz.py` (two children at a time,
each a range of cases). A child that dies (a signal) or stops (faulthandler's
timeout in one case) is replaced by one that goes on after the case it was
in, and that case runs once more alone: its outcome is "crash" or "hang"
only if it dies again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

_CHILD = Path(__file__).with_name("_runtime_fuzz.py")
_CHILD_TIMEOUT_S = 900  # a backstop: faulthandler ends a child stuck in one case long before


def _child(root: Path, seed: int, start: int, stop: int) -> tuple[list[dict[str, Any]], int, str]:
    command = [sys.executable, str(_CHILD), str(root), str(seed), str(start), str(stop)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=_CHILD_TIMEOUT_S)
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    return lines, run.returncode, run.stderr


def _died(code: int, stderr: str) -> str:
    if "Timeout (" in stderr:
        return "hang"
    return f"crash (signal {-code})" if code < 0 else f"crash (exit code {code})"


def _range(root: Path, seed: int, start: int, stop: int) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    index = start
    while index < stop:
        lines, code, stderr = _child(root, seed, index, stop)
        finished = [line for line in lines if "outcome" in line]
        records += finished
        if code == 0 and len(finished) == stop - index:
            break
        started = [line["start"] for line in lines if "start" in line]
        if not started:  # the child died before its first case: nothing to count
            raise AssertionError(f"the fuzz child failed to start: {stderr[-3000:]}")
        in_flight = started[-1]
        again, code_again, stderr_again = _child(root, seed, in_flight, in_flight + 1)
        alone = [line for line in again if "outcome" in line]
        if code_again == 0 and alone:
            records += alone
        else:
            call = next((line for line in again if line.get("calling") == in_flight), {})
            fatal = [line for line in stderr_again.splitlines() if line.startswith("Fatal")]
            outcome = _died(code_again, stderr_again)
            records.append({**call, "i": in_flight, "outcome": outcome, "detail": fatal})
        index = in_flight + 1
    return records


def fuzz(root: Path, seed: int, calls: int, workers: int = 2) -> list[dict[str, Any]]:
    """The outcome of each of `calls` seeded cases, in case order."""
    bounds = [calls * k // workers for k in range(workers + 1)]
    with ThreadPoolExecutor(workers) as pool:
        parts = pool.map(lambda k: _range(root, seed, bounds[k], bounds[k + 1]), range(workers))
        records = [record for part in parts for record in part]
    return sorted(records, key=lambda r: r["i"])


def summary(records: list[dict[str, Any]]) -> str:
    """Counts of calls and outcomes, overall and per op, and the failures."""
    outcomes = Counter(r["outcome"] for r in records)
    lines = [f"{len(records)} calls: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))]
    per_op: dict[str, Counter[str]] = {}
    for r in records:
        per_op.setdefault(r.get("op", "?"), Counter())[r["outcome"]] += 1
    for op, counts in sorted(per_op.items()):
        lines.append(f"  {op}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for r in records:
        if r["outcome"] not in ("result", "error"):
            lines.append(f"  FAILED case {r['i']}: {r}")
    return "\n".join(lines)
