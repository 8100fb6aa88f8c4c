"""The dtype trap: a C++ stub's dtype guard follows the spec's tests, fenced so that it changes without conflicts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from opgen.generate import generate
from opgen.scaffold.new_op import new_op

from _cpp_support import opgen

SCHEMA = "(Tensor x, float alpha) -> Tensor"
FENCE = re.compile(r"  // opgen: begin checks \(regenerated from ops/scale.toml; edit the spec, not these lines\)\n(.*?)  // opgen: end checks\n", re.S)


def _cpp_project(root: Path) -> Path:
    (root / "opgen.toml").write_text('[project]\nnamespace = "mylib"\npackage = "mylib"\n\n[options]\nbackend = "cpp"\n')
    new_op(root, "mylib::scale", SCHEMA)
    return root


def _guard(kernel: Path) -> str:
    (checks,) = FENCE.findall(kernel.read_text())
    return next(line for line in checks.splitlines() if "scalar_type()" in line)


def _edit_body(kernel: Path) -> None:
    """The user makes the starter a real kernel: x * alpha."""
    text = kernel.read_text()
    assert "dst[i] = src[i];" in text
    kernel.write_text(text.replace("dst[i] = src[i];", "dst[i] = static_cast<T>(src[i] * alpha);"))


def _set_reference_and_grad(spec: Path, grad: bool) -> None:
    text = re.sub(r'^reference = .*$', 'reference = "x * alpha"', spec.read_text(), flags=re.M)
    if grad:
        text = text.replace('# [grad]\n# x = "grad * ..."        # one formula per differentiable input\n', '[grad]\nx = "grad * alpha"\n')
        assert "[grad]\nx = " in text
    spec.write_text(text)


def test_grad_adds_float64_to_the_guard_without_a_conflict(tmp_path: Path) -> None:
    root = _cpp_project(tmp_path)
    kernel = root / "csrc" / "cpu" / "scale.cpp"
    assert "Double" not in _guard(kernel)  # the spec tests float32 only
    _edit_body(kernel)
    _set_reference_and_grad(root / "ops" / "scale.toml", grad=True)
    result = generate(root)
    actions = {c.path: c.action for c in result.changes}
    assert actions["csrc/cpu/scale.cpp"] == "merge" and not result.failed, actions
    guard = _guard(kernel)
    assert "ScalarType::Float" in guard and "ScalarType::Double" in guard  # gradcheck runs in float64
    assert "static_cast<T>(src[i] * alpha)" in kernel.read_text() and "<<<<<<<" not in kernel.read_text()


def test_new_dtypes_reach_the_guard_and_an_edit_inside_the_fence_is_undone(tmp_path: Path) -> None:
    root = _cpp_project(tmp_path)
    kernel = root / "csrc" / "cpu" / "scale.cpp"
    kernel.write_text(kernel.read_text().replace("must be float32", "must be single precision"))
    spec = root / "ops" / "scale.toml"
    spec.write_text(spec.read_text().replace('# dtypes = ["float32", "float64"]', 'dtypes = ["float32", "bfloat16"]'))
    result = generate(root)
    change = next(c for c in result.changes if c.path == "csrc/cpu/scale.cpp")
    assert change.action == "merge" and "rewrote the `opgen: checks` lines you edited" in change.note
    assert "BFloat16" in _guard(kernel) and "single precision" not in kernel.read_text()
    assert "single precision" in (root / ".opgen" / "backup" / "csrc" / "cpu" / "scale.cpp").read_text()
    assert generate(root, check=True).stale == []


@pytest.mark.slow
def test_grad_on_an_edited_cpp_op_builds_and_passes(tmp_path: Path) -> None:
    """The first hour: an op, a real body, then [grad]: build and tests pass with no conflict and no edit of the checks."""
    root = _cpp_project(tmp_path)
    kernel = root / "csrc" / "cpu" / "scale.cpp"
    _edit_body(kernel)
    spec = root / "ops" / "scale.toml"
    _set_reference_and_grad(spec, grad=False)
    first = opgen("test", cwd=root)
    assert " passed" in first.stdout and "gradcheck" not in first.stdout
    _set_reference_and_grad(spec, grad=True)
    regen = opgen("generate", cwd=root)
    assert "merged         csrc/cpu/scale.cpp" in regen.stdout and "0 conflicts" in regen.stdout
    run = opgen("test", "-vv", cwd=root)
    assert "building first" in run.stdout and "test_gradcheck[cpu-x] PASSED" in run.stdout, run.stdout[-4000:]


WRITES = re.compile(r"  // opgen: begin checks \(regenerated from ops/fill\.toml; edit the spec, not these lines\)\n(.*?)  // opgen: end checks\n", re.S)


def test_strided_writes_drops_the_contiguity_check_for_good(tmp_path: Path) -> None:
    """A kernel that walks the strides of what it writes names it in `strided_writes`; editing the
    check out of the fence instead is undone by the next run."""
    (tmp_path / "opgen.toml").write_text('[project]\nnamespace = "mylib"\npackage = "mylib"\n\n[options]\nbackend = "cpp"\n')
    new_op(tmp_path, "mylib::fill", "(Tensor(a!) out, Tensor x) -> ()")
    kernel, spec = tmp_path / "csrc" / "cpu" / "fill.cpp", tmp_path / "ops" / "fill.toml"
    contiguous = 'STD_TORCH_CHECK(out.is_contiguous(), "mylib::fill: out must be contiguous");'
    (checks,) = WRITES.findall(kernel.read_text())
    assert contiguous in checks
    kernel.write_text(kernel.read_text().replace(f"  {contiguous}\n", ""))  # edited out: put back
    assert not generate(tmp_path).failed
    assert contiguous in WRITES.findall(kernel.read_text())[0]
    spec.write_text(spec.read_text().replace('backend = "cpp"', 'backend = "cpp"\nstrided_writes = ["out"]'))
    assert not generate(tmp_path).failed
    (checks,) = WRITES.findall(kernel.read_text())
    assert "is_contiguous" not in checks and "out.is_cpu()" in checks
    # the user's strided body and later spec changes keep it out
    kernel.write_text(kernel.read_text().replace("}  // namespace mylib", "// walks out's strides\n}  // namespace mylib"))
    spec.write_text(re.sub(r"(?m)^# dtypes = .*$", 'dtypes = ["float32", "float64"]', spec.read_text()))
    for _ in range(2):
        assert not generate(tmp_path).failed
        text = kernel.read_text()
        assert "is_contiguous" not in WRITES.findall(text)[0] and "// walks out's strides" in text
    spec.write_text(spec.read_text().replace('strided_writes = ["out"]', "strided_writes = true"))
    assert not generate(tmp_path).failed
    assert "is_contiguous" not in WRITES.findall(kernel.read_text())[0]
