"""CUDA libraries built and linked for real on this machine (nvcc, no GPU needed).

- a stable stub project: `opgen build` links its CUDA object against libcudart
  with --no-undefined, through the build's own C++ compiler, and the library
  loads on a CPU torch without LD_LIBRARY_PATH;
- the reference set: the same for its nine CUDA kernels;
- a classic pybind project under a faked CUDA torch (Note [pybind link]): the
  pybind module defines its CUDA kernel, and a kernel missing from the link
  fails the build.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from opgen.build.ninja import find_toolchain, plan_build, write_ninja
from opgen.build.run import foreign_symbols
from opgen.project.load import load_project

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


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    return env | extra


def _dynamic(library: Path) -> tuple[list[str], list[str]]:
    """(NEEDED sonames, RUNPATH folders) of an ELF file."""
    text = subprocess.run(
        ["readelf", "-d", str(library)], capture_output=True, text=True, check=True
    ).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+)\]", text)
    runpath = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.+)\]", text)
    return needed, [p for entry in runpath for p in entry.split(":")]


def _symbols(library: Path, *flags: str) -> str:
    """Dynamic symbols (what the loader resolves) of `library`, demangled."""
    return subprocess.run(
        ["nm", "-D", "-C", *flags, str(library)], capture_output=True, text=True, check=True
    ).stdout


def _defined(library: Path) -> str:
    """Every function defined in `library`, local ones included (kernels need not be exported)."""
    return subprocess.run(
        ["nm", "-C", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture(scope="module")
def cuda():
    toolkit = find_toolchain().cuda
    assert toolkit is not None, "nvcc is installed but no usable CUDA toolkit was found"
    return toolkit


@pytest.fixture(scope="module")
def stub_build(tmp_path_factory):
    """`opgen build` of a fresh stable project, with a C++ compiler that logs its calls."""
    root = tmp_path_factory.mktemp("cuda_stub")
    opgen("new", "mylib::foo", "--backend", "cpp", "--devices", "cpu,cuda", cwd=root)
    log = root.parent / f"{root.name}_cxx.log"
    cxx = root.parent / f"{root.name}_logged-g++"
    cxx.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec "{shutil.which("g++")}" "$@"\n')
    cxx.chmod(0o755)
    env = _env(CXX=str(cxx))
    build = subprocess.run(
        [sys.executable, "-m", "opgen", "build"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    return root, build.stdout, log.read_text()


def test_stub_library_links_the_cuda_kernel(stub_build, cuda):
    root, out, _ = stub_build
    assert "NVCC csrc/cuda/foo.cu" in out
    assert re.search(rf"LINK mylib/_C\.abi3\.so \(CUDA {cuda.nvcc.version_text}: sm_\d+", out), out
    assert "opgen: CUDA: linked 1 .cu file(s)" in out
    library = root / "mylib" / "_C.abi3.so"
    assert "mylib::foo_cuda(torch::stable::Tensor const&)" in _defined(library)
    assert foreign_symbols(library) == []  # still stable-ABI with CUDA in it


def test_stub_library_finds_libcudart_by_rpath(stub_build, cuda):
    root, _, _ = stub_build
    needed, runpath = _dynamic(root / "mylib" / "_C.abi3.so")
    assert f"libcudart.so.{cuda.nvcc.version[0]}" in needed
    assert str(cuda.cudart_dir) in runpath
    code = "import torch, mylib\nprint(torch.ops.mylib.foo(torch.ones(2)).shape)"
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.stdout.strip() == "torch.Size([2])", run.stderr


def test_nvcc_compiles_host_code_with_the_build_s_compiler(stub_build):
    """-ccbin: nvcc's host passes ran through $CXX (the logging wrapper), not the first gcc on PATH."""
    _, _, log = stub_build
    host_passes = [line for line in log.splitlines() if "__CUDACC__" in line or "cudafe1" in line]
    assert host_passes, log[-2000:]


