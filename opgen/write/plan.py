"""Planning a run: for every file opgen owns or once owned, what the run does to it. Reads only.

It compares what opgen renders now with what is on disk and with what it
wrote last time (the manifest). See Note [Ownership] in
targets/__init__.py, Note [Deletion authority] in targets/project.py and
Note [Manifest journal] in write/manifest.py; `write/apply.py` applies the plan.

Note [Lost records]
A user file merges with the scaffold it was last merged with (its base, in
the manifest). When that record is gone, opgen never detaches the file in
silence:
  * a file that holds every line of the current scaffold (placeholder lines
    aside) is re-attached with that scaffold as its base: this is exactly
    the state an intact record would describe;
  * `opgen generate --adopt PATH` re-attaches a file the user brought up to
    date with the spec by hand;
  * otherwise, when the manifest is missing or damaged, the run stops
    ("untracked") and says how to re-attach: the scaffold opgen could
    regenerate is the spec as it is now, which is the wrong base if the spec
    changed since the last run (the file's old signature would pass for an
    edit of the user's);
  * a file with no record in an intact manifest was never opgen's (a
    `setup.py` the project had already): it is kept, and the report says so.
A user file that no spec makes any more (a backend switch, a removed spec)
keeps its record, marked dormant, so it merges again when a spec makes it
again. A generated file with no record that differs from its render is
"untracked" too and stops the run: opgen cannot tell an edit from an older
render; `--force` overwrites it and keeps a backup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from ..errors import Diagnostic, OpgenError
from ..spec.paths import GENERATED_MARK, STATE_DIR, Owner
from .changes import Action, Change
from .manifest import Entry, Manifest, digest, is_recorded_path
from .merge import FENCE_MARK, has_conflict_markers, is_placeholder, merge3
from .project_files import ProjectFiles

__all__ = ["Rendered", "Disk", "Authority", "plan_changes", "BACKUP_DIR"]

BACKUP_DIR = f"{STATE_DIR}/backup"


class Rendered:
    """One artifact as rendered and formatted, ready to plan against the disk and the manifest.

    `content` is a generated file's text or a user file's scaffold (its merge
    base); `initial` a fresh user file's first text when it differs from the
    scaffold (a starter body). An output the run did not render (Note
    [Generate cache] in incremental/inputs.py) is known by `sha`, the digest of its text,
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


@dataclass(frozen=True, kw_only=True)
class Authority:
    """What a run may do beyond writing its renders.

    `removal_refused(path, text, source)` says why a file the manifest lists
    may not be removed (None: it may; Note [Deletion authority]). `force`
    overwrites (and removes) generated files edited by hand, keeping backups.
    `adopt`: user files to re-attach to the current scaffold (Note [Lost
    records]). `specs`: the spec files (and opgen.toml) that exist now.
    """

    removal_refused: Callable[[str, str, str], str | None]
    force: bool = False
    adopt: frozenset[str] = frozenset()
    specs: frozenset[str] = frozenset()


def plan_changes(
    rendered: list[Rendered],
    *,
    files: ProjectFiles,
    manifest: Manifest,
    authority: Authority,
    sources: Mapping[str, str] | None = None,
    disk: Disk | None = None,
    replace_sources: bool = False,
) -> list[Change]:
    """Decide, for every file opgen owns or once owned, what a run does. Reads only.

    `sources` are new project files (path -> text) that `opgen new` composed: a
    spec, and `opgen.toml` for a new project. They are created, never tracked;
    `replace_sources` lets them replace files already there (`opgen import --force`).
    `disk` reads the files (by default straight from `files`); a generated file
    whose digest matches the render is unchanged without its text being read.
    An unchanged generated file's change carries no texts (`old`, `new` None).
    """
    disk = disk or _PlainDisk(files)
    changes = [
        _plan_source(path, text, disk.read(path), replace_sources)
        for path, text in sorted((sources or {}).items())
    ]
    wanted = {r.path for r in rendered}
    lost = _record_lost(manifest, rendered, disk)
    for item in rendered:
        previous = manifest.files.get(item.path)
        if item.owner is Owner.GENERATED:
            changes.append(_plan_generated(item, disk, previous, authority, lost))
        else:
            changes.append(_plan_user(item, disk.read(item.path), previous, authority, lost))
    for path, entry in sorted(manifest.files.items()):
        if path not in wanted:
            changes.append(_plan_orphan(disk, path, entry, authority))
    return changes


