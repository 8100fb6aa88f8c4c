"""The one place that writes into a project.

It compares what opgen renders now with what is on disk and with what it
wrote last time (the manifest), decides per file what to do, and then writes
atomically under a lock. See Note [Ownership] in targets/__init__.py and
Note [Manifest journal] in manifest.py.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import Diagnostic, OpgenError
from .manifest import STATE_DIR, Entry, Manifest, digest
from .merge import has_conflict_markers, merge3
from .targets import GENERATED, GENERATED_MARK, USER

__all__ = [
    "Rendered",
    "Change",
    "plan_changes",
    "apply_changes",
    "needs_writing",
    "atomic_write",
    "project_lock",
    "unified_diff",
    "GENERATED_MARK",
    "BACKUP_DIR",
]

BACKUP_DIR = f"{STATE_DIR}/backup"

# action -> does it write the file
_WRITES = {"create": True, "update": True, "merge": True, "conflict": True, "overwrite": True}


@dataclass(frozen=True)
class Rendered:
    path: str
    owner: str
    source: str
    content: str
    render_sha: str = ""


@dataclass(frozen=True)
class Change:
    """What one run does to one file.

    action: create update unchanged merge conflict unresolved edited overwrite remove keep
    """

    path: str
    action: str
    old: str | None
    new: str | None
    entry: Entry | None  # manifest entry after the change; None removes it
    note: str = ""

    @property
    def writes(self) -> bool:
        return _WRITES.get(self.action, False)


def _read(path: Path) -> str | None:
    """The file exactly as it is (no newline translation), or None when absent."""
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise OpgenError(Diagnostic(path, None, f"cannot read this file opgen manages: {exc}", "move it away; opgen will write it again")) from None


def _inside(root: Path, rel: str) -> Path:
    target = root / rel
    if not target.resolve().is_relative_to(root.resolve()):
        raise OpgenError(Diagnostic(target, None, "refusing to write outside the project (the path or a symlink leads out)", "remove the symlink or fix the path"))
    return target


def _same(a: str, b: str) -> bool:
    return a == b or a.replace("\r\n", "\n") == b.replace("\r\n", "\n")


def plan_changes(root: Path, rendered: list[Rendered], manifest: Manifest, force: bool = False) -> list[Change]:
    """Decide, for every file opgen owns or once owned, what a run does. Reads only."""
    changes: list[Change] = []
    wanted = {r.path for r in rendered}
    for item in rendered:
        current = _read(_inside(root, item.path))
        previous = manifest.files.get(item.path)
        if item.owner == GENERATED:
            changes.append(_plan_generated(item, current, previous, force))
        else:
            changes.append(_plan_user(item, current, previous))
    for path, entry in sorted(manifest.files.items()):
        if path not in wanted:
            changes.append(_plan_orphan(path, entry, _read(_inside(root, path)), force))
    return changes


def _plan_orphan(path: str, entry: Entry, current: str | None, force: bool) -> Change:
    """A file whose spec (or template) is gone."""
    if entry.owner == USER:
        note = f"its spec {entry.source} is gone; the file is yours, so it stays" if current is not None else ""
        return Change(path, "keep", current, current, None, note)
    if current is None:
        return Change(path, "remove", None, None, None)
    if digest(current) != entry.sha256 and not force:
        return Change(path, "edited", current, current, entry, "edited by hand and no longer generated; delete it yourself or pass --force")
    return Change(path, "remove", current, None, None)


def _plan_generated(item: Rendered, current: str | None, previous: Entry | None, force: bool) -> Change:
    entry = Entry(GENERATED, item.source, digest(item.content), item.render_sha)
    if current is None:
        return Change(item.path, "create", None, item.content, entry)
    if _same(current, item.content):
        return Change(item.path, "unchanged", current, current, entry)
    ours = previous is not None and digest(current) == previous.sha256
    unknown_but_generated = previous is None and GENERATED_MARK in current[:300]
    if ours or unknown_but_generated:
        return Change(item.path, "update", current, item.content, entry)
    if force:
        return Change(item.path, "overwrite", current, item.content, entry, "your edits were overwritten (--force)")
    return Change(
        item.path,
        "edited",
        current,
        item.content,
        previous,
        "this generated file was edited by hand; move the change into the spec, a user-owned file or a template override, or pass --force to overwrite it",
    )


def _plan_user(item: Rendered, current: str | None, previous: Entry | None) -> Change:
    scaffold = item.content

    def entry(written: str) -> Entry:
        return Entry(USER, item.source, digest(scaffold), item.render_sha, base=scaffold, written=digest(written))

    if current is None:
        if previous is not None:
            return Change(item.path, "keep", None, None, previous, "you deleted this file; opgen leaves it deleted (remove it from .opgen/manifest.json to get a fresh scaffold)")
        return Change(item.path, "create", None, scaffold, entry(scaffold))
    if previous is None or previous.base is None:
        if _same(current, scaffold):
            return Change(item.path, "unchanged", current, current, entry(current))
        return Change(item.path, "keep", current, current, None, "not created by opgen (or its record in .opgen/ is lost); left as it is, no merge")
    if has_conflict_markers(current):
        return Change(item.path, "unresolved", current, current, previous, f"still has conflict markers; resolve them (your version before the merge is in {BACKUP_DIR}/{item.path})")
    if previous.base == scaffold:
        return Change(item.path, "unchanged", current, current, previous)
    result = merge3(previous.base, current, scaffold, theirs_label=f"opgen (new scaffold from {item.source})")
    if result.text == current:
        return Change(item.path, "unchanged", current, current, entry(current))
    if result.conflicts:
        note = f"{result.conflicts} conflict(s): resolve the <<<<<<< markers; your version before the merge is saved as {BACKUP_DIR}/{item.path}"
        return Change(item.path, "conflict", current, result.text, entry(result.text), note)
    # a file the user never edited takes the new scaffold as it is: nothing of theirs was merged
    action = "update" if _same(current, previous.base) else "merge"
    return Change(item.path, action, current, result.text, entry(result.text))


def atomic_write(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a crash leaves old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _sweep_temporaries(path: Path) -> None:
    """Remove temporaries that a killed `atomic_write` of `path` left behind."""
    if path.parent.is_dir():
        for stale in path.parent.glob(f".{path.name}.*.tmp"):
            with contextlib.suppress(OSError):
                stale.unlink()


@contextlib.contextmanager
def project_lock(root: Path) -> Iterator[None]:
    """Serialize runs on one project: a second run waits for the first."""
    state = root / STATE_DIR
    state.mkdir(exist_ok=True)
    ignore = state / ".gitignore"
    if not ignore.exists() or "cache/" not in ignore.read_text(encoding="utf-8"):
        # commit the manifest and template records; not the lock, backups or caches
        atomic_write(ignore, "lock\nbackup/\ncache/\n")
    with open(state / "lock", "a+") as handle:
        try:
            import fcntl
        except ImportError:  # Windows
            import msvcrt

            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
            try:
                yield
            finally:
                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _backup(root: Path, rel: str, text: str) -> None:
    """Save the user's version before a conflicting merge; an older, different backup is kept as NAME.N."""
    target = root / BACKUP_DIR / rel
    existing = _read(target)
    if existing == text:
        return
    if existing is not None:
        n = 1
        while target.with_name(f"{target.name}.{n}").exists():
            n += 1
        os.replace(target, target.with_name(f"{target.name}.{n}"))
    atomic_write(target, text)


