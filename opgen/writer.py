"""The one writer of `opgen generate` (and `opgen new`, which hands it the new spec).

It compares what opgen renders now with what is on disk and with what it
wrote last time (the manifest), decides per file what to do, and then writes
under the project lock through `ProjectFiles` (Note [Confined writes] in
fs.py). See Note [Ownership] in targets/__init__.py and Note [Manifest
journal] in manifest.py.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from .changes import Action, Change
from .errors import Diagnostic, OpgenError
from .fs import STATE_DIR, ProjectFiles
from .manifest import MANIFEST_FILE, Entry, Manifest, digest
from .merge import has_conflict_markers, merge3
from .targets import GENERATED_MARK, Owner

__all__ = [
    "Rendered",
    "Disk",
    "plan_changes",
    "apply_changes",
    "needs_writing",
    "unified_diff",
    "BACKUP_DIR",
]

BACKUP_DIR = f"{STATE_DIR}/backup"


class Rendered:
    """One artifact as rendered and formatted, ready to plan against the disk and the manifest.

    `content` is a generated file's text or a user file's scaffold (its merge
    base); `initial` a fresh user file's first text when it differs from the
    scaffold (a starter body). An output the run did not render (Note
    [Generate cache] in inputs.py) is known by `sha`, the digest of its text,
    until the plan needs the text itself: then `load` provides it.
    """

    def __init__(
        self,
        path: str,
        owner: Owner,
        source: str,
        content: str | None = None,
        render_sha: str = "",
        initial: str | None = None,
        *,
        sha: str | None = None,
        load: Callable[[], str] | None = None,
    ) -> None:
        if content is None and (sha is None or load is None):
            raise ValueError("a Rendered needs its content, or its digest and a way to load it")
        self.path = path
        self.owner = owner
        self.source = source
        self.render_sha = render_sha
        self.initial = initial
        self._content = content
        self._sha = sha
        self._load = load

    @property
    def content(self) -> str:
        if self._content is None:
            assert self._load is not None
            self._content = self._load()
        return self._content

    @property
    def sha(self) -> str:
        """The digest of `content` (Note [Manifest journal] compares files by it)."""
        if self._sha is None:
            self._sha = digest(self.content)
        return self._sha

    def __repr__(self) -> str:
        return f"Rendered({self.path!r}, {self.owner.value}, sha={self.sha[:12]})"


class Disk(Protocol):
    """What the plan reads of the project: files' texts, or only their digests when that suffices."""

    def read(self, rel: str) -> str | None:
        """The file's text; None when it is not there."""
        ...

    def digest(self, rel: str) -> str | None:
        """The digest of the file's text; None when it is not there."""
        ...


class _PlainDisk:
    def __init__(self, files: ProjectFiles) -> None:
        self.files = files
        self._texts: dict[str, str | None] = {}

    def read(self, rel: str) -> str | None:
        if rel not in self._texts:
            self._texts[rel] = self.files.read_text(rel)
        return self._texts[rel]

    def digest(self, rel: str) -> str | None:
        text = self.read(rel)
        return None if text is None else digest(text)


def _same(a: str, b: str) -> bool:
    return a == b or a.replace("\r\n", "\n") == b.replace("\r\n", "\n")


def plan_changes(
    files: ProjectFiles,
    rendered: list[Rendered],
    manifest: Manifest,
    force: bool = False,
    sources: Mapping[str, str] | None = None,
    disk: Disk | None = None,
) -> list[Change]:
    """Decide, for every file opgen owns or once owned, what a run does. Reads only.

    `sources` are new project files (path -> text) that `opgen new` composed: a
    spec, and `opgen.toml` for a new project. They are created, never tracked.
    `disk` reads the files (by default straight from `files`); a generated file
    whose digest matches the render is unchanged without its text being read.
    An unchanged generated file's change carries no texts (`old`, `new` None).
    """
    disk = disk or _PlainDisk(files)
    changes = [
        _plan_source(path, text, disk.read(path)) for path, text in sorted((sources or {}).items())
    ]
    wanted = {r.path for r in rendered}
    for item in rendered:
        previous = manifest.files.get(item.path)
        if item.owner is Owner.GENERATED:
            changes.append(_plan_generated(item, disk, previous, force))
        else:
            changes.append(_plan_user(item, disk.read(item.path), previous))
    for path, entry in sorted(manifest.files.items()):
        if path not in wanted:
            changes.append(_plan_orphan(path, entry, disk.read(path), force))
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


