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

from .fs import STATE_DIR
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
    def load(cls, root: Path) -> Manifest:
        path = root / MANIFEST_FILE
        if not path.is_file():
            return cls()
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            files = {k: Entry.from_json(v) for k, v in raw.get("files", {}).items()}
            pending = {
                k: (Entry.from_json(v) if v is not None else None)
                for k, v in raw.get("pending", {}).items()
            }
        except (ValueError, TypeError, AttributeError, KeyError):
            return cls()  # a damaged manifest only costs the ability to spot edits
        manifest = cls(files)
        manifest._settle(root, pending)
        return manifest

    def _settle(self, root: Path, pending: dict[str, Entry | None]) -> None:
        """Finish a run that was killed after the journal was written. Note [Manifest journal]."""
        for rel, entry in pending.items():
            target = root / rel
            if entry is None:
                if not target.exists():
                    self.files.pop(rel, None)
                continue
            try:
                text = target.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if digest(text) == (entry.written or entry.sha256):
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
