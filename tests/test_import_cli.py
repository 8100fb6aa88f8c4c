"""`opgen import` without a compiler: the specs it writes, its kernel files, and its safety."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from _cpp_support import opgen

FIXTURES = Path(__file__).parent / "data" / "import"


def _copy(name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    return root


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".opgen" not in p.parts
    }


@pytest.fixture
def muladd(tmp_path: Path) -> Path:
    root = _copy("muladd", tmp_path)
    opgen("import", "extension_cpp", cwd=root)
    return root


def test_specs_keep_the_schema_verbatim_with_devices_backend_and_target(muladd: Path):
    spec = (muladd / "ops/myadd_out.toml").read_text()
    assert 'name = "extension_cpp::myadd_out"' in spec
    assert 'schema = "(Tensor a, Tensor b, Tensor(a!) out) -> ()"' in spec
    assert 'devices = ["cpu"]' in spec and 'backend = "cpp"' in spec
    config = (muladd / "opgen.toml").read_text()
    assert 'cpp_target = "classic"' in config  # the extension uses ATen
    assert 'package = "extension_cpp_ops"' in config  # extension_cpp/ is the user's package
    mymuladd = (muladd / "ops/mymuladd.toml").read_text()
    assert "extension_cpp/ops.py" in mymuladd  # the fake and autograd functions, named in a note


def test_kernel_files_call_the_users_functions_and_a_unit_compiles_them(muladd: Path):
    kernel = (muladd / "csrc/cpu/myadd_out.cpp").read_text()
    assert (
        "void opgen_user_myadd_out_cpu(const at::Tensor& a, const at::Tensor& b, at::Tensor& out);"
        in kernel
    )
    assert "::extension_cpp::opgen_user_myadd_out_cpu(a, b, out_arg);" in kernel
    unit = (muladd / "csrc/cpu/imported/extension_cpp_csrc_muladd.cpp").read_text()
    assert '#include "../../../extension_cpp/csrc/muladd.cpp"' in unit
    assert "#define mymuladd_cpu opgen_user_mymuladd_cpu" in unit
    assert "#define TORCH_LIBRARY(ns, m)" in unit
    # the user's files are untouched
    assert _tree(muladd / "extension_cpp") == {
        k.removeprefix("extension_cpp/"): v
        for k, v in _tree(FIXTURES / "muladd").items()
        if k.startswith("extension_cpp/")
    }


def test_a_rerun_is_idempotent(muladd: Path):
    before = _tree(muladd)
    run = opgen("import", "extension_cpp", cwd=muladd)
    assert "0 created, 0 updated" in run.stdout
    assert _tree(muladd) == before


def test_an_edited_spec_is_kept_unless_force(muladd: Path):
    spec = muladd / "ops/mymul.toml"
    spec.write_text(spec.read_text().replace('# reference = "..."', 'reference = "a * b"'))
    kernel = muladd / "csrc/cpu/mymul.cpp"
    kernel.write_text(kernel.read_text() + "// mine\n")
    before = _tree(muladd)
    run = opgen("import", "extension_cpp", cwd=muladd, check=False)
    assert run.returncode == 1
    assert "ops/mymul.toml" in run.stderr and "--force" in run.stderr
    assert _tree(muladd) == before
    opgen("import", "extension_cpp", "--force", cwd=muladd)
    assert 'reference = "a * b"' not in spec.read_text()
    assert kernel.read_text().endswith("// mine\n")  # a kernel file is never replaced


def test_into_writes_nothing_outside_the_project(tmp_path: Path):
    root = _copy("muladd", tmp_path)
    before = _tree(root)
    opgen("import", "extension_cpp", "--into", "opgen_ops", cwd=root)
    after = _tree(root)
    assert {k: v for k, v in after.items() if not k.startswith("opgen_ops/")} == before
    unit = (root / "opgen_ops/csrc/cpu/imported/extension_cpp_csrc_muladd.cpp").read_text()
    assert '#include "../../../../extension_cpp/csrc/muladd.cpp"' in unit
    assert 'package = "extension_cpp"' in (root / "opgen_ops/opgen.toml").read_text()


@pytest.mark.parametrize(
    ("link", "into"),
    [("into", "into"), ("into", "into/deeper"), ("real/link", "real/link/project")],
)
def test_into_through_a_symlink_is_refused_and_writes_nothing_anywhere(
    tmp_path: Path, link: str, into: str
):
    """`into -> /elsewhere` in a checkout used to receive the whole project."""
    root = _copy("muladd", tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(outside, target_is_directory=True)
    before = _tree(root)
    run = opgen("import", "extension_cpp", "--into", into, cwd=root, check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.startswith(f"{link}: error: is a symlink (to {outside})"), run.stderr
    assert "hint: replace the symlink with a real folder" in run.stderr
    assert list(outside.iterdir()) == [], "opgen import wrote outside the project"
    assert _tree(root) == before


def test_into_a_new_folder_that_fails_leaves_no_folder(tmp_path: Path):
    root = _copy("muladd", tmp_path)
    run = opgen("import", "setup.py", "--into", "new/project", cwd=root, check=False)
    assert run.returncode == 1 and "no op registrations found" in run.stderr
    assert not (root / "new").exists()
    opgen("import", "extension_cpp", "--into", "new/project", cwd=root)
    assert (root / "new/project/ops/mymuladd.toml").is_file() and not (root / "ops").exists()


def test_unreadable_def_is_reported_and_skipped_and_exits_1(tmp_path: Path):
    (tmp_path / "ext.cpp").write_text(
        "#include <torch/all.h>\nTORCH_LIBRARY(mylib, m) {\n  m.def(kSchema);\n"
        '  m.def("ok(Tensor x) -> Tensor");\n}\n'
    )
    run = opgen("import", "ext.cpp", cwd=tmp_path, check=False)
    assert run.returncode == 1
    assert "ext.cpp:3: error: cannot read this def's schema" in run.stderr
    assert (tmp_path / "ops/ok.toml").is_file()


def test_a_macro_namespace_asks_for_namespace_and_writes_nothing(tmp_path: Path):
    root = _copy("vllm", tmp_path)
    before = _tree(root)
    run = opgen("import", "csrc", cwd=root, check=False)
    assert run.returncode == 1 and "--namespace" in run.stderr
    assert _tree(root) == before
    opgen("import", "csrc", "--namespace", "vllm_fix", cwd=root)
    spec = (root / "ops/scaled_copy.toml").read_text()
    assert 'schema = "(Tensor! result, Tensor input, Tensor!? scale, SymInt block) -> ()"' in spec
    kernel = (root / "csrc/cpu/scaled_copy.cpp").read_text()
    assert "::opgen_user_scaled_copy(result_arg, input, scale_arg, block.expect_int());" in kernel


def test_python_kernels_are_moved_into_the_kernel_files(tmp_path: Path):
    root = _copy("pyops", tmp_path)
    opgen("import", "pyext", cwd=root)
    spec = (root / "ops/scaled_add.toml").read_text()
    assert 'schema = "(Tensor a, Tensor b, float alpha=1.0) -> Tensor"' in spec
    assert 'backend = "python"' in spec
    kernel = (root / "pyext_ops/kernels/numpy_sin.py").read_text()
    assert "import numpy as np" in kernel
    assert "return torch.from_numpy(np.sin(x_np))" in kernel
    assert "register_autograd" in (root / "ops/numpy_sin.toml").read_text()


def test_a_kernel_generated_code_cannot_call_is_reported_with_the_fix(tmp_path: Path):
    (tmp_path / "ext.cpp").write_text(
        "#include <torch/all.h>\n"
        "namespace mylib {\n"
        "static at::Tensor f_cpu(const at::Tensor& x) { return x; }\n"
        "}\n"
        'TORCH_LIBRARY(mylib, m) { m.def("f(Tensor x) -> Tensor"); m.def("g(Tensor x) -> Tensor"); }\n'
        'TORCH_LIBRARY_IMPL(mylib, CPU, m) { m.impl("f", &mylib::f_cpu); m.impl("g", &g_cpu); }\n'
    )
    run = opgen("import", "ext.cpp", cwd=tmp_path, check=False)
    assert run.returncode == 1
    assert "ext.cpp:3: error: f_cpu is static" in run.stderr
    assert "ext.cpp:6: error: no function is named g_cpu" in run.stderr
    assert "opgen: placeholder" in (tmp_path / "csrc/cpu/f.cpp").read_text()
    assert not (tmp_path / "csrc/cpu/imported").exists()


def test_a_moved_python_kernel_names_the_helpers_it_leaves_behind(tmp_path: Path):
    (tmp_path / "mod.py").write_text(
        "import torch\n\nSCALE = 2.0\n\n\ndef _helper(x):\n    return x * SCALE\n\n\n"
        '@torch.library.custom_op("helped::f", mutates_args=())\n'
        "def f(x: torch.Tensor) -> torch.Tensor:\n    return _helper(x) + SCALE\n"
    )
    run = opgen("import", "mod.py", cwd=tmp_path)
    assert "mod.py:11: warning: f uses SCALE, _helper, defined in mod.py" in run.stderr
    assert "return _helper(x) + SCALE" in (tmp_path / "helped/kernels/f.py").read_text()