def _plan_generated(item: Rendered, disk: Disk, previous: Entry | None, force: bool) -> Change:
    entry = Entry(Owner.GENERATED, item.source, item.sha, item.render_sha)
    current_sha = disk.digest(item.path)
    if current_sha is None:
        return Change(item.path, Action.CREATE, None, item.content, entry)
    if current_sha == item.sha:  # digests ignore CRLF vs LF, as `_same` does
        return Change(item.path, Action.UNCHANGED, None, None, entry)
    current = disk.read(item.path)
    assert current is not None
    ours = previous is not None and current_sha == previous.sha256
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
            item.sha,
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
    if previous.base == scaffold:
        return Change(item.path, Action.UNCHANGED, current, current, previous)
    result = merge3(
        previous.base, current, scaffold, theirs_label=f"opgen (new scaffold from {item.source})"
    )
    if result.text == current:
        return Change(item.path, Action.UNCHANGED, current, current, entry(current))
    if result.conflicts:
        note = f"{result.conflicts} conflict(s): resolve the <<<<<<< markers; your version before the merge is saved as {BACKUP_DIR}/{item.path}"
        return Change(item.path, Action.CONFLICT, current, result.text, entry(result.text), note)
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


Written = Callable[[str, os.stat_result | None, str | None], None]


def apply_changes(
    files: ProjectFiles, changes: list[Change], manifest: Manifest, written: Written | None = None
) -> None:
    """Write every change, then the manifest; call under `files.lock()`. Note [Manifest journal].

    `written(path, stat, text)` hears of every file written (its stat and text)
    or removed (None, None).
    """

    def write(rel: str, text: str) -> None:
        info = files.write_text(rel, text)
        if written is not None:
            written(rel, info, text)

    manifest.pending = {c.path: c.entry for c in changes if c.writes and c.entry is not None}
    manifest.pending.update(
        {c.path: None for c in changes if c.action is Action.REMOVE and c.old is not None}
    )
    if manifest.pending:
        write(MANIFEST_FILE, manifest.dumps())
    _sweep_temporaries(files, changes)

    def apply(change: Change) -> None:
        if change.action is Action.CONFLICT and change.old is not None:
            _backup(files, change.path, change.old)
        if change.writes and change.new is not None:
            write(change.path, change.new)
        elif change.action is Action.REMOVE:
            files.unlink(change.path)
            if written is not None:
                written(change.path, None, None)

    _each(apply, [c for c in changes if c.writes or c.action is Action.REMOVE])
    manifest.files = _settled(manifest, changes).files
    manifest.pending = {}
    text = manifest.dumps()
    if files.read_text(MANIFEST_FILE) != text:
        write(MANIFEST_FILE, text)


# Note [Parallel writes]
# Each file is written on its own (temporary file, fsync, rename: fs.py), after
# the journal and before the final manifest (Note [Manifest journal]), so the
# files of one run may be written in any order, and at once. The fsync is most
# of a write's cost (~8 ms here); several in flight share the filesystem's
# journal commits: 200 files take 0.2 s on 8 threads instead of 1.9 s on one.
_WRITERS = 8


def _each(apply: Callable[[Change], None], changes: list[Change]) -> None:
    """`apply` to every change: on a few threads when there are many (Note [Parallel writes])."""
    if len(changes) < _WRITERS:
        for change in changes:
            apply(change)
        return
    with ThreadPoolExecutor(max_workers=_WRITERS) as pool:
        for _ in pool.map(apply, changes):
            pass


def _sweep_temporaries(files: ProjectFiles, changes: list[Change]) -> None:
    """Remove what a killed `atomic_write` of any of these files left, listing each folder once."""
    by_folder: dict[str, list[str]] = {}
    for change in changes:
        folder, _, name = change.path.rpartition("/")
        by_folder.setdefault(folder, []).append(name)
    for folder, names in by_folder.items():
        try:
            present = os.listdir(files.path(folder or "."))
        except (NotADirectoryError, FileNotFoundError):
            continue
        leftovers = [n for n in present if n.startswith(".") and n.endswith(".tmp")]
        for name in names:
            if any(n.startswith(f".{name}.") for n in leftovers):
                files.sweep_temporaries(f"{folder}/{name}" if folder else name)


def unified_diff(change: Change) -> str:
    """The change as a unified diff (what `opgen generate --dry-run` prints)."""
    old = (change.old or "").splitlines(True)
    new = (change.new or "").splitlines(True) if change.action is not Action.REMOVE else []
    return "".join(difflib.unified_diff(old, new, f"a/{change.path}", f"b/{change.path}"))
