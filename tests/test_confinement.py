"""Writes stay inside the project: no spec, option or symlink leads a write outside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests._support import run_cli

PROJECT = '[project]\nnamespace = "mylib"\npackage = "mylib"\n'
SPEC = """name = "mylib::foo"
schema = "(Tensor x) -> Tensor"
[fake]
like = "x"
[test]
reference = "torch.sin(x)"
[[test.samples]]
x = {shape = [3]}
"""


def _tree(root: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = path.read_bytes()
        else:
            out[rel] = "dir"
    return out


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(project root, a folder outside it holding a file that must never change)."""
    root = tmp_path / "project"
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(PROJECT, encoding="utf-8")
    (root / "ops" / "foo.toml").write_text(SPEC, encoding="utf-8")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me\n", encoding="utf-8")
    return root, outside


def _refused(root: Path, outside: Path, words: str = "outside the project") -> str:
    before_out, before_in = _tree(outside), _tree(root)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1, result.output
    assert words in result.stderr
    assert _tree(outside) == before_out, "a file outside the project was written"
    assert _tree(root) == before_in, "a refused run changed the project"
    return result.stderr


@pytest.mark.parametrize("folder", ["mylib", "mylib/_generated", "mylib/kernels", "tests", ".opgen"])
def test_output_folder_symlinked_outside(layout, folder: str) -> None:
    root, outside = layout
    link = root / folder
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)
    stderr = _refused(root, outside)
    assert folder in stderr


def test_ops_symlinked_outside(layout) -> None:
    root, outside = layout
    (root / "ops" / "foo.toml").rename(outside / "foo.toml")
    (root / "ops").rmdir()
    (root / "ops").symlink_to(outside, target_is_directory=True)
    _refused(root, outside)


def test_spec_symlinked_outside(layout) -> None:
    root, outside = layout
    (root / "ops" / "foo.toml").rename(outside / "foo.toml")
    (root / "ops" / "foo.toml").symlink_to(outside / "foo.toml")
    _refused(root, outside)


def test_dangling_symlink_outside(layout) -> None:
    root, outside = layout
    (root / "tests").symlink_to(outside / "not-yet", target_is_directory=True)
    _refused(root, outside)
    assert not (outside / "not-yet").exists()


def test_generated_file_symlinked_outside(layout) -> None:
    """After a first run, one generated file is replaced by a link out: the writer refuses."""
    root, outside = layout
    assert run_cli("generate", cwd=root).exit_code == 0
    (root / "ops" / "foo.toml").write_text(SPEC.replace("torch.sin(x)", "torch.cos(x)"), encoding="utf-8")
    target = root / "tests" / "test_foo.py"
    target.unlink()
    target.symlink_to(outside / "precious.txt")
    before = _tree(outside)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1, result.output
    assert "outside the project" in result.stderr
    assert _tree(outside) == before


def test_user_file_symlinked_outside(layout) -> None:
    root, outside = layout
    (root / "mylib" / "kernels").mkdir(parents=True)
    (root / "mylib" / "kernels" / "foo.py").symlink_to(outside / "precious.txt")
    before = _tree(outside)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1, result.output
    assert "outside the project" in result.stderr
    assert _tree(outside) == before


@pytest.mark.parametrize("value", ['"../elsewhere"', '"/tmp"', '"link"'])
def test_templates_option_outside(layout, value: str) -> None:
    root, outside = layout
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "opgen.toml").write_text(PROJECT + f"\n[options]\ntemplates = {value}\n", encoding="utf-8")
    stderr = _refused(root, outside)
    assert stderr.startswith("opgen.toml:6: error: options.templates")


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "x\\y"])
def test_op_name_path(layout, name: str) -> None:
    root, outside = layout
    (root / "ops" / "foo.toml").write_text(SPEC.replace("mylib::foo", f"mylib::{name}".replace("\\", "\\\\")), encoding="utf-8")
    _refused(root, outside, "looks like a file path")


def test_symlink_inside_project_is_refused_too(layout) -> None:
    """A link that stays inside can still lead into .git/ or ops/: opgen follows none."""
    root, _ = layout
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "tests").symlink_to(root / ".git" / "hooks", target_is_directory=True)
    before = _tree(root)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("tests: error: tests/ is a symlink")
    assert _tree(root) == before
    assert list((root / ".git" / "hooks").iterdir()) == []
