"""The one writer of `opgen generate` (and `opgen new`, which hands it the new spec).

It compares what opgen renders now with what is on disk and with what it
wrote last time (the manifest), decides per file what to do, and then writes
under the project lock through `ProjectFiles` (Note [Confined writes] in
fs.py). See Note [Ownership] in targets/__init__.py and Note [Manifest
journal] in manifest.py.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from .changes import Action, Change
from .errors import Diagnostic, OpgenError
from .fs import STATE_DIR, ProjectFiles
from .manifest import MANIFEST_FILE, Entry, Manifest, digest
from .merge import FENCE_MARK, has_conflict_markers, merge3
from .targets import GENERATED_MARK, Owner

__all__ = [
    "Rendered",
    "plan_changes",
    "apply_changes",
    "needs_writing",
    "unified_diff",
    "BACKUP_DIR",
]

BACKUP_DIR = f"{STATE_DIR}/backup"


@dataclass(frozen=True)
class Rendered:
    """One artifact as rendered and formatted, ready to plan against the disk and the manifest."""

    path: str
    owner: Owner
    source: str
    content: str  # the render: a generated file's text, a user file's scaffold (its merge base)
    render_sha: str = ""
    initial: str | None = (
        None  # a fresh user file's first text when it differs from the scaffold (a starter body)
    )


def _same(a: str, b: str) -> bool:
    return a == b or a.replace("\r\n", "\n") == b.replace("\r\n", "\n")


def plan_changes(
    files: ProjectFiles,
    rendered: list[Rendered],
    manifest: Manifest,
    force: bool = False,
    sources: Mapping[str, str] | None = None,
) -> list[Change]:
    """Decide, for every file opgen owns or once owned, what a run does. Reads only.

    `sources` are new project files (path -> text) that `opgen new` composed: a
    spec, and `opgen.toml` for a new project. They are created, never tracked.
    """
    changes = [
        _plan_source(path, text, files.read_text(path))
        for path, text in sorted((sources or {}).items())
    ]
    wanted = {r.path for r in rendered}
    for item in rendered:
        current = files.read_text(item.path)
        previous = manifest.files.get(item.path)
        if item.owner is Owner.GENERATED:
            changes.append(_plan_generated(item, current, previous, force))
        else:
            changes.append(_plan_user(item, current, previous))
    for path, entry in sorted(manifest.files.items()):
        if path not in wanted:
            changes.append(_plan_orphan(path, entry, files.read_text(path), force))
    return changes


def _plan_source(path: str, text: str, current: str | None) -> Change:
    if current is None:
        return Change(path, Action.CREATE, None, text, None)
    if _same(current, text):
        return Change(path, Action.UNCHANGED, current, current, None)
    raise OpgenError(
        Diagnostic(
            None,
            None,
            f"{path} appeared while opgen was creating it; nothing was written",
            "run the command again",
        )
    )


def _plan_orphan(path: str, entry: Entry, current: str | None, force: bool) -> Change:
    """A file whose spec (or template) is gone."""
    if entry.owner == Owner.USER:
        note = (
            f"its spec {entry.source} is gone; the file is yours, so it stays"
            if current is not None
            else ""
        )
        return Change(path, Action.KEEP, current, current, None, note)
    if current is None:
        return Change(path, Action.REMOVE, None, None, None)
    if digest(current) != entry.sha256 and not force:
        return Change(
            path,
            Action.EDITED,
            current,
            current,
            entry,
            "edited by hand and no longer generated; delete it yourself or pass --force",
        )
    return Change(path, Action.REMOVE, current, None, None)


def _plan_generated(
    item: Rendered, current: str | None, previous: Entry | None, force: bool
) -> Change:
    entry = Entry(Owner.GENERATED, item.source, digest(item.content), item.render_sha)
    if current is None:
        return Change(item.path, Action.CREATE, None, item.content, entry)
    if _same(current, item.content):
        return Change(item.path, Action.UNCHANGED, current, current, entry)
    ours = previous is not None and digest(current) == previous.sha256
    unknown_but_generated = previous is None and GENERATED_MARK in current[:300]
    if ours or unknown_but_generated:
        return Change(item.path, Action.UPDATE, current, item.content, entry)
    if force:
        return Change(
            item.path,
            Action.OVERWRITE,
            current,
            item.content,
            entry,
            "your edits were overwritten (--force)",
        )
    return Change(
        item.path,
        Action.EDITED,
        current,
        item.content,
        previous,
        "this generated file was edited by hand; move the change into the spec, a user-owned file or a template override, or pass --force to overwrite it",
    )


def _plan_user(item: Rendered, current: str | None, previous: Entry | None) -> Change:
    scaffold = item.content

    def entry(written: str) -> Entry:
        return Entry(
            Owner.USER,
            item.source,
            digest(scaffold),
            item.render_sha,
            base=scaffold,
            written=digest(written),
        )

    if current is None:
        if previous is not None:
            return Change(
                item.path,
                Action.KEEP,
                None,
                None,
                previous,
                "you deleted this file; opgen leaves it deleted (remove it from .opgen/manifest.json to get a fresh scaffold)",
            )
        first = scaffold if item.initial is None else item.initial
        return Change(item.path, Action.CREATE, None, first, entry(first))
    if previous is None or previous.base is None:
        if _same(current, scaffold):
            return Change(item.path, Action.UNCHANGED, current, current, entry(current))
        return Change(
            item.path,
            Action.KEEP,
            current,
            current,
            None,
            "not created by opgen (or its record in .opgen/ is lost); left as it is, no merge",
        )
    if has_conflict_markers(current):
        return Change(
            item.path,
            Action.UNRESOLVED,
            current,
            current,
            previous,
            f"still has conflict markers; resolve them (your version before the merge is in {BACKUP_DIR}/{item.path})",
        )
    if previous.base == scaffold and FENCE_MARK not in current:
        return Change(item.path, Action.UNCHANGED, current, current, previous)
    # An unchanged scaffold still rewrites the fences the user edited (Note [Fenced regions]).
    result = merge3(
        previous.base, current, scaffold, theirs_label=f"opgen (new scaffold from {item.source})"
    )
    if result.text == current:
        unchanged = previous if previous.base == scaffold else entry(current)
        return Change(item.path, Action.UNCHANGED, current, current, unchanged)
    if result.conflicts:
        note = f"{result.conflicts} conflict(s): resolve the <<<<<<< markers; your version before the merge is saved as {BACKUP_DIR}/{item.path}"
        return Change(item.path, Action.CONFLICT, current, result.text, entry(result.text), note)
    if result.replaced:
        fenced = ", ".join(f"`opgen: {name}`" for name in result.replaced)
        note = f"rewrote the {fenced} lines you edited (they follow the spec: change it instead); your version is saved as {BACKUP_DIR}/{item.path}"
        return Change(
            item.path, Action.MERGE, current, result.text, entry(result.text), note, backup=True
        )
    # a file the user never edited takes the new scaffold as it is: nothing of theirs was merged
    action = Action.UPDATE if _same(current, previous.base) else Action.MERGE
    return Change(item.path, action, current, result.text, entry(result.text))


def _backup(files: ProjectFiles, rel: str, text: str) -> None:
    """Save the user's version before a conflicting merge; an older, different backup is kept as NAME.N."""
    target = f"{BACKUP_DIR}/{rel}"
    existing = files.read_text(target)
    if existing == text:
        return
    if existing is not None:
        n = 1
        while files.exists(f"{target}.{n}"):
            n += 1
        files.replace(target, f"{target}.{n}")
    files.write_text(target, text)


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


