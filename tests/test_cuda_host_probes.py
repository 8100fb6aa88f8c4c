"""The host-side arithmetic of the CUDA sources, compiled by nvcc and run here (no GPU needed).

One probe program #includes the reference set's matmul.cu and add_out.cu and a
freshly generated CUDA stub, then prints what their host functions compute:
the stub's block count for n near 2^31 and beyond, matmul's launch grid for
M and N past the 65535-block limit of grid y, and add_out's overlap check,
compared case by case with ATen's own add.out on CPU tensors.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from opgen.build.ninja import find_toolchain
from opgen.build.toolchain.cuda import missing_cuda_shim_symbols

from _cpp_support import opgen
from _support import EXAMPLE

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("nvcc") is None
        and not Path("/usr/local/cuda/bin/nvcc").is_file()
        and not os.environ.get("CI"),
        reason="nvcc is not installed",
    ),
]

TORCH = Path(torch.__file__).parent
BLOCK_NS = [1, 255, 256, 257, 2**24, 2**31 - 1, 2**31, 2**31 + 1, 2**32 + 5, 2**40, 2**62]
GRIDS = [(5_000_000, 8), (4_194_241, 64), (64, 5_000_000), (1, 1), (2**40, 1), (8, 2**33)]

_PROBE = """
#include "{example}/csrc/cuda/matmul.cu"
#include "{example}/csrc/cuda/add_out.cu"
#include "{stub}/csrc/cuda/foo.cu"

#include <cstdio>
#include <iostream>
#include <vector>

int main() {{
  for (long long n : {{{block_ns}}})
    std::printf("blocks %lld %u\\n", n, t::foo_kernel_blocks(n, 256));
  const long long grids[][2] = {{{grids}}};
  for (const auto& mn : grids) {{
    const dim3 g = example::gemm_grid(mn[0], mn[1], 128, 128);
    std::printf("grid %lld %lld %u %u %u\\n", mn[0], mn[1], g.x, g.y, g.z);
  }}
  // Overlap cases on stdin: offset dim sizes... strides... for out, then for the input.
  static float buffer[4096];
  auto read = [&](std::vector<int64_t>& sizes, std::vector<int64_t>& strides) {{
    long long offset = 0, dim = 0;
    std::cin >> offset >> dim;
    sizes.resize(dim);
    strides.resize(dim);
    for (auto& s : sizes) std::cin >> s;
    for (auto& s : strides) std::cin >> s;
    return example::Layout{{reinterpret_cast<uintptr_t>(buffer + offset), sizes.data(),
                           strides.data(), dim, int64_t(sizeof(float))}};
  }};
  std::vector<int64_t> os, ost, is, ist;
  while (std::cin >> std::ws && !std::cin.eof()) {{
    const example::Layout out = read(os, ost), in = read(is, ist);
    std::printf("overlap %d\\n", static_cast<int>(example::overlap_of(out, in)));
  }}
}}
"""


def _views() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, out, input) views of one float buffer, as a user could pass them to add_out."""
    buf = torch.zeros(4096)
    grid = buf[:64].view(8, 8)
    return [
        ("same tensor", buf[:8], buf[:8]),
        ("shifted by one", buf[1:9], buf[:8]),
        ("input shifted", buf[:8], buf[4:12]),
        ("disjoint", buf[8:16], buf[:8]),
        ("touching", buf[8:16], buf[:8]),
        ("same span, transposed", grid.t(), grid),
        ("strided, interleaved", buf[1:17:2], buf[0:16:2]),
        ("same elements, other view", grid[1], buf[8:16]),
        ("rows overlap", grid[1:3], grid[2:4]),
        ("2-D disjoint", grid[:2], grid[4:6]),
        ("empty", buf[:0], buf[:0]),
    ]


def _layout(t: torch.Tensor) -> str:
    return " ".join(map(str, [t.storage_offset(), t.dim(), *t.shape, *t.stride()]))


