"""What opgen last wrote, kept in `.opgen/manifest.json` inside the project.

With it opgen tells a user's edit from a stale file without git, and keeps
the scaffold each user-owned file was last generated from (the merge base).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Manifest", "Entry", "digest", "STATE_DIR"]

STATE_DIR = ".opgen"
_FILE = "manifest.json"
_VERSION = 1


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Entry:
    owner: str
    source: str
    sha256: str  # of the content opgen wrote (generated) or the scaffold (user)
    render: str = ""  # of the raw render before formatting: lets unchanged renders skip black
    base: str | None = None  # user files: the scaffold last merged in


@dataclass
class Manifest:
    files: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> "Manifest":
        path = root / STATE_DIR / _FILE
        if not path.is_file():
            return cls()
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            files = {k: Entry(**v) for k, v in raw.get("files", {}).items()}
        except (ValueError, TypeError):
            return cls()  # a damaged manifest only costs the ability to spot edits
        return cls(files)

    def dumps(self) -> str:
        data = {
            "version": _VERSION,
            "files": {k: {key: val for key, val in vars(v).items() if val not in (None, "")} for k, v in sorted(self.files.items())},
        }
        return json.dumps(data, indent=1, sort_keys=True) + "\n"
