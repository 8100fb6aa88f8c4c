"""The opt-in checks that need private torch (Note [Private torch checks]), in their own module.

A project that lists them in `[options] private_torch` gets `<package>/_private_torch.py`, and
its generated tests check what they add: through the raw `torch.ops` handle, torch.func raises
an error naming the typed wrapper and forward mode reaches the [jvp] formulas; the raw handle
of a stable-ABI or `library` op bumps the versions of what it writes. Everything else the
project generates still uses public torch only. Without the option none of it is generated.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from _cpp_support import opgen

pytestmark = pytest.mark.slow  # builds a stable C++ op and runs generated tests

_OPTIONS = 'private_torch = ["raw_handle_transforms", "raw_handle_versions"]'


def _private_names(path: Path) -> set[str]:
    """`torch._x` attributes and `torch._C` uses in a generated Python file (torch._check aside)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "torch" and node.attr.startswith("_") and not node.attr.startswith("_check"):
                found.add(f"torch.{node.attr}")
    return found


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("private_torch")
    (root / "opgen.toml").write_text(
        f'[project]\nnamespace = "pt"\npackage = "pt"\n\n[options]\n{_OPTIONS}\n'
        'registration = "library"\n'
    )
    opgen("new", "pt::sine", cwd=root)  # Python: [grad] and [jvp] formulas
    opgen("new", "pt::cosine", "--backend", "cpp", cwd=root)
    opgen("new", "pt::fill", "--schema", "(Tensor x, Tensor(a!) out) -> ()", "--backend", "cpp", cwd=root)
    opgen("build", "-j", "2", cwd=root)
    return root


def test_generated_tests_check_what_the_opt_in_adds(project: Path) -> None:
    tests = (project / "tests" / "test_sine.py").read_text()
    assert "def test_torch_func_through_torch_ops_raises" in tests
    assert "raw_forward_ad=True" in tests
    assert "check_versions(OP," in (project / "tests" / "test_fill.py").read_text()
    run = subprocess.run(
        [sys.executable, "-m", "opgen", "test", "--no-build"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout


def test_private_names_live_in_the_opt_in_module_only(project: Path) -> None:
    package = project / "pt"
    assert _private_names(package / "_private_torch.py") >= {"torch._C"}
    for path in sorted(package.rglob("*.py")):
        if path.name != "_private_torch.py" and not path.name.startswith("_testing"):
            assert _private_names(path) == set(), path  # the test harness may use torch._dynamo


def test_without_the_option_nothing_private_is_generated(tmp_path: Path) -> None:
    opgen("new", "pt::sine", cwd=tmp_path)
    assert not (tmp_path / "pt" / "_private_torch.py").exists()
    tests = (tmp_path / "tests" / "test_sine.py").read_text()
    assert "test_torch_func_through_torch_ops_raises" not in tests
    assert "_private_torch" not in (tmp_path / "pt" / "__init__.py").read_text()
