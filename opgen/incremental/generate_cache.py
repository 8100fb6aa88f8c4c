"""`.opgen/cache/generate.json`: what the last runs learned, so the next one can skip work.

See Note [Generate cache] in incremental/inputs.py for what is cached and why it is safe.
Reading goes through `ProjectFiles` like every write: a cache file that is a
symlink leading out of the project is neither read nor written.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import OpgenError
from ..spec.paths import STATE_DIR
from ..write.manifest import digest
from ..write.project_files import ProjectFiles

__all__ = ["GenerateCache", "CachedDisk", "CACHE_FILE", "ABSENT"]

CACHE_FILE = f"{STATE_DIR}/cache/generate.json"
ABSENT = "absent"  # the digest of a file that is not there
_VERSION = 3  # 2: each spec's model is a JSON text; 3: no settled plan or template bytecode


@dataclass
class GenerateCache:
    """The cache as loaded; `dirty` once this run learned something worth saving."""

    folder: str
    env: str
    specs: dict[str, dict[str, Any]] = field(
        default_factory=dict
    )  # spec -> key, name, model (JSON)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)  # output -> key, sha, render
    files: dict[str, list[Any]] = field(default_factory=dict)  # path -> size, mtime, inode, sha
    stamp_ns: int = 0  # mtime of the cache file when loaded: records as new are not trusted
    dirty: bool = False
    _texts: dict[str, str | None] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, files: ProjectFiles, folder: str, env: str) -> GenerateCache:
        """The cache of this project folder; empty when missing, damaged or made elsewhere.

        File records survive a change of environment (a file's digest does not
        depend on opgen); specs and outputs do not.
        """
        empty = cls(folder, env)
        try:
            info = files.stat(CACHE_FILE)
            text = files.read_text(CACHE_FILE) if info is not None else None
            if info is None or text is None:
                return empty
            stamp = info.st_mtime_ns
            data = json.loads(text)
        except (OSError, ValueError, OpgenError):
            return empty
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            return empty
        if data.get("folder") != folder:
            return empty
        try:
            records = {str(k): list(v) for k, v in data.get("files", {}).items()}
            if data.get("env") != env:
                return cls(folder, env, files=records, stamp_ns=stamp)
            return cls(
                folder,
                env,
                specs=dict(data.get("specs", {})),
                outputs=dict(data.get("outputs", {})),
                files=records,
                stamp_ns=stamp,
            )
        except (TypeError, ValueError, AttributeError):
            return empty

    def dumps(self) -> str:
        data = {
            "version": _VERSION,
            "folder": self.folder,
            "env": self.env,
            "specs": self.specs,
            "outputs": self.outputs,
            "files": self.files,
        }
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    def save(self, files: ProjectFiles) -> str | None:
        """Write the cache (call under the project lock); a warning when it cannot be written."""
        try:
            files.write_text(CACHE_FILE, self.dumps(), durable=False)  # damaged: read as empty
        except (OSError, OpgenError) as exc:
            reason = exc.diagnostics[0].message if isinstance(exc, OpgenError) else str(exc)
            return f"the cache {CACHE_FILE} was not written ({reason}); the next run does all the work again"
        self.dirty = False
        return None

    # -- files on disk, through their stat ---------------------------------------------

    def read(self, files: ProjectFiles, rel: str) -> str | None:
        """The file's text (None when absent), read at most once per run."""
        if rel not in self._texts:
            # stat before reading: a change while reading leaves a stat that no longer matches
            info = files.stat(rel)
            text = files.read_text(rel)
            self._texts[rel] = text
            self._remember(rel, info if text is not None else None, text)
        return self._texts[rel]

    def digest(self, files: ProjectFiles, rel: str) -> str:
        """The file's digest (ABSENT when it is not there), from its stat when that is unchanged."""
        if rel in self._texts:
            text = self._texts[rel]
            return ABSENT if text is None else digest(text)
        info = files.stat(rel)  # a symlink or anything but a regular file is refused, never opened
        if info is None:
            return ABSENT
        record = self.files.get(rel)
        if (
            record is not None
            and len(record) == 4
            and record[:3] == [info.st_size, info.st_mtime_ns, info.st_ino]
        ):
            if info.st_mtime_ns < self.stamp_ns:
                return str(record[3])
            self.dirty = (
                True  # racily clean: hash it now, and save a stamp that trusts it next time
            )
        text = self.read(files, rel)
        return ABSENT if text is None else digest(text)

    def wrote(self, rel: str, info: os.stat_result | None, text: str | None) -> None:
        """Record what this run wrote (`info`: its stat) or removed (None), so the next run need not read it."""
        self._texts[rel] = text
        self._remember(rel, info, text)

    def _remember(self, rel: str, info: os.stat_result | None, text: str | None) -> None:
        if text is None or info is None:
            if self.files.pop(rel, None) is not None:
                self.dirty = True
            return
        record = [info.st_size, info.st_mtime_ns, info.st_ino, digest(text)]
        if self.files.get(rel) != record:
            self.files[rel] = record
            self.dirty = True

    def forget_texts(self) -> None:
        """Read files again from now on (another run may have written them)."""
        self._texts.clear()

    def disk(self, files: ProjectFiles) -> CachedDisk:
        """The files as the plan reads them (`writer.Disk`): through this cache."""
        return CachedDisk(self, files)

    def keep_files(self, paths: set[str]) -> None:
        """Forget records of files no longer in play (the cache does not grow without bound)."""
        for rel in [r for r in self.files if r not in paths]:
            del self.files[rel]
            self.dirty = True


class CachedDisk:
    """`writer.Disk` over a `GenerateCache`: digests from stats where they are unchanged."""

    def __init__(self, cache: GenerateCache, files: ProjectFiles) -> None:
        self.cache = cache
        self.files = files

    def read(self, rel: str) -> str | None:
        """The file's text; None when it is not there."""
        return self.cache.read(self.files, rel)

    def digest(self, rel: str) -> str | None:
        """The digest of the file's text; None when it is not there."""
        sha = self.cache.digest(self.files, rel)
        return None if sha == ABSENT else sha
