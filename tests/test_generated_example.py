"""The reference set in generated_example/: up to date with its specs, and its generated tests pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from _support import EXAMPLE, run_cli


def test_generated_example_is_up_to_date():
    result = run_cli("generate", "--check", cwd=EXAMPLE)
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_generated_example_tests_pass(built_example):
    run = subprocess.run(
        [sys.executable, "-m", "opgen", "test", "--no-build"],
        cwd=built_example.root,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "script_method" not in run.stdout


_ISA_LEVELS = ("scalar", "avx2", "avx512")  # Note [Run-time ISA dispatch], kernel_utils.h
_ASK_ISA = (
    "import ctypes, example_ops; from example_ops import _library; "
    "lib = ctypes.CDLL(str(_library.LIBRARY_PATH)); lib.example_cpu_isa.restype = ctypes.c_char_p; "
    "print(lib.example_cpu_isa().decode())"
)


# Shapes the generated tests' small samples do not reach: matmul's packed path (above ~160^3
# multiply-adds) and its edges, its unpacked path with full-width and masked tiles in one
# product (40 x 70), rows and vectors with SIMD tails, parallel chunks.
_SWEEP = """
import torch, torch.nn.functional as F, example_ops as ex
torch.manual_seed(0)
for m, n, k in [(13, 31, 17), (40, 70, 50), (128, 128, 128), (200, 170, 150), (300, 33, 513), (1030, 67, 80)]:
    a, b = torch.randn(m, k), torch.randn(k, n)
    assert torch.allclose(ex.matmul(a, b).double(), a.double() @ b.double(), atol=1e-4 * k, rtol=1e-4), (m, n, k)
for n in (1, 15, 17, 100_003):
    a, b = torch.randn(n), torch.randn(n)
    assert torch.equal(ex.vector_add(a, b), a + b), n
    assert torch.allclose(ex.muladd(a, b, 2.0), a * b + 2.0, atol=1e-6), n
    assert torch.allclose(ex.gelu(a), F.gelu(a, approximate="tanh"), atol=1e-6, rtol=1e-5), n
    assert torch.allclose(ex.gelu_backward(b, a), torch.ops.aten.gelu_backward(b, a, approximate="tanh"), atol=1e-6, rtol=1e-4), n
for rows, d in [(3, 1000), (70, 1027)]:
    x, w, bias, g = torch.randn(rows, d), torch.randn(d), torch.randn(d), torch.randn(rows, d)
    assert torch.allclose(ex.layer_norm(x, w, bias, 1e-5), F.layer_norm(x, (d,), w, bias, 1e-5), atol=1e-5), d
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, bias))
    want = torch.autograd.grad(F.layer_norm(xr, (d,), wr, br, 1e-5), (xr, wr, br), g)
    got = ex.layer_norm_backward(g, x, w, 1e-5)
    for u, v in zip(got, want):
        assert torch.allclose(u, v, atol=1e-3, rtol=1e-4), d
    for dt, tol in ((torch.float32, 1e-5), (torch.bfloat16, 1.6e-2), (torch.float16, 2e-3)):
        xd, wd = x.to(dt), w.to(dt)
        out = torch.empty_like(xd)
        ex.rms_norm(out, xd, wd, 1e-6)
        ref = (xd.float() * torch.rsqrt(xd.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(dt) * wd
        assert torch.allclose(out.float(), ref.float(), atol=tol, rtol=tol), (d, dt)
        xf, res = xd.clone(), g.to(dt)
        want_res = (xd + res).to(dt)
        want = (want_res.float() * torch.rsqrt(want_res.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(dt) * wd
        ex.fused_add_rms_norm(xf, res, wd, 1e-6)
        assert torch.equal(res, want_res), (d, dt)
        assert torch.allclose(xf.float(), want.float(), atol=tol, rtol=tol), (d, dt)
print("sweep ok")
"""


def _kernel_isa(root, **env: str) -> str:
    run = subprocess.run(
        [sys.executable, "-c", _ASK_ISA],
        cwd=root,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize("level", _ISA_LEVELS)
def test_generated_example_kernels_match_the_references_at_every_simd_level(built_example, level):
    """EXAMPLE_CPU_ISA caps the SIMD level the C++ kernels run (kernel_utils.h): the reference
    checks pass on every path the host has (scalar everywhere, AVX2 and AVX-512 where the CPU
    has them). A cap above the host's runs the host's own level, which the library reports."""
    env = {"EXAMPLE_CPU_ISA": level}
    host = _kernel_isa(built_example.root, EXAMPLE_CPU_ISA="")
    if _ISA_LEVELS.index(level) > _ISA_LEVELS.index(host):
        assert _kernel_isa(built_example.root, **env) == host
        return
    assert _kernel_isa(built_example.root, **env) == level
    run = subprocess.run(
        [sys.executable, "-m", "opgen", "test", "--no-build", "-k", "matches_reference"],
        cwd=built_example.root,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
    sweep = subprocess.run(
        [sys.executable, "-c", _SWEEP],
        cwd=built_example.root,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert sweep.returncode == 0 and "sweep ok" in sweep.stdout, sweep.stdout + sweep.stderr[-3000:]


@pytest.mark.slow
def test_generated_example_force_scalar_and_a_bad_level(built_example):
    """EXAMPLE_FORCE_SCALAR=1 still selects the scalar twins; an unknown EXAMPLE_CPU_ISA is an
    error naming the levels, not a silent fallback."""
    assert _kernel_isa(built_example.root, EXAMPLE_FORCE_SCALAR="1") == "scalar"
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch, example_ops; example_ops.vector_add(torch.ones(2), torch.ones(2))",
        ],
        cwd=built_example.root,
        env={**os.environ, "EXAMPLE_CPU_ISA": "avx1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1
    assert "EXAMPLE_CPU_ISA=avx1 is not a SIMD level: use scalar, avx2 or avx512" in run.stderr


@pytest.mark.slow
def test_a_bench_run_on_the_scalar_path_times_every_cpp_kernel(built_example, tmp_path):
    """With the scalar twins forced, `opgen bench` times every C++ op of the reference set
    against its baselines and exits 0: at each size the op's results agreed with its
    reference's (Note [The bench checks what it times]; the SIMD-level test above runs the
    reference checks and the sweep on that path)."""
    from opgen.project.load import load_project

    cpp = {
        op.name
        for op in load_project(built_example.root).ops
        if op.backend == "cpp" and "cpu" in op.devices and op.bench.sizes
    }
    out = tmp_path / "bench.json"
    run = subprocess.run(
        [sys.executable, "-m", "opgen", "bench", "--quick", "--no-compile", "--no-progress"]
        + ["--json", str(out)],
        cwd=built_example.root,
        env={**os.environ, "EXAMPLE_CPU_ISA": "scalar"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert _kernel_isa(built_example.root, EXAMPLE_CPU_ISA="scalar") == "scalar"
    rows = json.loads(out.read_text())["results"]
    timed = {r["op"] for r in rows if r["impl"] == "opgen" and r["median"] > 0}
    assert cpp and cpp <= timed, sorted(cpp - timed)
    for op in cpp:
        baselines = {r["impl"] for r in rows if r["op"] == op and r["impl"] != "opgen"}
        assert baselines, f"{op}: no baseline timed beside opgen"
