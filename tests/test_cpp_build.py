"""End to end: `opgen new --backend cpp`, `opgen build`, the generated tests; rebuilds and errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opgen.build.ninja import find_toolchain
from opgen.build.run import foreign_symbols

from _cpp_support import opgen, python

pytestmark = pytest.mark.slow  # `opgen build` compiles the CUDA stub where nvcc is installed


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cpp_e2e")
    opgen("new", "mylib::foo", "--backend", "cpp", "--devices", "cpu,cuda", cwd=root)
    opgen("build", cwd=root)
    return root


def test_fresh_project_tests_pass(project):
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=project, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout


def test_layout(project):
    for path in ("csrc/foo.h", "csrc/registration.cpp", "csrc/registration_cpu.cpp", "csrc/registration_cuda.cpp",
                 "csrc/cpu/foo.cpp", "csrc/cuda/foo.cu", "mylib/_library.py", "mylib/_generated/foo.py", "setup.py",
                 "build/build.ninja", "mylib/_C.abi3.so"):
        assert (project / path).is_file(), path


def test_stable_build_imports_no_torch_cpp_symbols(project):
    assert foreign_symbols(project / "mylib" / "_C.abi3.so") == []


def test_nothing_to_do_then_one_file_after_touch(project):
    quiet = opgen("build", cwd=project)
    assert "CXX" not in quiet.stdout
    (project / "csrc/cpu/foo.cpp").touch()
    again = opgen("build", cwd=project)
    assert "CXX csrc/cpu/foo.cpp" in again.stdout
    assert again.stdout.count("CXX ") == 1, again.stdout


def test_compiler_error_names_the_users_file(project, tmp_path):
    kernel = project / "csrc/cpu/foo.cpp"
    good = kernel.read_text()
    try:
        kernel.write_text(good.replace("return out;", "return out  // missing semicolon\n", 1))
        result = opgen("build", cwd=project, check=False)
    finally:
        kernel.write_text(good)
    assert result.returncode == 1
    assert "csrc/cpu/foo.cpp:" in result.stdout + result.stderr
    assert "error: build failed" in result.stderr
    opgen("build", cwd=project)


def test_cuda_is_reported_on_cpu_torch(project):
    """Note [CUDA build modes]: a stable CUDA stub links on a CPU torch when nvcc is there."""
    import torch

    if torch.version.cuda is not None:
        pytest.skip("torch has CUDA")
    os.utime(project / "csrc" / "cuda" / "foo.cu")  # the build before this one is up to date
    out = opgen("build", cwd=project).stdout
    if find_toolchain().cuda is None:
        assert "CUDA skipped: no CUDA toolkit found" in out
    else:
        assert "CUDA: linked 1 .cu file(s)" in out


def test_cpu_only_builds_no_cuda(project):
    out = opgen("build", "--cpu-only", cwd=project).stdout
    assert "CPU-only build (--cpu-only): 1 .cu file(s) not built" in out
    assert "NVCC" not in out
    opgen("build", cwd=project)


def test_unbuilt_library_says_run_opgen_build(tmp_path):
    opgen("new", "other::bar", "--backend", "cpp", cwd=tmp_path)
    result = python("import other", cwd=tmp_path)
    assert result.returncode == 1
    assert "run `opgen build`" in result.stderr
