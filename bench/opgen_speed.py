"""opgen's own speed: each figure against its target, with the stages that explain it.

    python bench/opgen_speed.py [--ops 100] [--repeat 3] [--no-build]

Times the real `opgen` command in a fresh process (what a user waits for):
`opgen --help`; on a project of --ops generated ops, a no-op `opgen generate`,
a regeneration after editing one spec, and a full regeneration (every spec
changed, each time differently, so nothing is cached); and, on a copy of
generated_example/, `opgen build` with nothing changed and, for reference,
a cold build. The best of --repeat runs is reported with the seconds of each
stage of that run (`opgen generate --timings`; "other" is the rest: the
interpreter, imports and the command line), the machine's load average
before and after, since the machine is shared: compare figures only with
their load, and whether opgen's modules load from cached bytecode (with
PYTHONDONTWRITEBYTECODE set and no __pycache__, every run compiles them
from source, ~0.1 s of each row).

The command run is the `opgen` script installed beside this interpreter (or
`python -m opgen`); with PYTHONPATH set, it runs that checkout's opgen.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "generated_example"
PROJECT = '[project]\nnamespace = "benchlib"\npackage = "benchlib"\n'
STAGES = ("load", "validate", "render", "format", "write")
TARGETS = {
    "opgen --help": 0.2,
    "no-op opgen generate": 0.3,
    "regenerate after editing one spec": 0.5,
    "full regeneration (every spec changed)": 3.0,
    "opgen build, nothing changed (generated_example)": 0.5,
    "opgen build, cold (generated_example, for reference)": None,
}
_STAGE_LINE = re.compile(r"opgen: (load [\d.]+ s.*)$", re.M)


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


def _write_spec(root: Path, i: int, variant: str) -> None:
    (root / "ops" / f"op{i:03d}.toml").write_text(_spec(i, variant), encoding="utf-8")


def _write_project(root: Path, ops: int, variant: str) -> None:
    (root / "ops").mkdir(parents=True, exist_ok=True)
    (root / "opgen.toml").write_text(PROJECT, encoding="utf-8")
    for i in range(ops):
        _write_spec(root, i, variant)


def _opgen() -> list[str]:
    beside = Path(sys.executable).parent / "opgen"
    return [str(beside)] if beside.is_file() else [sys.executable, "-m", "opgen"]


@dataclass
class Run:
    seconds: float
    stages: dict[str, float] = field(default_factory=dict)


def _run(args: list[str], cwd: Path) -> Run:
    start = time.perf_counter()
    done = subprocess.run(_opgen() + args, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"opgen {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    stages = {}
    found = _STAGE_LINE.search(done.stderr)
    if found:
        for part in found.group(1).split(", "):
            name, value, _ = part.split()
            stages[name] = float(value)
    return Run(elapsed, stages)


def _best(runs: list[Run]) -> Run:
    return min(runs, key=lambda r: r.seconds)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _bytecode() -> str:
    """Whether the runs load opgen's modules from cached bytecode or compile them from source
    each time (PYTHONDONTWRITEBYTECODE with no __pycache__): ~0.1 s of every row here."""
    spec = importlib.util.find_spec("opgen")
    if spec is None or spec.origin is None:
        return "opgen not found"
    sources = sorted(Path(spec.origin).parent.rglob("*.py"))
    cached = sum(Path(importlib.util.cache_from_source(str(p))).is_file() for p in sources)
    writes = "not written (PYTHONDONTWRITEBYTECODE)" if sys.flags.dont_write_bytecode else "written"
    return f"opgen bytecode cached for {cached} of {len(sources)} modules, {writes}"


def _generate_rows(ops: int, repeat: int) -> tuple[dict[str, Run], int]:
    rows: dict[str, Run] = {}
    generate = ["generate", "--timings"]
    with tempfile.TemporaryDirectory(prefix="opgen-speed-") as tmp:
        root = Path(tmp) / "project"
        _write_project(root, ops, "v")
        _run(generate, root)  # creates the tree
        full = []
        for run in range(repeat):
            # every spec (its doc and reference) changes, never back to an earlier text
            _write_project(root, ops, "v" * (run + 2))
            full.append(_run(generate, root))
        rows["full regeneration (every spec changed)"] = _best(full)
        edits = []
        for run in range(repeat):
            _write_spec(root, ops // 2, "e" * (run + 2))
            edits.append(_run(generate, root))
        rows["regenerate after editing one spec"] = _best(edits)
        _run(generate, root)  # settles the project after the edits
        rows["no-op opgen generate"] = _best([_run(generate, root) for _ in range(repeat)])
        rows["opgen --help"] = _best([_run(["--help"], root) for _ in range(repeat)])
        files = sum(1 for p in root.rglob("*") if p.is_file())
    return rows, files


def _build_rows(repeat: int) -> dict[str, Run]:
    rows: dict[str, Run] = {}
    with tempfile.TemporaryDirectory(prefix="opgen-speed-build-") as tmp:
        root = Path(tmp) / "generated_example"
        shutil.copytree(
            EXAMPLE, root, ignore=shutil.ignore_patterns("build", "*.so", "lock", "__pycache__")
        )
        rows["opgen build, cold (generated_example, for reference)"] = _run(
            ["build", "--no-generate"], root
        )
        _run(["build"], root)  # generates once in this copy (its own cache)
        rows["opgen build, nothing changed (generated_example)"] = _best(
            [_run(["build"], root) for _ in range(repeat)]
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-build", action="store_true", help="skip the `opgen build` rows")
    options = parser.parse_args()
    before, bytecode = _load(), _bytecode()
    rows, files = _generate_rows(options.ops, options.repeat)
    if not options.no_build:
        rows.update(_build_rows(options.repeat))
    after = _load()
    print(
        f"opgen speed: {options.ops} ops ({files} files), best of {options.repeat}, "
        f"{len(os.sched_getaffinity(0))} cores; load average {before} before, {after} after; "
        f"{bytecode}"
    )
    print()
    print("| command | time | target | " + " | ".join(STAGES) + " | other |")
    print("|---|---|---|" + "---|" * (len(STAGES) + 1))
    ok = True
    for name, target in TARGETS.items():
        if name not in rows:
            continue
        run = rows[name]
        verdict = ""
        if target is not None:
            good = run.seconds <= target
            ok &= good
            verdict = f"≤ {target} s {'ok' if good else 'SLOW'}"
        stages = [f"{run.stages[s]:.3f}" if s in run.stages else "" for s in STAGES]
        other = f"{run.seconds - sum(run.stages.values()):.3f}" if run.stages else ""
        print(
            f"| {name} | {run.seconds:.3f} s | {verdict} | " + " | ".join(stages) + f" | {other} |"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
