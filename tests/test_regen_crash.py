"""Atomic writes, the manifest journal (a run killed at any write) and the project lock."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

import opgen.write.project_files as fs
from opgen.generate import generate
from opgen.write.confined import Confined
from opgen.write.manifest import Manifest

KERNEL = "mylib/kernels/foo.py"
_PROJECT = '[project]\nnamespace = "mylib"\npackage = "mylib"\n'


def _spec(schema: str, name: str = "foo") -> str:
    return f'''name = "mylib::{name}"
schema = "{schema}"
doc = "The op."
devices = ["cpu"]
backend = "python"

[fake]
like = "x"

[test]
reference = "torch.sin(x)"

[[test.samples]]
x = {{shape = [4]}}
'''


def _project(root: Path) -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(_PROJECT)
    (root / "ops/foo.toml").write_text(_spec("(Tensor x) -> Tensor"))
    (root / "ops/gone.toml").write_text(_spec("(Tensor x) -> Tensor", name="gone"))
    generate(root)
    kernel = root / KERNEL
    kernel.write_text(kernel.read_text().replace("    raise NotImplementedError", "    return x  # mine\n    # raise NotImplementedError"))
    # one run's worth of every kind of write: updates, a merge, a removal
    (root / "ops/foo.toml").write_text(_spec("(Tensor x, float alpha=1.0) -> Tensor"))
    (root / "ops/gone.toml").unlink()
    return root


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.relative_to(root).as_posix().startswith(".opgen/")
    }


class _Killed(BaseException):
    pass


# every call that changes the disk (Note [Staged writes]): a run can die before any of them
_STEPS = ("stage", "commit", "rename", "unlink")


def _patch_steps(monkeypatch: pytest.MonkeyPatch, before_each) -> None:
    for name in _STEPS:
        real = getattr(Confined, name)

        def step(self, *args, real=real):
            before_each()
            return real(self, *args)

        monkeypatch.setattr(Confined, name, step)


def _count_writes(root: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    calls = []
    _patch_steps(monkeypatch, lambda: calls.append(1))
    generate(root)
    monkeypatch.undo()
    return len(calls)


@pytest.mark.slow  # over 5 s: the full suite runs it
def test_a_run_killed_at_any_write_recovers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = _project(tmp_path / "reference")
    writes = _count_writes(reference, monkeypatch)
    assert writes >= 10
    expected = _tree(reference)
    expected_manifest = Manifest.load(reference).files
    for kill_at in range(writes):
        root = _project(tmp_path / f"killed{kill_at}")
        count = [0]

        def dying(count: list[int] = count, kill_at: int = kill_at) -> None:
            if count[0] == kill_at:
                raise _Killed
            count[0] += 1

        _patch_steps(monkeypatch, dying)
        with pytest.raises(_Killed):
            generate(root)
        monkeypatch.undo()
        # whatever survived: "mine" is in the kernel, old or merged, never half-written
        assert "return x  # mine" in (root / KERNEL).read_text()
        result = generate(root)
        assert not result.failed, (kill_at, [(c.path, c.action, c.note) for c in result.changes])
        assert _tree(root) == expected, kill_at
        assert Manifest.load(root).files == expected_manifest, kill_at
        assert generate(root, check=True).stale == []
        assert not list(root.rglob("*.tmp")), kill_at


def test_atomic_write_leaves_old_content_when_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "f.py"
    target.write_text("old\n")

    def boom(src, dst, **dir_fds):
        raise _Killed

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(_Killed):
        fs.atomic_write(target, "new\n" * 1000)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.py"]  # no temporary left behind


def test_leftover_temporaries_of_a_hard_kill_are_swept(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    stale = root / "mylib/_generated/.foo.py.abc123.tmp"
    stale.write_text("half")
    generate(root)
    assert not stale.exists()


def test_atomic_write_keeps_file_mode(tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    target.write_text("old\n")
    target.chmod(0o755)
    fs.atomic_write(target, "new\n")
    assert target.stat().st_mode & 0o777 == 0o755 and target.read_text() == "new\n"


def test_second_run_waits_for_the_lock(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    done = threading.Event()
    thread = threading.Thread(target=lambda: (generate(root), done.set()))
    with fs.ProjectFiles(root).lock():
        thread.start()
        time.sleep(0.6)
        assert not done.is_set()  # blocked on the lock; nothing written yet
        assert "alpha" not in (root / KERNEL).read_text()
    thread.join(timeout=30)
    assert done.is_set() and "alpha" in (root / KERNEL).read_text()


def test_state_dir_ignores_lock_and_backups(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    assert (root / ".opgen/.gitignore").read_text() == "lock\nbackup/\ncache/\n"