def _record_lost(manifest: Manifest, rendered: list[Rendered], disk: Disk) -> str:
    """Why the records of files opgen wrote are gone ("" when they are not). Note [Lost records]."""
    if manifest.damage:
        return f".opgen/manifest.json {manifest.damage}"
    if not manifest.missing:
        return ""  # files are read only when the answer depends on them
    generated_here = any(
        r.owner is Owner.GENERATED and GENERATED_MARK in (disk.read(r.path) or "")[:300]
        for r in rendered
    )
    return ".opgen/manifest.json is missing" if generated_here else ""


def _plan_source(path: str, text: str, current: str | None, replace: bool = False) -> Change:
    if current is None:
        return Change(path, Action.CREATE, None, text, None)
    if _same(current, text):
        return Change(path, Action.UNCHANGED, current, current, None)
    if replace:
        return Change(path, Action.UPDATE, current, text, None)
    raise OpgenError(
        Diagnostic(
            None,
            None,
            f"{path} appeared while opgen was creating it; nothing was written",
            "run the command again",
        )
    )


def _plan_orphan(disk: Disk, path: str, entry: Entry, authority: Authority) -> Change:
    """A file the manifest lists that no spec (or template) makes any more."""
    if not is_recorded_path(path):
        note = (
            ".opgen/manifest.json lists it, but it is not a path opgen writes (one inside the "
            "project, relative, without `..`); left alone, and dropped from the manifest"
        )
        return Change(path, Action.SPARE, None, None, None, note)
    current = disk.read(path)
    if entry.owner == Owner.USER:
        if current is None:
            return Change(path, Action.KEEP, None, None, None)
        if entry.dormant:
            return Change(path, Action.UNCHANGED, current, current, entry)
        if entry.source in authority.specs:
            note = (
                f"{entry.source} no longer makes this file (a backend, devices or testing helpers "
                "changed); the file is yours, so it stays, and merges again if the spec makes it again"
            )
        else:
            note = f"its spec {entry.source} is gone; the file is yours, so it stays (it merges again if the spec comes back)"
        return Change(path, Action.KEEP, current, current, replace(entry, dormant=True), note)
    if current is None:
        return Change(path, Action.REMOVE, None, None, None)
    refused = authority.removal_refused(path, current, entry.source)
    if refused is not None:
        note = f".opgen/manifest.json lists it as generated, but {refused}; left as it is"
        return Change(path, Action.SPARE, current, current, None, note)
    if digest(current) == entry.sha256:
        return Change(path, Action.REMOVE, current, None, None)
    if authority.force:
        note = f"your edits were removed (--force); the file is saved as {BACKUP_DIR}/{path}"
        return Change(path, Action.REMOVE, current, None, None, note, backup=True)
    return Change(
        path,
        Action.EDITED,
        current,
        current,
        entry,
        "edited by hand and no longer generated; delete it yourself or pass --force",
    )


def _plan_generated(
    item: Rendered, disk: Disk, previous: Entry | None, authority: Authority, lost: str
) -> Change:
    entry = Entry(Owner.GENERATED, item.source, item.sha, item.render_sha)
    current_sha = disk.digest(item.path)
    if current_sha is None:
        return Change(item.path, Action.CREATE, None, item.content, entry)
    if current_sha == item.sha:  # digests ignore CRLF vs LF, as `_same` does
        return Change(item.path, Action.UNCHANGED, None, None, entry)
    current = disk.read(item.path)
    assert current is not None
    if previous is not None and current_sha == previous.sha256:
        return Change(item.path, Action.UPDATE, current, item.content, entry)
    if authority.force:
        note = f"your edits were overwritten (--force); the old file is saved as {BACKUP_DIR}/{item.path}"
        return Change(item.path, Action.OVERWRITE, current, item.content, entry, note, backup=True)
    if previous is None:
        why = lost or "opgen has no record of writing it"
        note = (
            f"{why}, so opgen cannot tell an edit by hand from an older version of this generated "
            "file; see the difference with `opgen generate --dry-run`, then pass --force to "
            f"overwrite it (the old file is saved in {BACKUP_DIR}/)"
        )
        return Change(item.path, Action.UNTRACKED, current, item.content, None, note)
    return Change(
        item.path,
        Action.EDITED,
        current,
        item.content,
        previous,
        "this generated file was edited by hand; move the change into the spec, a user-owned file or a template override, or pass --force to overwrite it",
    )


