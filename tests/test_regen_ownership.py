"""One test per ownership case of `opgen generate` (Note [Ownership] in opgen/targets/__init__.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opgen.cli import app
from opgen.generate import generate
from opgen.write.manifest import Manifest

KERNEL = "mylib/kernels/foo.py"
GENERATED = "mylib/_generated/foo.py"
TEST_FILE = "tests/test_foo.py"

_PROJECT = '[project]\nnamespace = "mylib"\npackage = "mylib"\n'


def _spec(schema: str = "(Tensor x) -> Tensor", devices: str = '["cpu"]', extra: str = "", name: str = "foo") -> str:
    return f'''name = "mylib::{name}"
schema = "{schema}"
doc = "The {name} op."
devices = {devices}
backend = "python"
{extra}
[grad]
x = "grad * x.cos()"

[fake]
like = "x"

[test]
reference = "torch.sin(x)"

[[test.samples]]
x = {{shape = [4, 3]}}
'''


def make_project(root: Path, **spec) -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(_PROJECT)
    (root / "ops/foo.toml").write_text(_spec(**spec))
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root (the state dir included), as bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def fill_kernel(root: Path) -> None:
    """The user replaces the `raise NotImplementedError` line with a body."""
    path = root / KERNEL
    lines = path.read_text().splitlines(True)
    index = next(i for i, line in enumerate(lines) if "raise NotImplementedError" in line)
    lines[index : index + 1] = ["    y = torch.sin(x)  # user body\n", "    return y\n"]
    path.write_text("".join(lines))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "proj")
    generate(root)
    return root


def _cli(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(root)
    return CliRunner().invoke(app, ["generate", *args])


def test_first_run_creates_and_second_run_changes_nothing(project: Path) -> None:
    before = snapshot(project)
    mtimes = {p: os.stat(project / p).st_mtime_ns for p in before}
    result = generate(project)
    assert set(result.counts()) == {"unchanged"}
    assert snapshot(project) == before
    assert {p: os.stat(project / p).st_mtime_ns for p in before} == mtimes  # ninja sees nothing new


def test_summary_names_every_kind(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _cli(project, monkeypatch)
    assert out.exit_code == 0
    assert "opgen: 0 created, 0 updated, 0 merged, 9 unchanged, 0 conflicts" in out.output


def test_edited_generated_file_stops_the_run_and_writes_nothing(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / GENERATED).write_text((project / GENERATED).read_text() + "# my tweak\n")
    (project / "ops/foo.toml").write_text(_spec("(Tensor x, float alpha=1.0) -> Tensor"))
    before = snapshot(project)
    out = _cli(project, monkeypatch)
    assert out.exit_code == 1
    assert GENERATED in out.output and "edited" in out.output and "--force" in out.output
    assert snapshot(project) == before  # not the kernel merge, not the test file, not the manifest


def test_force_overwrites_an_edited_generated_file(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pristine = (project / GENERATED).read_text()
    (project / GENERATED).write_text(pristine + "# my tweak\n")
    out = _cli(project, monkeypatch, "--force")
    assert out.exit_code == 0, out.output
    assert "overwritten" in out.output
    assert (project / GENERATED).read_text() == pristine


def test_user_file_gets_the_new_signature_and_keeps_its_body(project: Path) -> None:
    fill_kernel(project)
    (project / "ops/foo.toml").write_text(_spec("(Tensor x, float alpha=1.0) -> Tensor"))
    result = generate(project)
    assert result.counts()["merge"] == 1 and not result.failed
    text = (project / KERNEL).read_text()
    assert "def foo(x: Tensor, alpha: float = 1.0) -> Tensor:\n    y = torch.sin(x)  # user body\n    return y\n" in text
    assert "NotImplementedError" not in text
    assert generate(project, check=True).stale == []


def test_user_file_never_edited_is_updated_not_merged(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing of the user's is in it, so the report says `updated`, as for a generated file."""
    (project / "ops/foo.toml").write_text(_spec("(Tensor x, float alpha=1.0) -> Tensor"))
    assert f"would be updated {KERNEL}" in _cli(project, monkeypatch, "--dry-run").output
    out = _cli(project, monkeypatch)
    assert out.exit_code == 0, out.output
    assert f"updated        {KERNEL}" in out.output and "0 merged" in out.output
    text = (project / KERNEL).read_text()
    assert "def foo(x: Tensor, alpha: float = 1.0) -> Tensor:\n    raise NotImplementedError(" in text
    assert generate(project, check=True).stale == []


