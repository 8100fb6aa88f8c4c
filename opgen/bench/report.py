"""Results of `opgen bench`: ratios, the Markdown tables it prints, and JSON.

The tables are Markdown so that what the command prints can be pasted into a
README unchanged. A ratio "vs X" is time(X) / time(opgen): above 1.00 the
generated op is faster than X. Each row names its best baseline, the fastest
of the other implementations (Note [Bench baselines] in cases.py), and the
ratio against it; the JSON keeps every implementation's figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "NOISY",
    "OVERHEAD",
    "DIFFERS",
    "differing",
    "overhead_line",
    "Result",
    "stat_note",
    "noisy_warnings",
    "seconds",
    "speedup",
    "best_baseline",
    "format_time",
    "format_rate",
    "throughput",
    "op_table",
    "overhead_table",
    "to_json",
    "from_json",
]


# Above this, a figure's timing blocks or rounds disagree too much to trust its digits.
NOISY = 0.2

# Result.extra key of opgen's row at an op's smallest size: the 1-element calls timed in the
# same turns (Note [Overhead in the same run] in run.py): {"baseline": name, "opgen": [median,
# best], "base": [median, best]}, seconds per call.
OVERHEAD = "call_overhead"

# Result.extra key of opgen's row where its results differ from its oracle's (Note [The bench
# checks what it times] in agree.py): what differs, in words. The row shows no ratio.
DIFFERS = "differs"


@dataclass(frozen=True)
class Result:
    op: str
    impl: str
    size: str  # label: "1000" or "n=4096,d=1024"
    median: float  # seconds per call
    mode: str = "forward"
    best: float = 0.0  # the fastest timing block, seconds per call
    numel: int = 0
    iqr: float = 0.0
    runs: int = 0
    bytes: float | None = None
    flops: float | None = None
    derived_bytes: bool = False
    kind: str = ""  # overhead mode: how the op is registered
    extra: dict[str, Any] = field(default_factory=dict)
    disagreement: float = 0.0  # Timing.disagreement: how far its timing blocks and rounds disagree

    @property
    def noisy(self) -> bool:
        return self.disagreement > NOISY


def seconds(r: Result, stat: str = "median") -> float:
    """The time a table shows: the median block, or the fastest ("min") when asked."""
    return r.best if stat == "min" and r.best > 0 else r.median


def speedup(results: Iterable[Result], base: str, other: str, stat: str = "median") -> float | None:
    """time(other) / time(base) for one op and size, or None when one is missing."""
    times = {r.impl: seconds(r, stat) for r in results}
    if base not in times or other not in times or times[base] <= 0:
        return None
    return times[other] / times[base]


def best_baseline(results: Iterable[Result], stat: str = "median") -> Result | None:
    """The fastest implementation other than the generated op, or None when there is none."""
    others = [r for r in results if r.impl != "opgen" and seconds(r, stat) > 0]
    return min(others, key=lambda r: seconds(r, stat), default=None)


def throughput(r: Result, stat: str = "median") -> tuple[float, str] | None:
    t = seconds(r, stat)
    if t <= 0:
        return None
    if r.flops:
        return r.flops / t / 1e9, "GFLOP/s"
    if r.bytes:
        return r.bytes / t / 1e9, "GB/s"
    return None


def format_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_rate(r: Result, stat: str = "median") -> str:
    rate = throughput(r, stat)
    return f"{rate[0]:.1f}" if rate else "–"


def _ratio(value: float | None, noisy: bool = False) -> str:
    return "–" if value is None else f"{value:.2f}×" + ("*" if noisy else "")


def _cell(r: Result, stat: str) -> str:
    """A figure and its spread: `2.5 µs (IQR 4%)`, or with --stat min `2.4 µs (median +4%)`; `*`: noisy."""
    shown = seconds(r, stat)
    if stat == "min" and r.best > 0:
        spread = f"median +{r.median / r.best - 1:.0%}"
    else:
        spread = f"IQR {r.iqr / r.median:.0%}" if r.median > 0 else "IQR –"
    return f"{format_time(shown)} ({spread})" + ("*" if r.noisy else "")


def stat_note(stat: str, rounds: int = 3) -> str:
    """Which statistic the tables show, and what the spread beside each figure is."""
    of = "the median timing block" + (
        f" of the least disturbed of {rounds} rounds" if rounds > 1 else ""
    )
    figure = (
        "the fastest timing block; (median +x%): how much slower the median block was"
        if stat == "min"
        else f"{of}; (IQR x%): the interquartile range of its blocks, as % of the median"
    )
    return f"time per call: {figure}; * marks figures whose blocks or rounds disagree by more than {NOISY:.0%}"


def noisy_warnings(results: Iterable[Result]) -> list[str]:
    """One warning per figure whose timing blocks or rounds disagree by more than NOISY."""
    return [
        f"{r.op} {r.impl} at {r.size} ({r.mode}): timing blocks and rounds disagree by {r.disagreement:.0%}; "
        "the machine is busy: use --stat min or re-run on a quiet machine before trusting the ratios"
        for r in results
        if r.noisy
    ]


def differing(results: list[Result]) -> list[str]:
    """An error per case whose opgen results differ from its oracle's, saying what to do."""
    return [
        f"{r.op} at {r.size} ({r.mode}): opgen's results differ: {r.extra[DIFFERS]}; its ratios "
        "there compare different computations. A [[test.samples]] entry of this size lets "
        "`opgen test` show where the op goes wrong"
        for r in results
        if r.impl == "opgen" and DIFFERS in r.extra
    ]


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def _ordered(values: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for v in values:
        seen.setdefault(v, None)
    return list(seen)


def op_table(results: list[Result], stat: str = "median") -> str:
    """One op, one mode: a row per size, each implementation's time, the op's throughput,
    then the best baseline and the ratio against it."""
    impls = _ordered(r.impl for r in results)
    sizes = _ordered(r.size for r in results)
    unit = next((rate[1] for r in results if (rate := throughput(r))), "GB/s")
    derived = any(r.derived_bytes for r in results)
    header = ["size"] + [f"{i} time" for i in impls] + [f"opgen {unit}", "best baseline", "vs best"]
    rows = []
    for size in sizes:
        at = [r for r in results if r.size == size]
        by = {r.impl: r for r in at}
        best = best_baseline(at, stat)
        row = [size]
        row += [_cell(by[i], stat) if i in by else "–" for i in impls]
        row.append(format_rate(by["opgen"], stat) if "opgen" in by else "–")
        row.append(best.impl if best else "–")
        ratio = speedup(at, "opgen", best.impl, stat) if best else None
        noisy = any(by[k].noisy for k in ("opgen", best.impl if best else "") if k in by)
        wrong = "opgen" in by and DIFFERS in by["opgen"].extra
        row.append("results differ" if wrong else _ratio(ratio, noisy))
        rows.append(row)
    first = results[0]
    moved = " from input+output bytes" + (" (and their grads)" if "backward" in first.mode else "")
    title = f"### {first.op} ({first.mode}; {unit}{moved if derived and unit == 'GB/s' else ''}; vs best = time(fastest baseline) / time(opgen))"
    return title + "\n\n" + _markdown(header, rows)


def overhead_line(results: list[Result], stat: str = "median") -> str | None:
    """At the op's smallest size, opgen's gap to the best baseline set against the call
    overhead timed in the same run; None when this group did not time the overhead."""
    mine = next((r for r in results if r.impl == "opgen" and OVERHEAD in r.extra), None)
    if mine is None:
        return None
    best = best_baseline([r for r in results if r.size == mine.size], stat)
    if best is None:
        return None
    ones = mine.extra[OVERHEAD]
    pick = 1 if stat == "min" else 0
    overhead = ones["opgen"][pick] - ones["base"][pick]
    gap = seconds(mine, stat) - seconds(best, stat)
    where = f"{format_time(gap)} behind" if gap > 0 else f"{format_time(-gap)} ahead of"
    verdict = "within it" if gap <= overhead else f"over it by {format_time(gap - overhead)}"
    cost = format_time(overhead) if overhead >= 0 else f"−{format_time(-overhead)}"
    return (
        f"smallest size ({mine.size}): opgen {where} {best.impl}; call overhead "
        f"{cost} (opgen − {ones['baseline']} on 1-element inputs, timed in the "
        f"same turns): {verdict}"
    )


def overhead_table(results: list[Result], stat: str = "median") -> str:
    """Per-call time of 1-element calls: a row per op (or baseline) and how it is called.

    Each group's first row is its native call; the ratio is time / native time.
    """
    header = ["op", "registration", "call", "time", "× native time"]
    rows = []
    native: Result | None = None
    for r in results:
        if r.kind == "native":
            native = r
        base = seconds(native, stat) if native is not None else 0.0
        ratio = seconds(r, stat) / base if base > 0 else None
        noisy = r.noisy or (native is not None and native.noisy)
        rows.append([r.op, r.kind, r.impl, _cell(r, stat), _ratio(ratio, noisy)])
    return _markdown(header, rows)


def to_json(results: list[Result], meta: dict[str, Any]) -> str:
    return json.dumps(
        {"meta": meta, "results": [asdict(r) for r in results]}, indent=2, sort_keys=True
    )


def from_json(text: str) -> tuple[dict[str, Any], list[Result]]:
    data = json.loads(text)
    return data["meta"], [Result(**r) for r in data["results"]]
