"""The one path by which opgen changes files in a project.

Note [Confined writes]
Every write, rename, delete and mkdir opgen makes in a project goes through a
`ProjectFiles` rooted at the project: generated and user files, the manifest
and its journal, merge backups, template overrides and their records,
`opgen.toml` and new specs, `build/build.ninja` and the compiled library.
Each path must resolve inside the root; one that leads out (through `..` or
a symlink) is refused with a diagnostic. Writes are atomic (temporary file,
fsync, rename), so a crash leaves the old or the new text, never half.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .errors import Diagnostic, OpgenError

__all__ = ["ProjectFiles", "atomic_write", "STATE_DIR"]

STATE_DIR = ".opgen"
# the manifest and template records are committed; the lock, backups and caches are not
_STATE_IGNORE = "lock\nbackup/\ncache/\n"


def atomic_write(path: Path, text: str) -> os.stat_result:
    """Write via a temporary file and rename, so a crash leaves old or new, never half.

    Returns the stat of the file written (the rename keeps its size, mtime and
    inode), taken before anyone else could change it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
            info = os.fstat(handle.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return info


class ProjectFiles:
    """Reads and confined writes under one project root. Note [Confined writes]."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._prefix = str(self.root) + os.sep
        # project-relative folders already found to be real folders inside the project
        self._inside: set[str] = set()

    def path(self, rel: str | Path) -> Path:
        """The absolute path of `rel` (project-relative, or absolute inside the project); refuses a way out."""
        return Path(self.locate(rel))

    def locate(self, rel: str | Path) -> str:
        """`path` as a string: the same check, without building a `Path` (cheap enough per file).

        A plain relative path is checked component-wise: its folder once per
        run (remembered only when it exists, a real folder inside the
        project), its last component with one lstat. Anything else takes
        the full `resolve()`.
        """
        text = os.fspath(rel)
        folder, _, name = text.rpartition("/")
        parts = text.split("/")
        if os.path.isabs(text) or os.sep != "/" or ".." in parts or "" in parts[:-1]:
            return self._resolved(self.root / rel)
        if folder and folder not in self._inside:
            real = os.path.realpath(self._prefix + folder)
            if not (real + os.sep).startswith(self._prefix) or not os.path.isdir(real):
                return self._resolved(self.root / rel)
            if real == self._prefix + folder:  # no symlink on the way: remember it
                self._inside.add(folder)
        full = self._prefix + text
        if name and os.path.islink(full):
            return self._resolved(Path(full))
        return full

    def _resolved(self, target: Path) -> str:
        if not target.resolve().is_relative_to(self.root):
            raise OpgenError(
                Diagnostic(
                    target,
                    None,
                    "refusing to write outside the project (the path or a symlink leads out)",
                    "remove the symlink or fix the path",
                )
            )
        return str(target)

    def read_text(self, rel: str | Path) -> str | None:
        """The file exactly as it is (no newline translation), or None when absent."""
        path = self.path(rel)
        try:
            with open(path, encoding="utf-8", newline="") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except (IsADirectoryError, UnicodeDecodeError) as exc:
            raise OpgenError(
                Diagnostic(
                    path,
                    None,
                    f"cannot read this file opgen manages: {exc}",
                    "move it away; opgen will write it again",
                )
            ) from None

    def exists(self, rel: str | Path) -> bool:
        """Whether the (confined) path exists."""
        return self.path(rel).exists()

    def write_text(self, rel: str | Path, text: str) -> os.stat_result:
        """Write atomically, creating the folders on the way; the stat of the file written."""
        return atomic_write(self.path(rel), text)

    def replace(self, src: str | Path, dst: str | Path) -> None:
        """Rename `src` to `dst`, replacing it; both inside the project."""
        os.replace(self.path(src), self.path(dst))

    def unlink(self, rel: str | Path) -> bool:
        """Delete the file if it is there; whether it was."""
        try:
            self.path(rel).unlink()
        except FileNotFoundError:
            return False
        return True

    def mkdir(self, rel: str | Path) -> Path:
        """Create the folder (and its parents) if missing; returns its path."""
        path = self.path(rel)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def sweep_temporaries(self, rel: str | Path) -> None:
        """Remove temporaries that a killed `atomic_write` of `rel` left behind."""
        path = self.path(rel)
        if path.parent.is_dir():
            for stale in path.parent.glob(f".{path.name}.*.tmp"):
                with contextlib.suppress(OSError):
                    self.path(stale).unlink()

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Serialize runs on one project: a second run waits for the first."""
        self.mkdir(STATE_DIR)
        ignore = f"{STATE_DIR}/.gitignore"
        if "cache/" not in (self.read_text(ignore) or ""):
            self.write_text(ignore, _STATE_IGNORE)
        with open(self.path(f"{STATE_DIR}/lock"), "a+") as handle:
            try:
                import fcntl
            except ImportError:  # Windows
                import msvcrt

                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
                try:
                    yield
                finally:
                    handle.seek(0)
                    msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
                return
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
