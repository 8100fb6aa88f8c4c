"""Every generated and hand-written .cu compiles with nvcc (no GPU needed; CI has nvcc)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from opgen.build.ninja import find_toolchain, plan_build, write_ninja
from opgen.project.load import load_project

from _cpp_support import opgen
from _support import has_nvcc

# CI must compile every .cu: there a missing nvcc fails these tests instead of skipping them.
pytestmark = [
    pytest.mark.skipif(not has_nvcc() and not os.environ.get("CI"), reason="nvcc is not installed"),
    pytest.mark.slow,  # nvcc: several seconds a file
]


def _check_cuda(root: Path) -> subprocess.CompletedProcess:
    tools = find_toolchain()
    plan = plan_build(load_project(root), tools, check_cuda=True)
    assert plan.cuda_sources, "no .cu files found"
    ninja = write_ninja(root, plan)
    target = "check_cuda" if not plan.cuda_linked else plan.library
    return subprocess.run([tools.ninja, "-f", str(ninja), "-j2", "-k", "0", target], cwd=root, capture_output=True, text=True, timeout=900)


def test_generated_example_cu_files_compile(built_example):
    """The session's build of the reference set compiled every .cu with nvcc (it fails otherwise)."""
    sources = sorted((built_example.root / "csrc" / "cuda").glob("*.cu"))
    assert sources
    for source in sources:
        assert list((built_example.root / "build").rglob(f"{source.name}.o")), f"{source.name} was not compiled"
        assert f"NVCC csrc/cuda/{source.name}" in built_example.output


@pytest.mark.parametrize("target", ["stable", "classic"])
def test_fresh_stub_cu_compiles(tmp_path, target):
    (tmp_path / "opgen.toml").write_text(f'[project]\nnamespace = "mylib"\npackage = "mylib"\n\n[options]\nbackend = "cpp"\ncpp_target = "{target}"\n')
    opgen("new", "mylib::foo", "--devices", "cpu,cuda", cwd=tmp_path)
    opgen("new", "mylib::scale", "--devices", "cuda", "--schema", "(Tensor x, Tensor? w, SymInt n, float alpha) -> (Tensor, Tensor)", cwd=tmp_path)
    result = _check_cuda(tmp_path)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