def test_real_conflict_leaves_markers_backup_and_exits_1(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = project / KERNEL
    mine = path.read_text().replace("def foo(x: Tensor) -> Tensor:", "def foo(x: Tensor, beta: int = 3) -> Tensor:")
    path.write_text(mine)
    (project / "ops/foo.toml").write_text(_spec("(Tensor x, float alpha=1.0) -> Tensor"))
    out = _cli(project, monkeypatch)
    assert out.exit_code == 1
    assert "conflict" in out.output and KERNEL in out.output and "1 conflicts" in out.output
    text = path.read_text()
    assert "<<<<<<< yours\n" in text and ">>>>>>> opgen" in text
    assert "beta: int = 3" in text and "alpha: float = 1.0" in text
    assert (project / ".opgen/backup" / KERNEL).read_text() == mine
    # until the markers are gone every run says so and fails, without touching the file
    again = _cli(project, monkeypatch)
    assert again.exit_code == 1 and "unresolved" in again.output
    assert path.read_text() == text
    assert _cli(project, monkeypatch, "--check").exit_code == 1


def test_resolving_a_conflict_is_accepted(project: Path) -> None:
    path = project / KERNEL
    path.write_text(path.read_text().replace("(x: Tensor)", "(x: Tensor, beta: int = 3)"))
    (project / "ops/foo.toml").write_text(_spec("(Tensor x, float alpha=1.0) -> Tensor"))
    generate(project)
    lines = path.read_text().splitlines(True)
    start = next(i for i, line in enumerate(lines) if line.startswith("<<<<<<<"))
    end = next(i for i, line in enumerate(lines) if line.startswith(">>>>>>>"))
    lines[start : end + 1] = ["def foo(x: Tensor, alpha: float = 1.0, beta: int = 3) -> Tensor:\n"]
    path.write_text("".join(lines))
    result = generate(project)
    assert not result.failed and result.counts()["unchanged"] == 9


def test_removed_spec_removes_generated_files_and_keeps_user_files(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fill_kernel(project)
    (project / "ops/bar.toml").write_text(_spec(name="bar"))
    generate(project)
    (project / "ops/foo.toml").unlink()
    out = _cli(project, monkeypatch)
    assert out.exit_code == 0, out.output
    assert not (project / GENERATED).exists() and not (project / TEST_FILE).exists()
    assert "user body" in (project / KERNEL).read_text()
    assert "kept" in out.output and KERNEL in out.output and "removed" in out.output
    assert Manifest.load(project).files[KERNEL].dormant  # its record is kept, to merge again if the spec returns


def test_user_deleted_kernel_stays_deleted(project: Path) -> None:
    (project / KERNEL).unlink()
    result = generate(project)
    assert not (project / KERNEL).exists()
    assert [c.action for c in result.changes if c.path == KERNEL] == ["keep"]


def test_check_is_clean_after_a_run_and_fails_on_stale_or_edited(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _cli(project, monkeypatch, "--check").exit_code == 0
    (project / "ops/foo.toml").write_text(_spec().replace("The foo op.", "New doc."))
    out = _cli(project, monkeypatch, "--check")
    assert out.exit_code == 1 and "out of date" in out.output
    generate(project)
    assert _cli(project, monkeypatch, "--check").exit_code == 0
    (project / TEST_FILE).write_text((project / TEST_FILE).read_text() + "# edit\n")
    assert _cli(project, monkeypatch, "--check").exit_code == 1


def test_check_and_dry_run_write_nothing_not_even_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project(tmp_path / "fresh")
    before = snapshot(root)
    out = _cli(root, monkeypatch, "--dry-run")
    assert out.exit_code == 0
    assert f"+++ b/{KERNEL}" in out.output and "would be created" in out.output
    assert _cli(root, monkeypatch, "--check").exit_code == 1
    assert snapshot(root) == before and not (root / ".opgen").exists()


def test_dry_run_prints_the_diff_of_a_pending_change(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fill_kernel(project)
    (project / "ops/foo.toml").write_text(_spec("(Tensor x, float alpha=1.0) -> Tensor"))
    before = snapshot(project)
    out = _cli(project, monkeypatch, "--dry-run")
    assert out.exit_code == 0
    assert "-def foo(x: Tensor) -> Tensor:\n+def foo(x: Tensor, alpha: float = 1.0) -> Tensor:" in out.output
    assert "would be merged" in out.output
    assert snapshot(project) == before


def test_generated_file_with_crlf_line_endings_is_not_an_edit(project: Path) -> None:
    path = project / GENERATED
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert generate(project, check=True).stale == []
    (project / "ops/foo.toml").write_text(_spec("(Tensor x, float alpha=1.0) -> Tensor"))
    result = generate(project)
    assert [c.action for c in result.changes if c.path == GENERATED] == ["update"]


def test_user_file_with_crlf_merges_and_stays_crlf(project: Path) -> None:
    fill_kernel(project)
    path = project / KERNEL
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    (project / "ops/foo.toml").write_text(_spec("(Tensor x, float alpha=1.0) -> Tensor"))
    result = generate(project)
    assert result.counts()["merge"] == 1 and not result.failed
    data = path.read_bytes()
    assert b"alpha: float = 1.0) -> Tensor:\r\n    y = torch.sin(x)  # user body\r\n" in data
    assert data.count(b"\n") == data.count(b"\r\n")


def test_lost_manifest_never_clobbers_user_files(project: Path) -> None:
    """Without the records opgen cannot tell edits from a spec change: it stops, writing nothing."""
    fill_kernel(project)
    (project / ".opgen/manifest.json").unlink()
    (project / "ops/foo.toml").write_text(_spec("(Tensor x, float alpha=1.0) -> Tensor"))
    before = snapshot(project)
    result = generate(project)
    assert "user body" in (project / KERNEL).read_text()
    assert [c.action for c in result.changes if c.path == KERNEL] == ["untracked"]
    assert [c.action for c in result.changes if c.path == GENERATED] == ["untracked"]
    assert result.stopped and snapshot(project) == before
