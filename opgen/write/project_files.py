"""The one path by which opgen changes files in a project.

Every write, rename, delete and mkdir of every command goes through a
`ProjectFiles` rooted at the project, and from there through `Confined`
(Note [Confined writes] in write/confined.py): generated and user files, the
manifest and its journal, merge and `--force` backups, template overrides
and their records, `opgen.toml` and new specs, `build/` (the ninja file, and
the folders and checks before ninja writes its own outputs), and the caches
of `opgen test`.

Note [Staged writes]
A run that changes several files stages them first: every new text is
written to a temporary beside its target, and only when all of them are on
disk are they renamed over their targets, in the order the run added them. An I/O error while
staging (a read-only folder, a full disk) removes the temporaries and leaves
the project as it was. The renames are not atomic as a group: a run that is
killed, or fails, between two renames leaves some files new and some old.
The manifest journal (Note [Manifest journal] in write/manifest.py) is written
after staging and before the first rename, so the next run tells which files
hold the new text and finishes the job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import Diagnostic, OpgenError
from ..spec.paths import STATE_DIR
from .confined import MAX_MANAGED_BYTES, Confined, FileAccessError, Staged

__all__ = ["ProjectFiles", "Batch", "atomic_write", "STATE_DIR"]

# the manifest and template records are committed; the lock, backups and caches are not
_STATE_IGNORE = "lock\nbackup/\ncache/\n"


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_WALK = object()  # `_read_in_real_folder` cannot answer: walk from the root


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary file and a rename, so a crash leaves old or new, never half."""
    Confined(path.parent).write(path.name, text.encode("utf-8"))


_TOKEN = re.compile(r"[A-Za-z0-9_]{6,16}")


def _temporary_target(entry: str) -> str | None:
    """The name of the file a temporary `.NAME.TOKEN.tmp` was staged for; None for any other name.

    Parsed, not matched against a pattern per file: a run that writes one file
    sweeps the folders of all it manages, and compiling a pattern for each of
    hundreds of names cost more than the writes."""
    if not (entry.startswith(".") and entry.endswith(".tmp")):
        return None
    name, dot, token = entry[1:-4].rpartition(".")
    return name if dot and name and _TOKEN.fullmatch(token) else None


class ProjectFiles:
    """Reads and confined writes under one project root. Note [Confined writes]."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.confined = Confined(self.root)
        # project-relative folders a walk found real this run -> their absolute paths (`stat`)
        self._real_folders: dict[str, str] = {}

    def path(self, rel: str | Path) -> Path:
        """The absolute path of file `rel`, checked: no symlink on the way, not a symlink or folder itself."""
        self.confined.status(rel)
        return self.root.joinpath(*self.confined.parts(rel))

    def read_text(self, rel: str | Path) -> str | None:
        """The file exactly as it is (no newline translation), or None when absent.

        In a folder that `stat` found real, a regular file is read with one
        open (no symlink followed); anything else takes the walk from the root,
        which refuses it with its diagnostic (the trade `stat` makes).
        """
        data = self._read_in_real_folder(rel)
        if data is _WALK:
            data = self.confined.read_bytes(rel)
        if data is None:
            return None
        assert isinstance(data, bytes)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise OpgenError(
                Diagnostic(
                    self.root / rel,
                    None,
                    f"cannot read this file opgen manages: {exc}",
                    "move it away; opgen will write it again",
                )
            ) from None

    def stat(self, rel: str | Path) -> os.stat_result | None:
        """The status of the regular file at `rel` (None when missing); a symlink or folder there is refused.

        A run asks this of every file it manages, several times: after one walk
        from the root has found a folder real (no symlink on the way), a file in
        it takes one `lstat`; anything but a regular file there takes the walk
        again, which refuses it with its diagnostic. (A folder swapped for a
        symlink while the run holds it is out of scope: Note [Confined writes].)
        """
        text = os.fspath(rel)
        folder, _, name = text.rpartition("/")
        if folder in self._real_folders and name not in ("", ".", ".."):
            try:
                info = os.lstat(os.path.join(self._real_folders[folder], name))
            except FileNotFoundError:
                return None
            except OSError:
                info = None
            if info is not None and stat.S_ISREG(info.st_mode):
                return info
        info = self.confined.status(rel)
        parts = folder.split("/") if folder else []
        if (
            os.sep == "/"
            and not os.path.isabs(text)
            and all(p not in ("", ".", "..") for p in parts)
        ):
            real = os.path.join(self.root, folder)
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(real).st_mode):  # walked without a symlink: real
                    self._real_folders[folder] = real
        return info

    def _read_in_real_folder(self, rel: str | Path) -> bytes | object | None:
        """The bytes of a regular file in a folder known real; `_WALK` when this cannot tell."""
        folder, _, name = os.fspath(rel).rpartition("/")
        real = self._real_folders.get(folder)
        if real is None or name in ("", ".", "..") or not _NOFOLLOW:
            return _WALK
        flags = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(os.path.join(real, name), flags)
        except FileNotFoundError:
            return None
        except OSError:
            return _WALK  # a symlink (ELOOP), a permission problem: the walk says which
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_MANAGED_BYTES:
                return _WALK
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def exists(self, rel: str | Path) -> bool:
        """Whether a regular file is at `rel` (a symlink or a folder there is refused)."""
        return self.confined.status(rel) is not None

    def write_text(self, rel: str | Path, text: str, durable: bool = True) -> os.stat_result:
        """Write atomically, creating the folders on the way; the status of the file written.

        `durable=False` for caches only (`Confined.stage`)."""
        return self.confined.write(rel, text.encode("utf-8"), durable)

    def replace(self, src: str | Path, dst: str | Path) -> None:
        """Rename `src` to `dst`, replacing it; both inside the project."""
        self.confined.rename(src, dst)

    def unlink(self, rel: str | Path) -> bool:
        """Delete the file if it is there; whether it was."""
        return self.confined.unlink(rel)

    def mkdir(self, rel: str | Path) -> Path:
        """Create the folder (and its parents) if missing; returns its path."""
        self.confined.mkdir(rel)
        return self.root.joinpath(*self.confined.parts(rel))

    def sweep_temporaries(self, paths: Iterable[str]) -> None:
        """Remove temporaries that a killed run left beside `paths` (one listing per folder)."""
        by_folder: dict[str, set[str]] = {}
        for rel in paths:
            folder, _, name = rel.rpartition("/")
            by_folder.setdefault(folder, set()).add(name)
        for folder, names in sorted(by_folder.items()):
            for entry in self.confined.listdir(folder or ".") or []:
                if _temporary_target(entry) in names:
                    with contextlib.suppress(OpgenError):  # not a regular file: not ours
                        self.confined.unlink(f"{folder}/{entry}" if folder else entry)

    def batch(self) -> Batch:
        """A set of writes, renames and removals applied together. Note [Staged writes]."""
        return Batch(self)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Serialize runs on one project: a second run waits for the first."""
        self.mkdir(STATE_DIR)
        ignore = f"{STATE_DIR}/.gitignore"
        if "cache/" not in (self.read_text(ignore) or ""):
            self.write_text(ignore, _STATE_IGNORE)
        with os.fdopen(self.confined.open_lock(f"{STATE_DIR}/lock"), "a+") as handle:
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