def _missing_lines(text: str, scaffold: str) -> list[tuple[int, str]]:
    """The scaffold's lines (placeholders and blank lines aside) that `text` lacks, in order."""
    have = [line.rstrip() for line in text.splitlines()]
    missing: list[tuple[int, str]] = []
    at = 0
    for number, line in enumerate(scaffold.splitlines(), start=1):
        wanted = line.rstrip()
        if not wanted or is_placeholder(line):
            continue
        try:
            at = have.index(wanted, at) + 1
        except ValueError:
            missing.append((number, wanted.strip()))
    return missing


def _reattach(
    item: Rendered, current: str, authority: Authority, lost: str, entry: Entry
) -> Change:
    """A user file with no record of its base. Note [Lost records]."""
    if item.path in authority.adopt:
        note = f"re-attached to the scaffold of {item.source} as it is now (--adopt)"
        return Change(item.path, Action.ATTACH, current, current, entry, note)
    missing = _missing_lines(current, item.content)
    if not missing:
        why = lost or "opgen had no record of it"
        note = f"re-attached: {why}, and the file holds every line of the scaffold of {item.source}"
        return Change(item.path, Action.ATTACH, current, current, entry, note)
    adopt = f"`opgen generate --adopt {item.path}`"
    if not lost:
        note = f"not created by opgen; left as it is, no merge ({adopt} lets opgen merge {item.source}'s changes into it)"
        return Change(item.path, Action.KEEP, current, current, None, note)
    number, line = missing[0]
    more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
    note = (
        f"{lost}, and this file lacks lines of the scaffold of {item.source} as it is now (line "
        f"{number}: `{line}`{more}), so opgen cannot tell your edits from a change of the spec; "
        f"restore the manifest (e.g. `git checkout .opgen/manifest.json`), or bring the file up "
        f"to date with the spec by hand and run {adopt}"
    )
    return Change(item.path, Action.UNTRACKED, current, current, None, note)


def _plan_user(
    item: Rendered, current: str | None, previous: Entry | None, authority: Authority, lost: str
) -> Change:
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
        return _reattach(item, current, authority, lost, entry(current))
    if has_conflict_markers(current):
        return Change(
            item.path,
            Action.UNRESOLVED,
            current,
            current,
            previous,
            f"still has conflict markers; resolve them (your version before the merge is in {BACKUP_DIR}/{item.path})",
        )
    if item.path in authority.adopt:
        return _reattach(item, current, authority, lost, entry(current))
    if previous.base == scaffold and FENCE_MARK not in current:
        return Change(
            item.path, Action.UNCHANGED, current, current, replace(previous, dormant=False)
        )
    # An unchanged scaffold still rewrites the fences the user edited (Note [Fenced regions]).
    result = merge3(
        previous.base, current, scaffold, theirs_label=f"opgen (new scaffold from {item.source})"
    )
    if result.text == current:
        unchanged = (
            replace(previous, dormant=False) if previous.base == scaffold else entry(current)
        )
        return Change(item.path, Action.UNCHANGED, current, current, unchanged)
    if result.conflicts:
        note = f"{result.conflicts} conflict(s): resolve the <<<<<<< markers; your version before the merge is saved as {BACKUP_DIR}/{item.path}"
        return Change(
            item.path, Action.CONFLICT, current, result.text, entry(result.text), note, backup=True
        )
    if result.replaced:
        fenced = ", ".join(f"`opgen: {name}`" for name in result.replaced)
        note = f"rewrote the {fenced} lines you edited (they follow the spec: change it instead); your version is saved as {BACKUP_DIR}/{item.path}"
        return Change(
            item.path, Action.MERGE, current, result.text, entry(result.text), note, backup=True
        )
    # a file the user never edited takes the new scaffold as it is: nothing of theirs was merged
    action = Action.UPDATE if _same(current, previous.base) else Action.MERGE
    return Change(item.path, action, current, result.text, entry(result.text))
