"""The generated dynamic-shape and export tests say so when they can grow no size of their
sample: an op that accepts one size only passes them without proving its fake kernel symbolic."""

from __future__ import annotations

from pathlib import Path

import pytest

from opgen.generate import generate

from _support import run_generated_tests

_CONFIG = """\
[project]
namespace = "grow"
package = "grow_ops"

[options]
backend = "python"
compile_backend = "aot_eager"
"""

_SPEC = """\
name = "grow::{name}"
schema = "(Tensor x) -> Tensor"
devices = ["cpu"]

[fake]
like = "x"

[test]
reference = "x * 2"

[[test.samples]]
x = {{shape = [3, 4]}}
"""

_KERNEL = """\
from torch import Tensor


def {name}(x: Tensor) -> Tensor:
{check}    return x * 2
"""

_FIXED = """\
    if tuple(x.shape) != (3, 4):
        raise ValueError(f"grow::fixed takes a 3x4 tensor, not {tuple(x.shape)}")
"""


@pytest.mark.slow  # runs the generated tests (torch.compile, torch.export)
def test_tests_that_grow_no_size_warn_and_fail_under_error(tmp_path: Path) -> None:
    (tmp_path / "opgen.toml").write_text(_CONFIG)
    (tmp_path / "ops").mkdir()
    for name in ("fixed", "free"):
        (tmp_path / "ops" / f"{name}.toml").write_text(_SPEC.format(name=name))
    assert generate(tmp_path).written
    for name, check in (("fixed", _FIXED), ("free", "")):
        kernel = _KERNEL.format(name=name, check=check)
        (tmp_path / "grow_ops" / "kernels" / f"{name}.py").write_text(kernel)
    output = run_generated_tests(
        tmp_path,
        "-rf",
        "-W",
        "error::opgen.testing.CoverageWarning",
        "-k",
        "test_dynamic_shapes or test_export",
    )
    assert "2 failed, 2 passed" in output, output
    for test in ("test_dynamic_shapes", "test_export"):
        assert f"FAILED tests/test_fixed.py::{test}" in output, output
    assert "ShapeCoverageWarning: the dynamic-shape test of ops/fixed.toml grows no size" in output
    assert "refused it grown: ValueError: grow::fixed takes a 3x4 tensor, not (" in output
    assert "the export test of ops/fixed.toml grows no size" in output, output