def _with_note(exc: OpgenError, note: str) -> OpgenError:
    first, *rest = exc.diagnostics
    return type(exc)([dataclasses.replace(first, message=f"{first.message}; {note}"), *rest])


class Batch:
    """Writes, renames and removals planned together and applied in two phases. Note [Staged writes].

    `stage()` writes every new text to a temporary beside its target; `commit()`
    then applies the steps in the order they were added. A failure while
    staging leaves the project as it was.
    """

    def __init__(self, files: ProjectFiles) -> None:
        self._files = files
        self._steps: list[tuple[str, str, str]] = []  # (kind, path, text or rename target)
        self._staged: dict[int, Staged] = {}
        # what `commit` wrote (path, status, text) or removed (path, None, None)
        self.written: list[tuple[str, os.stat_result | None, str | None]] = []

    def write(self, rel: str, text: str) -> None:
        """Replace (or create) `rel` with `text`."""
        self._steps.append(("write", rel, text))

    def rename(self, src: str, dst: str) -> None:
        """Move `src` to `dst` (both inside the project)."""
        self._steps.append(("rename", src, dst))

    def remove(self, rel: str) -> None:
        """Delete `rel` if it is there."""
        self._steps.append(("remove", rel, ""))

    def __len__(self) -> int:
        return len(self._steps)

    def stage(self) -> None:
        """Write every new text to its temporary; on failure remove them all and raise."""
        confined = self._files.confined
        try:
            for index, (kind, rel, text) in enumerate(self._steps):
                if kind == "write":
                    self._staged[index] = confined.stage(rel, text.encode("utf-8"))
        except BaseException as exc:
            self.discard()
            if isinstance(exc, FileAccessError):
                raise _with_note(exc, "nothing was changed") from None
            raise

    def discard(self) -> None:
        """Remove the temporaries not yet renamed, and the folders made for them."""
        for staged in self._staged.values():
            self._files.confined.discard(staged)
        self._staged.clear()
        self._files.confined.remove_created_folders()

    def commit(self) -> None:
        """Apply every step in order (the writes were staged); on failure say how far it got."""
        confined = self._files.confined
        done = 0  # steps other than writes; a write is done once it is no longer staged
        try:
            for index, (kind, rel, text) in enumerate(self._steps):
                if kind == "write":
                    staged = self._staged[index]
                    confined.commit(staged)
                    del self._staged[index]
                    self.written.append((rel, staged.info, text))
                    continue
                if kind == "rename":
                    confined.rename(rel, text)
                elif kind == "remove":
                    confined.unlink(rel)
                    self.written.append((rel, None, None))
                done += 1
        except BaseException as exc:
            writes = [i for i, (kind, _, _) in enumerate(self._steps) if kind == "write"]
            done += sum(i not in self._staged for i in writes)
            for staged in self._staged.values():
                confined.discard(staged)
            self._staged.clear()
            if isinstance(exc, FileAccessError):
                changes = len(self._steps)
                note = (
                    f"{done} of {changes} changes were made before this one; "
                    "the next `opgen generate` finishes the job"
                )
                raise _with_note(exc, note) from None
            raise
        confined.created.clear()
