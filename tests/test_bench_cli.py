"""`opgen bench` end to end on the op of a fresh `opgen new` project (seconds each; the compiled
reference adds an Inductor compile, a minute on a busy 2-core machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from _support import run_cli

pytestmark = pytest.mark.slow  # benchmarks end to end in fresh interpreters


def _bench(project: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "opgen", "bench", "--no-progress", *args]
    return subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=600)


def _new_project(root: Path, bench: str) -> Path:
    """`opgen new mylib::foo` in root, its spec given the `[bench]` table `bench`."""
    result = run_cli("new", "mylib::foo", cwd=root)
    assert result.exit_code == 0, result.output
    spec = root / "ops" / "foo.toml"
    spec.write_text(spec.read_text() + f"\n[bench]\n{bench}\n")
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return _new_project(tmp_path_factory.mktemp("benchproj"), 'sizes = [64, 4096]\nnative = "torch.sin(x)"')


def test_quick_bench_prints_table_and_writes_json(project):
    run = _bench(project, "--quick", "--json", "out.json")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "threads: " in run.stdout and run.stdout.startswith("host: ")
    assert "### foo (forward; GB/s from input+output bytes" in run.stdout
    assert "| 64   |" in run.stdout and "best baseline" in run.stdout  # --quick: the smallest size only
    data = json.loads((project / "out.json").read_text())
    assert data["meta"]["threads"] >= 1 and "load_average" in data["meta"] and "isa" in data["meta"]
    # the compiled reference is on by default; its compile cache stays in the project
    assert {r["impl"] for r in data["results"]} == {"opgen", "reference", "compiled", "native"}
    assert any((project / ".opgen" / "cache" / "inductor-bench").iterdir())
    assert all(r["median"] > 0 and r["size"] == "64" for r in data["results"])
    # the smallest size's gap against the call overhead timed in the same turns
    assert "smallest size (64): opgen " in run.stdout and "(opgen − native on 1-element inputs" in run.stdout
    (opgen,) = [r for r in data["results"] if r["impl"] == "opgen"]
    ones = opgen["extra"]["call_overhead"]
    assert ones["baseline"] == "native" and all(t > 0 for t in ones["opgen"] + ones["base"])


def test_the_call_overhead_is_timed_at_the_smallest_size_only(project):
    run = _bench(project, "--no-compile", "--min-time", "0.02", "--json", "sizes.json")
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads((project / "sizes.json").read_text())
    timed = {r["size"]: "call_overhead" in r["extra"] for r in data["results"] if r["impl"] == "opgen"}
    assert timed == {"64": True, "4096": False}
    assert run.stdout.count("smallest size (") == 1


def test_no_compile_leaves_the_compiled_reference_out(project):
    run = _bench(project, "--quick", "--no-compile", "--json", "plain.json")
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads((project / "plain.json").read_text())
    assert {r["impl"] for r in data["results"]} == {"opgen", "reference", "native"}


def test_cpu_clock_needs_one_thread(project):
    run = _bench(project, "--quick", "--clock", "cpu")
    assert run.returncode == 2 and "--clock cpu times one CPU thread: add --threads 1" in run.stderr
    run = _bench(project, "--quick", "--no-compile", "--clock", "cpu", "--threads", "1", "--json", "cpu.json")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "CPU time of the process (--clock cpu)" in run.stdout
    assert json.loads((project / "cpu.json").read_text())["meta"]["clock"] == "cpu"


def test_overhead_lists_every_registration(project):
    run = _bench(project, "--overhead", "--min-time", "0.02")
    assert run.returncode == 0, run.stdout + run.stderr
    for kind in ("python library + register_autograd", "python custom_op", "autograd.Function"):
        assert kind in run.stdout
    assert "| foo " in run.stdout and "opgen wrapper" in run.stdout
    assert "opgen's typed wrapper" in run.stdout  # the wrapper opgen generates, on a 1-element add


def test_overhead_times_forward_and_backward_when_the_bench_does(tmp_path):
    _new_project(tmp_path, 'sizes = [64]\nnative = "torch.sin(x)"\nbackward = true')
    run = _bench(tmp_path, "--overhead", "--min-time", "0.02", "--json", "o.json")
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {r["impl"]: r for r in json.loads((tmp_path / "o.json").read_text())["results"] if r["op"] == "foo"}
    assert set(rows) == {
        "native: torch.sin(x)",
        "opgen wrapper",
        "torch.ops handle",
        "native: torch.sin(x), forward+backward",
        "opgen wrapper, forward+backward",
    }
    # each group is divided by its own native row: the backward one starts a group
    assert rows["native: torch.sin(x), forward+backward"]["kind"] == "native"
    assert rows["opgen wrapper, forward+backward"]["median"] > rows["opgen wrapper"]["median"]


def test_unknown_op_and_missing_cuda_are_reported(project):
    run = _bench(project, "nope")
    assert run.returncode == 1 and "unknown op(s): nope" in run.stderr
    import torch

    if not torch.cuda.is_available():
        run = _bench(project, "--device", "cuda", "--quick")
        assert run.returncode == 0 and "CUDA is not available" in run.stderr


def test_plot_or_a_clear_message(project):
    run = _bench(project, "--quick", "--plot", "out.png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert run.returncode == 1 and "needs matplotlib" in run.stderr
    else:
        assert run.returncode == 0, run.stderr
        assert (project / "out.png").read_bytes()[:4] == b"\x89PNG"


def test_dtype_picks_the_dtypes_timed(tmp_path):
    _new_project(tmp_path, 'sizes = [64]\ndtypes = ["float32", "float64"]')
    run = _bench(tmp_path, "--quick", "--dtype", "float64", "--json", "out.json")
    assert run.returncode == 0, run.stdout + run.stderr
    sizes = {r["size"] for r in json.loads((tmp_path / "out.json").read_text())["results"]}
    assert sizes == {"64 float64"}, sizes
    assert "smallest size" not in run.stdout  # one size is the op's largest too: no small-size line
    run = _bench(tmp_path, "--quick", "--dtype", "bfloat16")
    assert run.returncode == 1
    assert "skipped foo: benchmarked in float32, float64 ([bench] dtypes), not in bfloat16" in run.stderr
    run = _bench(tmp_path, "--dtype", "bf16")
    assert run.returncode == 2 and "error: --dtype bf16 is no dtype" in run.stderr


def test_a_kernel_wrong_at_a_bench_size_fails_the_bench(tmp_path):
    """Right on the spec's samples and at 64 elements, wrong at 4096: the bench says where, shows
    no ratio for that row and exits 1 (Note [The bench checks what it times])."""
    _new_project(tmp_path, 'sizes = [64, 4096]\nnative = "torch.sin(x)"')
    kernel = tmp_path / "mylib" / "kernels" / "foo.py"
    kernel.write_text(
        kernel.read_text().replace(
            "    return torch.sin(x)",
            "    y = torch.sin(x)\n    if x.numel() > 1000:\n        y.view(-1)[-1] = 7.0\n    return y",
        )
    )
    run = _bench(tmp_path, "--no-compile", "--min-time", "0.02", "--json", "wrong.json")
    assert run.returncode == 1, run.stdout + run.stderr
    assert (
        "error: foo at 4096 (forward): opgen's results differ: output 0: 1 of 4096 elements differ,"
        " by up to " in run.stderr
    )
    assert "(against reference)" in run.stderr and "A [[test.samples]] entry of this size" in run.stderr
    rows = {r["size"]: r for r in json.loads((tmp_path / "wrong.json").read_text())["results"] if r["impl"] == "opgen"}
    assert "differs" in rows["4096"]["extra"] and "differs" not in rows["64"]["extra"]
    (row,) = [line for line in run.stdout.splitlines() if line.startswith("| 4096 ")]
    assert row.rstrip(" |").endswith("results differ")
    (row,) = [line for line in run.stdout.splitlines() if line.startswith("| 64 ")]
    assert "results differ" not in row and "×" in row
