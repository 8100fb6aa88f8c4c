"""Ops that take no tensor (factory ops): torch has no tensor to pick a device's kernel by, so
one kernel serves every device, registered for CompositeExplicitAutograd, on every backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from _cpp_support import opgen

_SPEC = """\
name = "fac::ramp"
schema = "{schema}"
devices = ["cpu"]
backend = "{backend}"

[fake]
expr = "torch.empty(n, dtype=dtype or torch.float32, device=device)"

[test]
reference = "torch.arange(n, dtype=dtype or torch.float32, device=device)"

[[test.samples]]
n = 5

[[test.samples]]
n = 3
dtype = "float64"
device = "cpu"
"""

_PYTHON_KERNEL = '''\
from __future__ import annotations

import torch
from torch import Tensor


def ramp(n: int, dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> Tensor:
    return torch.arange(n, dtype=dtype or torch.float32, device=device)
'''

# the C++ kernels make float32 on the CPU: the schema has no dtype or device to honour
_CPP_KERNEL = {
    "stable": """\
#include "../ramp.h"

namespace fac {

torch::stable::Tensor ramp_cpu(int64_t n) {
  auto out = torch::stable::empty({n}, torch::headeronly::ScalarType::Float);
  float* p = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i);
  return out;
}

}  // namespace fac
""",
    "classic": """\
#include "../ramp.h"

#include <ATen/ops/arange.h>

namespace fac {

at::Tensor ramp_cpu(c10::SymInt n) { return at::arange(n.guard_int(__FILE__, __LINE__), at::kFloat); }

}  // namespace fac
""",
}


def _project(root: Path, schema: str, backend: str, target: str = "stable") -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(
        f'[project]\nnamespace = "fac"\npackage = "fac"\n\n[options]\ncpp_target = "{target}"\n'
    )
    spec = _SPEC.format(schema=schema, backend=backend)
    if "dtype" not in schema:
        spec = spec.split("\n[[test.samples]]\nn = 3")[0]
        spec = spec.replace("dtype or torch.float32", "torch.float32").replace(", device=device", "")
    (root / "ops" / "ramp.toml").write_text(spec)
    opgen("generate", cwd=root)
    return root


@pytest.mark.slow
def test_a_python_factory_op_honours_its_dtype_and_device(tmp_path: Path) -> None:
    root = _project(
        tmp_path, "(SymInt n, ScalarType? dtype=None, Device? device=None) -> Tensor", "python"
    )
    assert '"CompositeExplicitAutograd"' in (root / "fac" / "_generated" / "ramp.py").read_text()
    (root / "fac" / "kernels" / "ramp.py").write_text(_PYTHON_KERNEL)
    run = opgen("test", "-q", cwd=root, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.slow
@pytest.mark.parametrize("target", ["stable", "classic"])
def test_a_cpp_factory_op_builds_and_passes_its_tests(tmp_path: Path, target: str) -> None:
    root = _project(tmp_path, "(SymInt n) -> Tensor", "cpp", target)
    registration = (root / "csrc" / "registration_cpu.cpp").read_text()
    assert "CompositeExplicitAutograd, m)" in registration
    (root / "csrc" / "cpu" / "ramp.cpp").write_text(_CPP_KERNEL[target])
    run = opgen("test", "-q", cwd=root, check=False, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_cpp_factory_op_lists_only_the_cpu_kernel(tmp_path: Path) -> None:
    (tmp_path / "ops").mkdir()
    (tmp_path / "opgen.toml").write_text('[project]\nnamespace = "fac"\npackage = "fac"\n')
    spec = _SPEC.format(schema="(SymInt n) -> Tensor", backend="cpp")
    (tmp_path / "ops" / "ramp.toml").write_text(spec.replace('["cpu"]', '["cpu", "cuda"]'))
    run = opgen("generate", cwd=tmp_path, check=False)
    assert run.returncode == 1
    assert "ops/ramp.toml:3: error: this op takes no tensor" in run.stderr
