"""`opgen bench --plot`: throughput (or time) against size, one line per implementation."""

from __future__ import annotations

from pathlib import Path

from .report import Result, throughput

__all__ = ["MissingMatplotlib", "plot"]


class MissingMatplotlib(Exception):
    """matplotlib is an optional dependency (the `bench` extra)."""


def plot(results: list[Result], path: Path, metric: str = "throughput") -> None:
    """One panel per op and mode; x: elements of the largest input (log), y: GB/s, GFLOP/s or time."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingMatplotlib(
            "--plot needs matplotlib: pip install 'opgen[bench]' (or pip install matplotlib)"
        ) from None
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.op, r.mode), []).append(r)
    columns = min(3, len(groups)) or 1
    rows = (len(groups) + columns - 1) // columns or 1
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.6 * rows), squeeze=False)
    for ax, ((op, mode), rs) in zip(axes.flat, groups.items(), strict=False):
        for impl in dict.fromkeys(r.impl for r in rs):
            line = sorted((r for r in rs if r.impl == impl), key=lambda r: r.numel)
            rates = [throughput(r) for r in line]
            if metric == "throughput" and all(rates):
                ys, unit = [rate[0] for rate in rates if rate], next(
                    rate[1] for rate in rates if rate
                )
            else:
                ys, unit = [r.median * 1e6 for r in line], "µs per call"
            ax.plot([r.numel for r in line], ys, marker="o", label=impl)
            ax.set_ylabel(unit)
        ax.set_xscale("log")
        if metric != "throughput":
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlabel("elements (largest input)")
        ax.set_title(f"{op} ({mode})")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(groups) :]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
