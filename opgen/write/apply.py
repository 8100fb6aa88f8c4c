"""The one writer of `opgen generate` (and `opgen new`, which hands it the new spec).

It applies what `write/plan.py` decided, under the project lock, through
`ProjectFiles` (Note [Confined writes] in write/confined.py, Note [Staged writes]
in write/project_files.py, Note [Manifest journal] in write/manifest.py).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable

from .changes import Action, Change
from .manifest import MANIFEST_FILE, Manifest
from .plan import BACKUP_DIR
from .project_files import Batch, ProjectFiles

__all__ = ["apply_changes", "needs_writing", "unified_diff", "Written"]

# hears of every file a run wrote (its status and text) or removed (None, None)
Written = Callable[[str, os.stat_result | None, str | None], None]


def _backup(files: ProjectFiles, batch: Batch, rel: str, text: str) -> None:
    """Save a file before a conflicting merge or a --force; an older, different backup is kept as NAME.N."""
    target = f"{BACKUP_DIR}/{rel}"
    existing = files.read_text(target)
    if existing == text:
        return
    if existing is not None:
        n = 1
        while files.exists(f"{target}.{n}"):
            n += 1
        batch.rename(target, f"{target}.{n}")
    batch.write(
        target, text
    )  # renamed before the file it saves is replaced: steps keep their order


def _settled(manifest: Manifest, changes: list[Change]) -> Manifest:
    """The manifest as it is once every change is written."""
    entries = dict(manifest.files)
    for change in changes:
        if change.entry is None:
            entries.pop(change.path, None)
        elif change.action is not Action.EDITED:
            entries[change.path] = change.entry
    return Manifest(entries)


def needs_writing(files: ProjectFiles, changes: list[Change], manifest: Manifest) -> bool:
    """Whether applying `changes` writes anything: a file, a removal or the manifest."""
    if any(c.writes or (c.action is Action.REMOVE and c.old is not None) for c in changes):
        return True
    return files.read_text(MANIFEST_FILE) != _settled(manifest, changes).dumps()


def apply_changes(
    changes: list[Change],
    *,
    files: ProjectFiles,
    manifest: Manifest,
    written: Written | None = None,
) -> None:
    """Write every change, then the manifest; call under `files.lock()`.

    Every new text (backups and the manifest journal included) is staged before
    the first rename (Note [Staged writes] in write/project_files.py): an I/O error while staging
    raises OpgenError and leaves the project as it was. Note [Manifest journal].
    `written(path, status, text)` hears of every file written or removed (the
    generate cache keeps their status, so the next run need not read them).
    """
    manifest.pending = {c.path: c.entry for c in changes if c.writes and c.entry is not None}
    manifest.pending.update(
        {c.path: None for c in changes if c.action is Action.REMOVE and c.old is not None}
    )
    # a spared path is not opgen's to touch: it may lead outside the project (Note [Deletion authority])
    touched = (c.path for c in changes if c.action is not Action.SPARE)
    files.sweep_temporaries([MANIFEST_FILE, *touched])
    batch = files.batch()
    if manifest.pending:
        batch.write(MANIFEST_FILE, manifest.dumps())  # the journal: renamed before any file
    for change in changes:
        if change.backup and change.old is not None:
            _backup(files, batch, change.path, change.old)
        if change.writes and change.new is not None:
            batch.write(change.path, change.new)
        elif change.action is Action.REMOVE and change.old is not None:
            batch.remove(change.path)
    batch.stage()
    batch.commit()
    if written is not None:
        for path, info, text in batch.written:
            written(path, info, text)
    manifest.files = _settled(manifest, changes).files
    manifest.pending = {}
    text = manifest.dumps()
    if files.read_text(MANIFEST_FILE) != text:
        info = files.write_text(MANIFEST_FILE, text)
        if written is not None:
            written(MANIFEST_FILE, info, text)


def unified_diff(change: Change) -> str:
    """The change as a unified diff (what `opgen generate --dry-run` prints)."""
    old = (change.old or "").splitlines(True)
    new = (change.new or "").splitlines(True) if change.action is not Action.REMOVE else []
    return "".join(difflib.unified_diff(old, new, f"a/{change.path}", f"b/{change.path}"))
