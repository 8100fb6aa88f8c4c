"""A fresh op made with `opgen new --schema` works at once, on both backends (Note [Starter bodies])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from opgen.api.copy_plan import Param, copy_plan
from opgen.scaffold.new_op import new_op

from _cpp_support import opgen

# op -> schema: the common cases of a first op
SCHEMAS = {
    "scale": "(Tensor x, float alpha) -> Tensor",
    "pair": "(Tensor a, Tensor b) -> (Tensor, Tensor)",
    "write": "(Tensor(a!) out, Tensor x) -> ()",
    "first": "(Tensor[] xs) -> Tensor",
    "split": "(Tensor x, Tensor? w, int k) -> Tensor[]",
    "update": "(Tensor x, Tensor(a!) state) -> Tensor",  # writes an argument and returns
}

# Each class of schema `opgen new --schema` accepts: it generates, on both backends. Those
# with a copy-through starter run in the end-to-end tests below (SCHEMAS).
SCHEMA_CLASSES = [
    "(Tensor x, Tensor(a!) state) -> Tensor",
    "(Tensor x, Tensor(a!) s) -> (Tensor, Tensor)",
    "(Tensor x, Tensor(a!) s) -> Tensor[]",
    "(Tensor x, Tensor(a!) s, Tensor(b!) t) -> Tensor",
    "(Tensor x, Tensor(a!)? s) -> Tensor",
    "(Tensor x, Tensor(a!) s) -> int",
    "(Tensor(a!) x) -> Tensor(a!)",
    "(Tensor x, *, Tensor(a!) out) -> Tensor(a!)",
    "(Tensor(a) x) -> Tensor(a)",
    "(Tensor[](a!) xs, Tensor y) -> ()",
    "(Tensor x) -> (Tensor, int)",
    "(Tensor x) -> Tensor?",
    "(Tensor x) -> int[]",
    "(Tensor x, Layout layout, MemoryFormat memory_format=contiguous_format) -> Tensor",
]


@pytest.mark.parametrize(
    "params, returns, reference, body, fake",
    [
        ([Param("x", "Tensor"), Param("alpha", "float")], ["Tensor"], "x.clone()", ["return x.clone()"], ("like", ("x",))),
        ([Param("a", "Tensor"), Param("b", "Tensor")], ["Tensor", "Tensor"], "(a.clone(), a.clone())", ["return a.clone(), a.clone()"], ("like", ("a", "a"))),
        ([Param("out", "Tensor", True), Param("x", "Tensor")], [], "x.clone()", ["out.copy_(x)"], ("like", ())),
        ([Param("x", "Tensor"), Param("s", "Tensor", True)], ["Tensor"], "(s.copy_(x), x.clone())[-1]", ["s.copy_(x)", "return x.clone()"], ("like", ("x",))),
        ([Param("xs", "Tensor[]")], ["Tensor"], "xs[0].clone()", ["return xs[0].clone()"], ("expr", ("xs[0].new_empty(xs[0].shape)",))),
        ([Param("x", "Tensor"), Param("w", "Tensor?")], ["Tensor[]"], "[x.clone()]", ["return [x.clone()]"], ("expr", ("[x.new_empty(x.shape)]",))),
    ],
)
def test_copy_plan(params, returns, reference, body, fake) -> None:
    plan = copy_plan(params, returns)
    assert plan is not None
    assert (plan.reference, list(plan.python_body()), plan.fake()) == (reference, body, fake)


@pytest.mark.parametrize(
    "params, returns",
    [
        ([Param("x", "Tensor?")], ["Tensor"]),  # only an optional tensor to read
        ([Param("x", "Tensor")], []),  # returns nothing and mutates nothing
        ([Param("x", "Tensor", True)], []),  # in place: nothing else to copy from
    ],
)
def test_no_copy_plan(params, returns) -> None:
    assert copy_plan(params, returns) is None


@pytest.mark.parametrize("target", ["stable", "classic"])
def test_stubs_show_the_three_things_a_kernel_does(tmp_path: Path, target: str) -> None:
    (tmp_path / "opgen.toml").write_text(f'[project]\nnamespace = "mylib"\npackage = "mylib"\n\n[options]\nbackend = "cpp"\ncpp_target = "{target}"\n')
    new_op(tmp_path, "mylib::scale", SCHEMAS["scale"], devices=["cpu", "cuda"])
    cpu = (tmp_path / "csrc/cpu/scale.cpp").read_text()
    alloc, parallel = ("torch::stable::empty_like", "torch::stable::parallel_for") if target == "stable" else ("at::empty_like", "at::parallel_for")
    for text in (f"1. allocate the outputs: {alloc}(x)", "2. reach the data: x.const_data_ptr<float>()", "3. dispatch on dtype: switch (x.scalar_type())"):
        assert text in cpu
    # ... and the starter body does them
    assert f"= {alloc}(x_c);" in cpu and f"{parallel}(" in cpu and "x_c.const_data_ptr<T>()" in cpu
    assert "case " in cpu and "ScalarType::Double:" in cpu and "opgen: placeholder" not in cpu
    cuda = (tmp_path / "csrc/cuda/scale.cu").read_text()
    assert "i += stride" in cuda and "<<<blocks, threads, 0, stream>>>" in cuda and "scale_kernel_blocks(n, threads)" in cuda
    assert "getCurrentCUDAStream" in cuda if target == "classic" else "aoti_torch_get_current_cuda_stream" in cuda


@pytest.mark.parametrize("backend", ["python", "cpp"])
@pytest.mark.parametrize("schema", SCHEMA_CLASSES)
def test_new_generates_every_schema_class(tmp_path: Path, schema: str, backend: str) -> None:
    made = new_op(tmp_path, "mylib::op", schema, backend)
    assert (tmp_path / made.spec).is_file() and made.kernels


def test_an_op_that_writes_and_returns_gets_a_fake_rule_and_checks(tmp_path: Path) -> None:
    new_op(tmp_path, "mylib::update", SCHEMAS["update"], "python")
    spec = (tmp_path / "ops" / "update.toml").read_text()
    assert 'like = "x"' in spec and 'checks = ["state.numel() == x.numel()"]' in spec


def test_a_failed_new_names_no_file_it_did_not_write(tmp_path: Path) -> None:
    """The stable ABI has no Scalar: the error quotes the spec line `opgen new` composed."""
    run = subprocess.run(
        [sys.executable, "-m", "opgen", "new", "mylib::op", "--backend", "cpp", "--schema", "(Tensor x, Scalar s) -> Tensor"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 1 and list(tmp_path.iterdir()) == []
    assert run.stderr.startswith("error: argument 's': the stable C++ target cannot carry"), run.stderr
    assert 'in ops/op.toml line 2, `schema = "(Tensor x, Scalar s) -> Tensor"`, as `opgen new` would have written it: nothing was written' in run.stderr


def _project(root: Path, backend: str, target: str = "stable", devices: str = "cpu") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "opgen.toml").write_text(f'[project]\nnamespace = "mylib"\npackage = "mylib"\n\n[options]\nbackend = "{backend}"\ncpp_target = "{target}"\n')
    for name, schema in SCHEMAS.items():
        opgen("new", f"mylib::{name}", "--schema", schema, "--devices", devices, cwd=root)
    for name in SCHEMAS:
        assert '# placeholder: the starter kernels copy' in (root / "ops" / f"{name}.toml").read_text()
    return root


def _passes(root: Path, *build: str) -> None:
    if build:
        opgen("build", *build, cwd=root)
    run = subprocess.run([sys.executable, "-m", "opgen", "test", *(["--no-build"] if build else [])], cwd=root, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout
    assert "script_method" not in run.stdout, "torch's own deprecation warning reached the user"


@pytest.mark.slow
def test_fresh_python_ops_pass_their_tests(tmp_path: Path) -> None:
    _passes(_project(tmp_path, "python"))


@pytest.mark.slow
def test_fresh_stable_ops_build_and_pass_their_tests(tmp_path: Path) -> None:
    """Stable ABI, CPU and CUDA kernels (the CUDA starters compile-checked with nvcc where it is installed)."""
    root = _project(tmp_path, "cpp", "stable", "cpu,cuda")
    _passes(root, "--check-cuda")


@pytest.mark.slow
def test_fresh_classic_ops_build_and_pass_their_tests(tmp_path: Path) -> None:
    """Classic ATen (6-12 s a file to compile on two cores)."""
    _passes(_project(tmp_path, "cpp", "classic"), "-j", "2")


@pytest.mark.slow
def test_a_kernel_that_forgets_an_argument_it_writes_fails_the_reference_check(
    tmp_path: Path,
) -> None:
    """The op returns a value and writes `state`: the reference check compares both."""
    opgen("new", "mylib::update", "--schema", SCHEMAS["update"], cwd=tmp_path)
    run = opgen("test", "-q", "-k", "reference", cwd=tmp_path, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    kernel = tmp_path / "mylib" / "kernels" / "update.py"
    kernel.write_text(kernel.read_text().replace("    state.copy_(x)\n", ""))
    run = opgen("test", "-q", "-k", "reference", cwd=tmp_path, check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "state, which the op writes" in run.stdout
