"""A stable-ABI library built on one torch, loaded unchanged by another (no rebuild).

The reference set's library is built by the main suite on a CPU torch, CUDA kernels
included (Note [CUDA on a CPU torch]). Under a CUDA build of torch, its weak
references to torch's CUDA functions must bind to libtorch_cuda: a reference left
null would crash the first CUDA call, which no CPU-only check can see. The dynamic
loader reports each binding (`LD_DEBUG=bindings`), so this runs on a machine without
a GPU, under any CUDA build of torch (CI's second venv has torch 2.14.1, and the library
the main run built under OPGEN_EXAMPLE_BUILD: tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from _support import EXAMPLE

ROOT = Path(os.environ.get("OPGEN_EXAMPLE_BUILD") or EXAMPLE)  # a built reference set
LIBRARY = ROOT / "example_ops" / "_C.abi3.so"
SHIM = ("aoti_torch_get_current_cuda_stream", "torch_c10_cuda_check_msg")

pytestmark = [
    pytest.mark.skipif(torch.version.cuda is None, reason="needs a CUDA build of torch (no GPU)"),
    pytest.mark.skipif(
        not LIBRARY.is_file(), reason=f"the reference set's library is not built: {LIBRARY}"
    ),
]


def test_cuda_shim_binds_to_torch_cuda() -> None:
    run = subprocess.run(
        [sys.executable, "-c", "import example_ops"],
        cwd=ROOT,
        env={**os.environ, "LD_DEBUG": "bindings", "LD_BIND_NOW": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    bound = {
        name
        for line in run.stderr.splitlines()
        if "_C.abi3.so" in line.split(" to ")[0] and "libtorch_cuda.so" in line
        for name in SHIM
        if f"`{name}'" in line
    }
    assert bound == set(SHIM), f"not bound to libtorch_cuda: {sorted(set(SHIM) - bound)}"
