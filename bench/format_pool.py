"""When black in a process pool beats black in one process: N generated files, both ways.

    python bench/format_pool.py [--repeat 3]

Formats N of the reference set's generated Python files (repeated as
needed) with `opgen.render.format.format_many`, once in this process and once in
its pool of forked workers, and prints the best of --repeat runs of each
with the machine's load average. POOL_MIN_FILES in opgen/render/format.py comes
from this (on 2 idle cores).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import black  # noqa: F401  (imported before timing, as `opgen generate` has it by then)

import opgen.render.format as fmt

EXAMPLE = Path(__file__).resolve().parent.parent / "generated_example"


def _texts() -> list[str]:
    files = sorted((EXAMPLE / "example_ops" / "_generated").glob("*.py"))
    files += sorted((EXAMPLE / "tests").glob("test_*.py"))
    return [f.read_text(encoding="utf-8") for f in files if f.name != "__init__.py"]


def _best(jobs: list[fmt.FormatJob], pool: bool, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fmt.format_many(jobs, pool=pool)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    texts = _texts()
    print(f"cores: {fmt._cores()}, load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| files | one process | pool |")
    print("|---|---|---|")
    for count in (2, 3, 4, 6, 8, 16):
        jobs = [fmt.FormatJob(t, "t", "p") for t in (texts * 4)[:count]]
        serial = _best(jobs, False, options.repeat)
        pooled = _best(jobs, True, options.repeat)
        print(f"| {count} | {serial * 1000:.0f} ms | {pooled * 1000:.0f} ms |")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
