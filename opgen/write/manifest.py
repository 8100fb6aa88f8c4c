"""What opgen last wrote, kept in `.opgen/manifest.json` inside the project.

With it opgen tells a user's edit from a stale file without git, and keeps
the scaffold each user-owned file was last generated from (the merge base).

Note [Manifest journal]
A run writes the manifest twice: first with a `pending` entry for every file
it is about to write (the entry that becomes true once the file holds the
new text), then the files, then the final manifest. A run killed anywhere
leaves each file old or new (atomic writes) and a manifest that `load`
settles against the disk: a pending entry whose file now holds the new text
is adopted, any other keeps the entry from before the run. So a file opgen
wrote is never mistaken for a user edit, and a merge is never redone against
the wrong base.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OpgenError
from ..spec.paths import STATE_DIR, Owner
from .project_files import ProjectFiles

__all__ = ["Manifest", "Entry", "digest", "is_recorded_path", "MANIFEST_FILE"]

MANIFEST_FILE = f"{STATE_DIR}/manifest.json"
_VERSION = 1
_NAME_MAX = 255  # bytes of one path component on the filesystems opgen runs on


def is_recorded_path(path: str) -> bool:
    """Whether `path` is one opgen could have recorded: relative, posix, inside the project, with
    no `.`, `..` or empty parts and no control characters, each part a name the filesystem takes.

    The manifest is data (Note [Deletion authority]): an entry that fails this is reported and
    dropped, never handed to the file system (a NUL byte or `..` would stop the run there)."""
    parts = path.split("/")
    return (
        path.isprintable()
        and "\\" not in path
        and all(
            p not in ("", ".", "..") and len(p.encode("utf-8", "replace")) <= _NAME_MAX
            for p in parts
        )
    )


def digest(text: str) -> str:
    """Content hash that ignores CRLF vs LF, so a checkout with CRLF is not an "edit"."""
    return hashlib.sha256(text.replace("\r\n", "\n").encode("utf-8")).hexdigest()


@dataclass
class Entry:
    """What opgen knows of one file it wrote. The manifest is data, not authority (Note [Deletion authority])."""

    owner: Owner
    source: str
    sha256: str  # of the content opgen wrote (generated) or the scaffold (user)
    render: str = ""  # of the raw render before formatting: lets unchanged renders skip black
    base: str | None = None  # user files: the scaffold last merged in
    written: str = ""  # user files: digest of the text opgen last wrote into the file
    # user files that no spec makes now (a backend switch, a removed spec): the record is kept,
    # so the file merges again when a spec makes it again (Note [Lost records] in write/plan.py)
    dormant: bool = False

    def to_json(self) -> dict[str, str | bool]:
        """The entry as the manifest stores it (empty fields left out)."""
        return {key: val for key, val in vars(self).items() if val not in (None, "", False)}

    @classmethod
    def from_json(cls, data: object) -> Entry:
        """Raises ValueError for a damaged entry; keys this opgen does not know are ignored."""
        if not isinstance(data, dict):
            raise ValueError("an entry is not an object")
        texts = {key: data.get(key, "") for key in ("source", "sha256", "render", "written")}
        base, dormant = data.get("base"), data.get("dormant", False)
        if not all(isinstance(v, str) for v in texts.values()) or not texts["source"]:
            raise ValueError("an entry has a missing or non-text field")
        if not isinstance(base, str | None) or not isinstance(dormant, bool):
            raise ValueError("an entry has a field of the wrong type")
        return cls(Owner(str(data.get("owner"))), base=base, dormant=dormant, **texts)


@dataclass
class Manifest:
    """`.opgen/manifest.json`: an entry per file opgen wrote, and the journal of a run in progress."""

    files: dict[str, Entry] = field(default_factory=dict)
    # path -> entry that holds once the file has the new text; None: the file is being removed
    pending: dict[str, Entry | None] = field(default_factory=dict)
    missing: bool = False  # there is no manifest file
    damage: str = ""  # why (part of) the manifest could not be read; "" when it could

    @classmethod
    def load(cls, root: Path | ProjectFiles) -> Manifest:
        """The manifest of the project at `root`, settled against the disk (Note [Manifest journal]).

        What a damaged manifest still holds is kept, entry by entry, and `damage`
        says what was wrong. Reading it goes through the confined path: a
        symlink in its place is refused.
        """
        files = root if isinstance(root, ProjectFiles) else ProjectFiles(root)
        text = files.read_text(MANIFEST_FILE)
        if text is None:
            return cls(missing=True)
        manifest = cls()
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict):
                raise ValueError("it is not a JSON object")
            entries, pending = raw.get("files", {}), raw.get("pending", {})
            if not isinstance(entries, dict) or not isinstance(pending, dict):
                raise ValueError("its files are not a JSON object")
        except ValueError as exc:
            manifest.damage = f"cannot be read ({exc})"
            return manifest
        for rel, data in entries.items():
            try:
                manifest.files[rel] = Entry.from_json(data)
            except ValueError:
                manifest.damage = f"has a damaged entry ({rel})"
        journal: dict[str, Entry | None] = {}
        for rel, data in pending.items():
            if not is_recorded_path(rel):
                continue  # opgen never journals such a path: nothing to settle
            with contextlib.suppress(ValueError):
                journal[rel] = None if data is None else Entry.from_json(data)
        manifest._settle(files, journal)
        return manifest

    def _settle(self, files: ProjectFiles, pending: dict[str, Entry | None]) -> None:
        """Finish a run that was killed after the journal was written. Note [Manifest journal]."""
        for rel, entry in pending.items():
            try:
                text = files.read_text(rel)
            except OpgenError:
                continue
            if entry is None:
                if text is None:
                    self.files.pop(rel, None)
                continue
            if text is not None and digest(text) == (entry.written or entry.sha256):
                self.files[rel] = entry

    def dumps(self) -> str:
        data: dict[str, object] = {
            "version": _VERSION,
            "files": {k: v.to_json() for k, v in sorted(self.files.items())},
        }
        if self.pending:
            data["pending"] = {
                k: (v.to_json() if v is not None else None) for k, v in sorted(self.pending.items())
            }
        return json.dumps(data, indent=1, sort_keys=True) + "\n"
