"""The reference set's CUDA kernels run on the CPU through bench/cuda_emu, a logic check where
no GPU is: roi_align and its backward agree with the CPU kernels bit for bit in float16, float32
and float64 (both follow torchvision's arithmetic, Note [Rounded device arithmetic]). A float or
double kernel that rounded through float16 (an overload hidden by a namespace's own) differs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("nvcc") is None
        and not Path("/usr/local/cuda/include/cuda_fp16.h").is_file()
        and not os.environ.get("CI"),
        reason="the CUDA headers are not installed",
    ),
]

_COMPARE = textwrap.dedent(
    """
    import sys
    import torch
    import example_ops

    torch.ops.load_library(sys.argv[1])
    torch.manual_seed(0)
    cases = differ = 0
    for dtype in (torch.float16, torch.float32, torch.float64):
        for aligned in (False, True):
            for sampling_ratio in (-1, 0, 1, 2):
                x = torch.randn(2, 4, 9, 7, dtype=dtype)
                rois = torch.rand(6, 5, dtype=dtype) * 2  # some reach past the border
                args = (rois, 4.5, 3, 2)
                cpu = torch.ops.example.roi_align(x, *args, sampling_ratio, aligned)
                emu = torch.ops.emu.roi_align(x, *args, sampling_ratio, aligned)
                grad = torch.randn_like(cpu)
                sizes = (2, 4, 9, 7, sampling_ratio, aligned)
                cpu_b = torch.ops.example._roi_align_backward(grad, *args, *sizes)
                emu_b = torch.ops.emu._roi_align_backward(grad, *args, *sizes)
                cases += 1
                differ += not (torch.equal(cpu, emu) and torch.equal(cpu_b, emu_b))
    print(cases, differ)
    """
)


def test_roi_align_on_the_emulated_gpu_matches_the_cpu_kernels(built_example, tmp_path) -> None:
    build = subprocess.run(
        [sys.executable, "bench/cuda_emu/build.py", "--out", str(tmp_path), "roi_align", "_roi_align_backward"],
        cwd=REPO, capture_output=True, text=True, timeout=1200,
    )
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    run = subprocess.run(
        [sys.executable, "-c", _COMPARE, str(tmp_path / "emu_ops.so")],
        cwd=built_example.root, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split() == ["24", "0"], run.stdout