def _aten_raises(out: torch.Tensor, a: torch.Tensor) -> bool:
    """Does ATen's add.out reject this out/input pair as a partial overlap?"""
    try:
        torch.add(a, torch.ones_like(a), out=out)
    except RuntimeError as exc:
        assert "refer to a single memory location" in str(exc), exc
        return True
    return False


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> dict[str, list[list[int]]]:
    root = tmp_path_factory.mktemp("probe")
    stub = root / "stub"
    stub.mkdir()
    opgen("new", "t::foo", "--backend", "cpp", "--devices", "cpu,cuda", cwd=stub)
    source = root / "probe.cu"
    source.write_text(
        _PROBE.format(
            example=EXAMPLE,
            stub=stub,
            block_ns=", ".join(f"{n}LL" for n in BLOCK_NS),
            grids=", ".join(f"{{{m}LL, {n}LL}}" for m, n in GRIDS),
        )
    )
    tools = find_toolchain()
    assert tools.cuda is not None, tools.cuda_problem
    obj, exe = root / "probe.o", root / "probe"
    compile_ = [
        str(tools.cuda.nvcc.path),
        "-std=c++17",
        "-O1",
        "-ccbin",
        tools.cxx,
        "-arch=sm_75",
        "-DUSE_CUDA",
        "-DTORCH_TARGET_VERSION=0x020a000000000000",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(tools.cxx11_abi)}",
        "-isystem",
        str(TORCH / "include"),
        "-c",
        str(source),
        "-o",
        str(obj),
    ]
    done = subprocess.run(compile_, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-6000:]
    # The same weak references a CPU-torch build uses (Note [CUDA on a CPU torch]).
    weak = missing_cuda_shim_symbols(TORCH / "include", TORCH / "lib" / "libtorch.so")
    subprocess.run(["objcopy", *[f"-W{w}" for w in weak], str(obj)], check=True)
    lib = tools.cuda.cudart_dir
    link = [
        tools.cxx,
        str(obj),
        "-o",
        str(exe),
        f"-L{TORCH / 'lib'}",
        "-ltorch_cpu",
        "-lc10",
        f"-L{lib}",
        tools.cuda.cudart_link,
        f"-Wl,-rpath,{TORCH / 'lib'}:{lib}",
    ]
    done = subprocess.run(link, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    cases = "\n".join(f"{_layout(out)} {_layout(a)}" for _, out, a in _views()) + "\n"
    run = subprocess.run([str(exe)], input=cases, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    found: dict[str, list[list[int]]] = {}
    for line in run.stdout.splitlines():
        kind, *values = line.split()
        found.setdefault(kind, []).append([int(v) for v in values])
    return found


def test_stub_blocks_cover_any_n(probe):
    """The stub's grid-stride launch: at least one block, at most 65536, exact below the cap."""
    assert [n for n, _ in probe["blocks"]] == BLOCK_NS
    for n, blocks in probe["blocks"]:
        assert blocks == min(-(-n // 256), 65536), n
        assert 1 <= blocks <= 65536


def test_stub_kernel_is_a_64_bit_grid_stride_loop(tmp_path):
    opgen("new", "t::bar", "--backend", "cpp", "--devices", "cuda", cwd=tmp_path)
    text = (tmp_path / "csrc" / "cuda" / "bar.cu").read_text()
    assert "const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;" in text
    assert re.search(
        r"for \(int64_t i = static_cast<int64_t>\(blockIdx\.x\) \* blockDim\.x \+ threadIdx\.x; i < n; i \+= stride\)",
        text,
    )
    assert "const unsigned blocks = bar_kernel_blocks(n, threads);" in text
    assert "static_cast<int>(" not in text


def test_matmul_grid_fits_cuda_limits_for_any_m_and_n(probe):
    """M tiles on x (up to 2^31 - 1 blocks), N tiles on y (up to 65535), loops beyond."""
    assert [(m, n) for m, n, *_ in probe["grid"]] == GRIDS
    for m, n, gx, gy, gz in probe["grid"]:
        tiles_m, tiles_n = -(-m // 128), -(-n // 128)
        assert (gx, gy, gz) == (min(tiles_m, 2**31 - 1), min(tiles_n, 65535), 1), (m, n)
        # The kernel's loops m0 = bx*BM, += gx*BM (and likewise for n) then visit every tile once.
        assert gx >= 1 and gy >= 1


def test_add_out_overlap_check_agrees_with_aten(probe):
    views = _views()
    codes = [c for (c,) in probe["overlap"]]
    assert len(codes) == len(views)
    named = {name: code for (name, _, _), code in zip(views, codes, strict=True)}
    assert named["same tensor"] == 1 and named["shifted by one"] == 2 and named["disjoint"] == 0
    assert named["strided, interleaved"] == 3  # gaps: left alone, as ATen does
    for (name, out, a), code in zip(views, codes, strict=True):
        assert (code == 2) == _aten_raises(out, a), f"{name}: add_out says {code}, ATen disagrees"
