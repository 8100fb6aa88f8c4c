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

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from .errors import OpgenError
from .fs import STATE_DIR, ProjectFiles
from .targets import Owner

__all__ = ["Manifest", "Entry", "digest", "MANIFEST_FILE"]

MANIFEST_FILE = f"{STATE_DIR}/manifest.json"
_VERSION = 1


def digest(text: str) -> str:
    """Content hash that ignores CRLF vs LF, so a checkout with CRLF is not an "edit"."""
    return hashlib.sha256(text.replace("\r\n", "\n").encode("utf-8")).hexdigest()


@dataclass
class Entry:
    owner: Owner
    source: str
    sha256: str  # of the content opgen wrote (generated) or the scaffold (user)
    render: str = ""  # of the raw render before formatting: lets unchanged renders skip black
    base: str | None = None  # user files: the scaffold last merged in
    written: str = ""  # user files: digest of the text opgen last wrote into the file

    def to_json(self) -> dict[str, str]:
        return {key: str(val) for key, val in vars(self).items() if val not in (None, "")}

    @classmethod
    def from_json(cls, data: dict[str, str]) -> Entry:
        """Raises ValueError, TypeError or KeyError for a damaged entry."""
        fields = dict(data)
        return cls(Owner(fields.pop("owner")), **fields)


@dataclass
class Manifest:
    files: dict[str, Entry] = field(default_factory=dict)
    # path -> entry that holds once the file has the new text; None: the file is being removed
    pending: dict[str, Entry | None] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path | ProjectFiles) -> Manifest:
        """The manifest of the project at `root`, settled against the disk (Note [Manifest journal]).

        A damaged manifest loads as empty. Reading it goes through the confined
        path: a symlink in its place is refused.
        """
        files = root if isinstance(root, ProjectFiles) else ProjectFiles(root)
        text = files.read_text(MANIFEST_FILE)
        if text is None:
            return cls()
        try:
            raw = json.loads(text)
            files_data = {k: Entry.from_json(v) for k, v in raw.get("files", {}).items()}
            pending = {
                k: (Entry.from_json(v) if v is not None else None)
                for k, v in raw.get("pending", {}).items()
            }
        except (ValueError, TypeError, AttributeError, KeyError):
            return cls()  # a damaged manifest only costs the ability to spot edits
        manifest = cls(files_data)
        manifest._settle(files, pending)
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
        data: dict = {
            "version": _VERSION,
            "files": {k: v.to_json() for k, v in sorted(self.files.items())},
        }
        if self.pending:
            data["pending"] = {
                k: (v.to_json() if v is not None else None) for k, v in sorted(self.pending.items())
            }
        return json.dumps(data, indent=1, sort_keys=True) + "\n"