def apply_changes(files: ProjectFiles, changes: list[Change], manifest: Manifest) -> None:
    """Write every change, then the manifest; call under `files.lock()`. Note [Manifest journal]."""
    manifest.pending = {c.path: c.entry for c in changes if c.writes and c.entry is not None}
    manifest.pending.update(
        {c.path: None for c in changes if c.action is Action.REMOVE and c.old is not None}
    )
    if manifest.pending:
        files.write_text(MANIFEST_FILE, manifest.dumps())
    for change in changes:
        files.sweep_temporaries(change.path)
        if (change.action is Action.CONFLICT or change.backup) and change.old is not None:
            _backup(files, change.path, change.old)
        if change.writes and change.new is not None:
            files.write_text(change.path, change.new)
        elif change.action is Action.REMOVE:
            files.unlink(change.path)
    manifest.files = _settled(manifest, changes).files
    manifest.pending = {}
    text = manifest.dumps()
    if files.read_text(MANIFEST_FILE) != text:
        files.write_text(MANIFEST_FILE, text)


def unified_diff(change: Change) -> str:
    """The change as a unified diff (what `opgen generate --dry-run` prints)."""
    old = (change.old or "").splitlines(True)
    new = (change.new or "").splitlines(True) if change.action is not Action.REMOVE else []
    return "".join(difflib.unified_diff(old, new, f"a/{change.path}", f"b/{change.path}"))
