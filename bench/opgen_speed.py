"""opgen's own speed on a 100-op project, each figure printed against its target.

    python bench/opgen_speed.py [--ops 100] [--repeat 3]

Builds the project in a temporary folder and times the real `opgen` command in a
fresh process (what a user waits for): a full regeneration (every spec changed,
so every generated file is rendered, formatted and written), a no-op
`opgen generate` (nothing changed) and `opgen --help`. The best of --repeat runs
is reported, since the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"opgen --help": 0.3, "no-op opgen generate": 0.5, "full regeneration": 3.0}
PROJECT = '[project]\nnamespace = "benchlib"\npackage = "benchlib"\n'


def _spec(i: int, variant: str) -> str:
    return f"""name = "benchlib::op{i:03d}"
schema = "(Tensor x, Tensor y, float alpha=1.0) -> Tensor"
doc = "Benchmark op {i} ({variant})."

[grad]
x = "grad * alpha"
y = "grad * x.sign()"

[fake]
like = "x"

[test]
reference = "x * alpha + y.abs() + {len(variant)}"

[[test.samples]]
x = {{shape = [3, 4]}}
y = {{shape = [3, 4]}}
"""


def _write_project(root: Path, ops: int, variant: str) -> None:
    (root / "ops").mkdir(parents=True, exist_ok=True)
    (root / "opgen.toml").write_text(PROJECT, encoding="utf-8")
    for i in range(ops):
        (root / "ops" / f"op{i:03d}.toml").write_text(_spec(i, variant), encoding="utf-8")


def _opgen() -> list[str]:
    found = shutil.which("opgen")
    return [found] if found else [sys.executable, "-m", "opgen"]


def _time(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(_opgen() + args, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"opgen {' '.join(args)} failed:\n{done.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="opgen-speed-") as tmp:
        root = Path(tmp) / "project"
        _write_project(root, options.ops, "a")
        _time(["generate"], root)  # first run: creates the tree
        full: list[float] = []
        for run in range(options.repeat):
            _write_project(root, options.ops, "bb" if run % 2 == 0 else "a")  # every op changes
            full.append(_time(["generate"], root))
        figures["full regeneration"] = min(full)
        figures["no-op opgen generate"] = min(
            _time(["generate"], root) for _ in range(options.repeat)
        )
        figures["opgen --help"] = min(_time(["--help"], root) for _ in range(options.repeat))
        files = sum(1 for p in root.rglob("*") if p.is_file())
    print(f"opgen speed, {options.ops} ops ({files} files), best of {options.repeat}:")
    ok = True
    for name in ("opgen --help", "no-op opgen generate", "full regeneration"):
        target = TARGETS[name]
        good = figures[name] <= target
        ok &= good
        print(
            f"  {name:<22} {figures[name]:6.3f} s   target <= {target:.1f} s   {'ok' if good else 'SLOW'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