def test_reference_set_links_its_cuda_kernels(cuda):
    build = subprocess.run(
        [sys.executable, "-m", "opgen", "build"],
        cwd=EXAMPLE,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert build.returncode == 0, build.stdout[-6000:] + build.stderr[-2000:]
    kernels = sorted(path.stem for path in (EXAMPLE / "csrc" / "cuda").glob("*.cu"))
    assert f"opgen: CUDA: linked {len(kernels)} .cu file(s)" in build.stdout
    assert f"archs {cuda.arch_labels}" in build.stdout
    library = EXAMPLE / "example_ops" / "_C.abi3.so"
    defined = _defined(library)
    for op in kernels:  # one .cu per op
        assert f"example::{op}_cuda(" in defined, op
    needed, runpath = _dynamic(library)
    assert f"libcudart.so.{cuda.nvcc.version[0]}" in needed and str(cuda.cudart_dir) in runpath
    weak = {
        line.split()[-1]
        for line in _symbols(library, "--undefined-only").splitlines()
        if line.split()[0] == "w"
    }
    if torch.version.cuda is None:  # Note [CUDA on a CPU torch]
        assert "aoti_torch_get_current_cuda_stream" in weak
    code = "import torch, example_ops\nprint(torch.ops.example.vector_add(torch.ones(3), torch.ones(3)).tolist())"
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=EXAMPLE,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.stdout.strip() == "[2.0, 2.0, 2.0]", run.stderr


# ---- pybind + CUDA under a faked CUDA torch ---------------------------------

# A classic CUDA kernel without c10::cuda (which only a CUDA torch ships): it
# links here against the CPU torch's ATen and the real libcudart.
_KERNEL = """#include "../foo.h"

#include <cuda_runtime.h>

namespace mylib {
namespace {

__global__ void twice(const float* x, float* y, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = 2 * x[i];
}

}  // namespace

at::Tensor foo_cuda(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "mylib::foo: x must be a CUDA tensor");
  at::Tensor y = x.clone();
  twice<<<1, 256>>>(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel());
  TORCH_CHECK(cudaGetLastError() == cudaSuccess, "mylib::foo: launch failed");
  return y;
}

}  // namespace mylib
"""


def _fake_cuda_torch(folder: Path, cxx: str) -> Path:
    """torch's headers and libraries plus empty libc10_cuda/libtorch_cuda, as a CUDA torch has."""
    (folder / "lib").mkdir(parents=True)
    (folder / "include").symlink_to(TORCH / "include")
    for lib in (TORCH / "lib").iterdir():
        (folder / "lib" / lib.name).symlink_to(lib)
    for name in ("libc10_cuda.so", "libtorch_cuda.so"):
        subprocess.run(
            [cxx, "-shared", "-x", "c", os.devnull, "-o", str(folder / "lib" / name)], check=True
        )
    return folder


@pytest.fixture(scope="module")
def pybind_project(tmp_path_factory, cuda):
    root = tmp_path_factory.mktemp("pybind_cuda")
    (root / "opgen.toml").write_text(
        '[project]\nnamespace = "mylib"\npackage = "mylib"\n\n[options]\nbackend = "cpp"\ncpp_target = "classic"\n'
    )
    opgen("new", "mylib::foo", "--devices", "cpu,cuda", cwd=root)
    spec = root / "ops" / "foo.toml"
    spec.write_text(spec.read_text().replace('backend = "cpp"', 'backend = "cpp"\npybind = true'))
    opgen("generate", cwd=root)
    (root / "csrc" / "cuda" / "foo.cu").write_text(_KERNEL)
    real = find_toolchain()
    tools = replace(
        real,
        torch_dir=_fake_cuda_torch(root.parent / f"{root.name}_torch", real.cxx),
        torch_cuda=cuda.nvcc.version_text,
    )
    return root, tools


def _ninja(root: Path, tools) -> subprocess.CompletedProcess:
    ninja_file = write_ninja(root, plan_build(load_project(root), tools))
    return subprocess.run(
        [tools.ninja, "-f", str(ninja_file), "-k", "0", "-j2"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_pybind_module_defines_its_cuda_kernel(pybind_project):
    root, tools = pybind_project
    build = _ninja(root, tools)
    assert build.returncode == 0, build.stdout[-6000:]
    (module,) = (root / "mylib").glob("_pybind*.so")
    assert (root / "build" / "link_check" / module.name).is_file()
    assert "foo_cuda" not in _symbols(module, "--undefined-only")
    assert "mylib::foo_cuda(at::Tensor const&)" in _defined(module)
    code = (
        "import torch, mylib._pybind as p\nprint(sorted(n for n in dir(p) if n.startswith('foo')))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.stdout.strip() == "['foo_cpu', 'foo_cuda']", run.stdout + run.stderr


def test_pybind_link_check_catches_a_missing_kernel(pybind_project):
    """Note [pybind link]: with the kernel gone the build fails, not the import."""
    root, tools = pybind_project
    kernel = root / "csrc" / "cuda" / "foo.cu"
    kernel.write_text(_KERNEL.replace("at::Tensor foo_cuda(", "at::Tensor foo_cuda_renamed("))
    try:
        build = _ninja(root, tools)
    finally:
        kernel.write_text(_KERNEL)
    assert build.returncode != 0
    assert re.search(
        r"FAILED: (?:\[code=\d+\] )?build/link_check/_pybind\S*\.so", build.stdout
    ), build.stdout[-4000:]
    assert "undefined reference to `mylib::foo_cuda(at::Tensor const&)'" in build.stdout