def _settled(manifest: Manifest, changes: list[Change]) -> Manifest:
    """The manifest as it is once every change is written."""
    files = dict(manifest.files)
    for change in changes:
        if change.entry is None:
            files.pop(change.path, None)
        elif change.action != "edited":
            files[change.path] = change.entry
    return Manifest(files)


def needs_writing(root: Path, changes: list[Change], manifest: Manifest) -> bool:
    """Whether applying `changes` writes anything: a file, a removal or the manifest."""
    if any(c.writes or (c.action == "remove" and c.old is not None) for c in changes):
        return True
    return _read(root / STATE_DIR / "manifest.json") != _settled(manifest, changes).dumps()


def apply_changes(root: Path, changes: list[Change], manifest: Manifest) -> None:
    """Write every change, then the manifest; call under `project_lock`. Note [Manifest journal]."""
    manifest_path = root / STATE_DIR / "manifest.json"
    manifest.pending = {c.path: c.entry for c in changes if c.writes}
    manifest.pending.update({c.path: None for c in changes if c.action == "remove" and c.old is not None})
    if manifest.pending:
        atomic_write(manifest_path, manifest.dumps())
    for change in changes:
        target = root / change.path
        _sweep_temporaries(target)
        if change.action == "conflict" and change.old is not None:
            _backup(root, change.path, change.old)
        if change.writes and change.new is not None:
            atomic_write(target, change.new)
        elif change.action == "remove" and target.exists():
            target.unlink()
    manifest.files = _settled(manifest, changes).files
    manifest.pending = {}
    text = manifest.dumps()
    if _read(manifest_path) != text:
        atomic_write(manifest_path, text)


def unified_diff(change: Change) -> str:
    old = (change.old or "").splitlines(True)
    new = (change.new or "").splitlines(True) if change.action != "remove" else []
    return "".join(difflib.unified_diff(old, new, f"a/{change.path}", f"b/{change.path}"))
