"""`.opgen/cache/templates.bin`: the templates compiled by earlier runs, trusted only as written.

Note [Compiled templates]
Jinja compiles a template (parse, generate Python, compile) the first time a
process loads it: ~5 ms a template, most of the rendering of a run that
re-renders one op's files. A run keeps what it compiled in one file, read by
the next run that renders.
- What an entry is: jinja's bytecode bucket, keyed on the template's name and
  file (an override and the built-in it replaces are different entries),
  holding the checksum of the source it was compiled from. A template or an
  override whose text changed no longer matches its entry and is compiled
  again. What else shapes the code (jinja2, Python, opgen's Environment
  settings) is in the environment digest: when it changes, the cache drops
  its record of this file (`GenerateCache.load`) and compiling starts afresh.
- Trust: the file holds code that runs, so it is read only as this opgen
  wrote it. `generate.json` (bound to the project folder: Note [Generate
  cache] in incremental/inputs.py) records its size, mtime and ctime (in ns), inode and
  digest once written. A file that came with a checkout, or was replaced
  since, has another inode and ctime (which no one can set: an archive can
  carry an mtime, and a fresh machine may hand out the same inodes again) and
  is never unmarshalled. A damaged or foreign file costs a recompile, never a
  wrong render.
- Writes: only by a run that writes files (never `--check` or `--dry-run`),
  under the project lock, through the confined path (Note [Confined
  writes] in write/confined.py), and only when something was compiled. A symlink at
  the path is refused: nothing is written, a warning says so, and the next
  run compiles again.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from typing import Any

from ..errors import OpgenError
from ..spec.paths import STATE_DIR
from ..write.project_files import ProjectFiles
from .generate_cache import GenerateCache

__all__ = ["CompiledTemplates", "TEMPLATES_FILE"]

TEMPLATES_FILE = f"{STATE_DIR}/cache/templates.bin"
_HEADER = b"opgen compiled templates 1\n"


class CompiledTemplates:
    """Template key -> jinja bucket bytes, read from the project on first use; `changed` once
    this run compiled something new."""

    def __init__(self, files: ProjectFiles, cache: GenerateCache) -> None:
        self.files = files
        self.cache = cache
        self.changed = False
        self._blobs: dict[str, bytes] | None = None

    def get(self, key: str) -> bytes | None:
        return self._loaded().get(key)

    def put(self, key: str, data: bytes) -> None:
        blobs = self._loaded()
        if blobs.get(key) != data:
            blobs[key] = data
            self.changed = True

    def _loaded(self) -> dict[str, bytes]:
        if self._blobs is None:
            self._blobs = _read(self.files, self.cache.templates)
        return self._blobs

    def save(self) -> str | None:
        """Write what this run compiled and record it in the cache (call under the project lock,
        before the cache is saved); a warning when it cannot be written."""
        if not self.changed or self._blobs is None:
            return None
        data = _HEADER + marshal.dumps(self._blobs)
        self.cache.templates = None  # until the new file is written: never another file's record
        self.cache.dirty = True
        try:
            self.files.confined.write(TEMPLATES_FILE, data, durable=False)  # see _read
            info = self.files.stat(TEMPLATES_FILE)  # after the rename, which sets the ctime
        except (OSError, OpgenError) as exc:
            reason = exc.diagnostics[0].message if isinstance(exc, OpgenError) else str(exc)
            return (
                f"the template cache {TEMPLATES_FILE} was not written ({reason}); "
                "the next run compiles the templates again"
            )
        if info is None:
            return None  # removed at once: the next run compiles again
        self.cache.templates = [*_stamp(info), hashlib.sha256(data).hexdigest()]
        self.changed = False
        return None


def _stamp(info: os.stat_result) -> list[int]:
    """What the cache records of the file besides its digest (see the Note for why each)."""
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]


def _read(files: ProjectFiles, record: list[Any] | None) -> dict[str, bytes]:
    """The compiled templates, if the file is the one `record` says this opgen wrote; else none."""
    if not record:
        return {}
    try:
        info = files.stat(TEMPLATES_FILE)  # a symlink or anything but a regular file is refused
        if info is None or _stamp(info) != record[:-1]:
            return {}
        data = files.confined.read_bytes(TEMPLATES_FILE)
    except (OSError, OpgenError):
        return {}
    if data is None or hashlib.sha256(data).hexdigest() != record[-1]:
        return {}
    if not data.startswith(_HEADER):
        return {}
    try:
        blobs = marshal.loads(data[len(_HEADER) :])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(blobs, dict):
        return {}
    return {k: v for k, v in blobs.items() if isinstance(k, str) and isinstance(v, bytes)}
