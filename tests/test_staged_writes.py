"""A batch stages every write, then applies its steps in the order they were added (Note [Staged
writes] in write/project_files.py): the journal before any file, a backup before the file it
saves, nothing left behind by a failed staging."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from opgen.errors import Diagnostic
from opgen.write.confined import Confined, FileAccessError
from opgen.write.project_files import ProjectFiles

FILES = [f"pkg/f{i:02d}.py" for i in range(24)]


def _record_commits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    order: list[str] = []
    real = Confined.commit

    def commit(self: Confined, staged) -> None:
        order.append("/".join(staged.parts))
        real(self, staged)

    monkeypatch.setattr(Confined, "commit", commit)
    return order


def test_the_steps_apply_in_the_order_they_were_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order = _record_commits(monkeypatch)
    (tmp_path / "backup/pkg").mkdir(parents=True)
    (tmp_path / "backup/pkg/x.py").write_text("older")
    files = ProjectFiles(tmp_path)
    batch = files.batch()
    batch.write("journal.json", "{}")
    for rel in FILES:
        batch.write(rel, f"# {rel}\n")
    batch.rename("backup/pkg/x.py", "backup/pkg/x.py.1")
    batch.write("backup/pkg/x.py", "old")
    batch.write("pkg/x.py", "new\n")
    assert len(batch) == len(FILES) + 4
    batch.stage()
    assert order == []  # staging renames nothing
    batch.commit()
    assert order == ["journal.json", *FILES, "backup/pkg/x.py", "pkg/x.py"]
    assert (tmp_path / "backup/pkg/x.py.1").read_text() == "older"
    assert (tmp_path / "backup/pkg/x.py").read_text() == "old"
    assert (tmp_path / "pkg/x.py").read_text() == "new\n"


def test_written_gives_the_status_of_each_file_as_it_is_on_disk(tmp_path: Path) -> None:
    files = ProjectFiles(tmp_path)
    batch = files.batch()
    for rel in FILES:
        batch.write(rel, f"# {rel}\n")
    batch.stage()
    batch.commit()
    assert sorted(rel for rel, _, _ in batch.written) == FILES
    for rel, info, text in batch.written:
        assert info is not None and text == f"# {rel}\n"
        now = os.stat(tmp_path / rel)
        assert (info.st_size, info.st_mtime_ns, info.st_ino) == (
            now.st_size,
            now.st_mtime_ns,
            now.st_ino,
        )


def test_a_failed_staging_leaves_the_project_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/f05.py").write_text("mine\n")
    real = Confined.stage

    def stage(self: Confined, rel, data, *args, **kwargs):
        if rel == "pkg/f13.py":
            raise FileAccessError(Diagnostic(tmp_path / rel, None, "disk full", ""))
        return real(self, rel, data, *args, **kwargs)

    monkeypatch.setattr(Confined, "stage", stage)
    files = ProjectFiles(tmp_path)
    batch = files.batch()
    for rel in FILES:
        batch.write(rel, "new\n")
    with pytest.raises(FileAccessError, match="nothing was changed"):
        batch.stage()
    assert sorted(p.name for p in (tmp_path / "pkg").iterdir()) == ["f05.py"]
    assert (tmp_path / "pkg/f05.py").read_text() == "mine\n"


def test_stat_still_refuses_symlinks_in_a_folder_it_found_real(tmp_path: Path) -> None:
    """`ProjectFiles.stat` remembers folders a walk found real; a symlink in one is still refused."""
    from opgen.errors import OpgenError

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/a.py").write_text("a")
    (tmp_path / "outside.py").write_text("x")
    os.symlink(tmp_path / "outside.py", tmp_path / "pkg/b.py")
    os.symlink(tmp_path / "pkg", tmp_path / "link")
    files = ProjectFiles(tmp_path)
    for _ in range(2):  # the first call walks from the root, the second takes the remembered folder
        info = files.stat("pkg/a.py")
        assert info is not None and info.st_size == 1
        assert files.stat("pkg/missing.py") is None
        with pytest.raises(OpgenError, match="symlink"):
            files.stat("pkg/b.py")
        with pytest.raises(OpgenError, match="symlink"):
            files.stat("link/a.py")
        with pytest.raises(OpgenError):
            files.stat("pkg/..")
