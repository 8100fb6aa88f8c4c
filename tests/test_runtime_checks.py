"""Bad calls of the reference set's ops that crashed, returned wrong values or raised errors naming
nothing: each now raises an error that names the op and the argument (Note [Argument checks]).

The calls run in a child process, each printing its outcome; a call that crashes the child
fails its own test, and a new child runs the calls after it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# name -> (the call, with `ops` = torch.ops.example, `t` = torch; what its error must say)
CASES = {
    "roi_align_sampling_ratio_2_31": (
        "ops.roi_align(t.rand(1, 2, 8, 8), t.tensor([[0, 0., 0., 4., 4.]]), 1.0, 2, 2, 2**31,"
        " False)",
        "example::roi_align: sampling_ratio 2147483648",
    ),
    "roi_align_sampling_ratio_2_40": (
        "ops.roi_align(t.rand(1, 2, 8, 8), t.tensor([[0, 0., 0., 4., 4.]]), 1.0, 2, 2, 2**40,"
        " False)",
        "example::roi_align: sampling_ratio 1099511627776",
    ),
    "roi_align_backward_sampling_ratio_2_31": (
        "ops._roi_align_backward(t.rand(1, 2, 2, 2), t.tensor([[0, 0., 0., 4., 4.]]), 1.0, 2, 2,"
        " 1, 2, 8, 8, 2**31, False)",
        "example::_roi_align_backward: sampling_ratio 2147483648",
    ),
    "roi_align_backward_sizes_overflow": (
        "ops._roi_align_backward(t.rand(1, 2, 2, 2), t.tensor([[0, 0., 0., 4., 4.]]), 1.0, 2, 2,"
        " 2**40, 2, 2**40, 8, 2, False)",
        "example::_roi_align_backward: the input size",
    ),
    "add_out_partial_overlap": (
        "buf = t.arange(20.); ops.add_out(buf[:10], t.ones(10), buf[5:15])",
        "example::add_out: argument 'out' is written and partially overlaps 'a'",
    ),
    "vector_add_cpu_and_meta": (
        "ops.vector_add(t.ones(3), t.ones(3, device='meta'))",
        "example::vector_add: argument 'b' is on meta but 'a' is on cpu",
    ),
    "add_out_meta_out": (
        "ops.add_out(t.ones(3), t.ones(3), t.empty(3, device='meta'))",
        "example::add_out: argument 'out' is on meta but 'a' is on cpu",
    ),
    "stable_op_none_tensor": (
        "ops.vector_add(None, t.ones(3))",
        "example::vector_add: argument 'a' is None",
    ),
    "stable_op_expanded_out": (
        "ops.add_out(t.ones(3), t.ones(3), t.zeros(1).expand(3))",
        "example::add_out: argument 'out' is written but has an expanded (stride-0) dimension",
    ),
    "paste_float64_into_float32": (
        "ops.paste(t.zeros(1, 4, 4), t.ones(1, 2, 2, dtype=t.float64), [0, 0])",
        "example::paste: expected im1.dtype == im2.dtype",
    ),
    "paste_box_out_of_range": (
        "ops.paste(t.zeros(1, 4, 4), t.ones(1, 2, 2), [3, 3])",
        "example::paste: expected 0 <= coord[0]",
    ),
    "crop_box_out_of_range": (
        "ops.crop(t.ones(1, 4, 4), [0, 0, 8, 8])",
        "example::crop: expected 0 <= box[0] <= box[2] <= pic.shape[2]",
    ),
    "python_op_none_tensor": (
        "ops.numpy_sin_out(None, t.ones(3))",
        "example::numpy_sin_out: argument 'input' is None",
    ),
}

_CHILD = """
import json, sys, torch as t
import example_ops
ops = t.ops.example
for name, (call, _) in json.loads(sys.argv[1]).items():
    print(json.dumps({"calling": name}), flush=True)
    try:
        exec(call)
        print(json.dumps({"case": name, "error": None}), flush=True)
    except Exception as error:
        print(json.dumps({"case": name, "error": f"{type(error).__name__}: {error}"}), flush=True)
"""


def run_cases(root: Path) -> dict[str, str | None]:
    """Each case's error (None: it returned), from child processes of the project at `root`: a
    case that kills its child is recorded as such, and the next child goes on after it."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    found: dict[str, str | None] = {}
    remaining = dict(CASES)
    while remaining:
        run = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(remaining)],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
            cwd=root,
        )
        lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        found.update({line["case"]: line["error"] for line in lines if "case" in line})
        calling = [line["calling"] for line in lines if "calling" in line]
        if run.returncode == 0 or not calling:
            assert run.returncode == 0, run.stderr[-3000:]
            break
        found[calling[-1]] = f"the process died (exit code {run.returncode})"
        remaining = {k: v for k, v in remaining.items() if k not in found}
    return found


@pytest.fixture(scope="module")
def outcomes(built_example) -> dict[str, str | None]:
    return run_cases(built_example.root)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_call_raises_naming_the_op_and_argument(outcomes, case):
    _, expected = CASES[case]
    error = outcomes[case]
    assert error is not None, f"{case}: the call returned instead of raising"
    assert expected in error, f"{case}: {error}"


@pytest.mark.slow
def test_numpy_sin_keeps_a_0d_shape(built_example):
    assert numpy_sin_0d_shape(built_example.root) == "()"


def numpy_sin_0d_shape(root: Path) -> str:
    code = (
        "import torch, example_ops; "
        "print(tuple(torch.ops.example.numpy_sin(torch.tensor(1.0)).shape))"
    )
    env = {**os.environ, "PYTHONPATH": str(root)}
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip().splitlines()[-1]
