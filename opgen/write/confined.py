"""Symlink-refusing file operations under one folder: the layer under `ProjectFiles` (write/project_files.py).

Note [Confined writes]
Every write, rename, delete and mkdir opgen makes in a project goes through a
`Confined` rooted at the project. A path is walked from the root one folder
at a time, each opened relative to the one before (`dir_fd`, O_NOFOLLOW,
O_DIRECTORY), and a symlink anywhere on the way, or in place of the file, is
refused with a diagnostic naming it. That includes a symlink leading back
inside the project: it could lead into `.git/`, `ops/` or `.opgen/`. A file
that is not a regular file (a folder, FIFO, socket or device) is refused
where opgen expects one, so nothing hangs on a FIFO. `..` and absolute paths
elsewhere are refused before any walk.

A file is written under a fresh name (O_EXCL) in its own folder and renamed
over its target within that folder, so a crash leaves the old or the new
text, never half, and the rename cannot leave the folder that was walked.

Out of scope: another process racing a run, swapping a folder for a symlink
(or moving a folder out of the project) while opgen holds it open. The
confinement protects against what a checkout contains, not against a
concurrent attacker on the same machine, who could write the files directly.
Where the platform has no `dir_fd` (Windows), each folder is checked with
`lstat` before it is used, which has the same guarantee without races.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import Diagnostic, OpgenError

__all__ = ["Confined", "Staged", "FileAccessError", "MAX_MANAGED_BYTES"]

# A file opgen manages (generated code, a kernel, the manifest) is never this large; a bigger
# one is refused rather than read into memory.
MAX_MANAGED_BYTES = 32 * 1024 * 1024
_FDS = (
    hasattr(os, "O_NOFOLLOW")
    and hasattr(os, "O_DIRECTORY")
    and {os.open, os.mkdir, os.rename, os.unlink, os.stat} <= os.supports_dir_fd
)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class FileAccessError(OpgenError):
    """An operating-system error (permission, disk full) on a file opgen manages, as a diagnostic."""


@dataclass(frozen=True)
class Staged:
    """A new text written beside its target under a temporary name, not yet renamed over it.

    `info`: the temporary's status once written; the rename keeps its size,
    mtime and inode, so it is the target's status after `commit`.
    """

    parts: tuple[str, ...]
    temporary: str
    info: os.stat_result


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


class _Folder:
    """An open folder inside the root: a descriptor where the platform has `dir_fd`, else its path."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self.fd = fd

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _at(self, name: str) -> str | Path:
        return name if self.fd is not None else self.path / name

    def lstat(self, name: str) -> os.stat_result | None:
        try:
            return os.lstat(self._at(name), dir_fd=self.fd)
        except FileNotFoundError:
            return None

    def open(self, name: str, flags: int, mode: int = 0o644) -> int:
        return os.open(self._at(name), flags | _NOFOLLOW | _CLOEXEC, mode, dir_fd=self.fd)

    def mkdir(self, name: str) -> None:
        os.mkdir(self._at(name), 0o777, dir_fd=self.fd)

    def rmdir(self, name: str) -> None:
        os.rmdir(self._at(name), dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        os.unlink(self._at(name), dir_fd=self.fd)

    def replace(self, name: str, target: _Folder, target_name: str) -> None:
        os.replace(
            self._at(name), target._at(target_name), src_dir_fd=self.fd, dst_dir_fd=target.fd
        )

    def listdir(self) -> list[str]:
        return os.listdir(self.fd if self.fd is not None else self.path)

    def child(self, name: str) -> _Folder:
        if self.fd is None:
            return _Folder(self.path / name, None)
        flags = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC
        return _Folder(self.path / name, os.open(name, flags, dir_fd=self.fd))


class Confined:
    """Reads and writes under `root` that never follow a symlink. Note [Confined writes]."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.created: list[tuple[str, ...]] = []  # folders this object made, oldest first

    # -- paths and messages ------------------------------------------------------------------

    def parts(self, rel: str | Path) -> tuple[str, ...]:
        """`rel` (project-relative, or absolute inside the root) as path components; refuses a way out."""
        path = Path(rel)
        if path.is_absolute():
            for base in (self.root, Path(os.path.abspath(self.root))):
                with contextlib.suppress(ValueError):
                    path = Path(os.path.abspath(path)).relative_to(base)
                    break
            else:
                raise self._refused(Path(rel), "is outside the project", "use a path inside it")
        parts = tuple(p for p in PurePosixPath(path.as_posix()).parts if p != ".")
        if ".." in parts:
            raise self._refused(self.root / path, "leads outside the project", "fix the path")
        return parts

    def _file(self, rel: str | Path) -> tuple[str, ...]:
        parts = self.parts(rel)
        if not parts:
            raise self._refused(self.root, "is the project folder, not a file", "name a file")
        return parts

    def _path(self, parts: tuple[str, ...]) -> Path:
        return self.root.joinpath(*parts)

    def _refused(self, path: Path, message: str, hint: str) -> OpgenError:
        return OpgenError(Diagnostic(path, None, message, hint))

    def _not_a_file(self, parts: tuple[str, ...], mode: int, doing: tuple[str, ...]) -> OpgenError:
        path = self._path(parts)
        what = "" if doing in (parts, (*parts, "")) else f" (while handling {'/'.join(doing)})"
        if stat.S_ISLNK(mode):
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            return self._refused(
                path,
                f"is a symlink (to {target}): opgen never writes, reads or deletes through a "
                f"symlink in the project, which could lead outside the project{what}",
                "replace the symlink with a real folder or file, or remove it, then run the command again",
            )
        expected = "a folder" if len(parts) < len(doing) else "a regular file"
        return self._refused(
            path,
            f"is {_kind(mode)}, not {expected}{what}",
            "move it away; opgen writes this path itself",
        )

    @contextlib.contextmanager
    def _io(self, verb: str, parts: tuple[str, ...]) -> Iterator[None]:
        """Turn an operating-system error into a diagnostic naming the file."""
        try:
            yield
        except OpgenError:
            raise
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise FileAccessError(
                Diagnostic(
                    self._path(parts),
                    None,
                    f"cannot {verb} {'/'.join(parts)}: {reason}",
                    "check the permissions of the file and its folder and the free disk space, then run the command again",
                )
            ) from None

    # -- walking -----------------------------------------------------------------------------

    def _walk(self, parts: tuple[str, ...], create: bool, doing: tuple[str, ...]) -> _Folder | None:
        """The open folder `parts`, walked from the root; None when missing and not `create`."""
        if not self.root.is_dir():
            if not create:
                return None
            os.makedirs(self.root, exist_ok=True)  # the project folder `opgen new` was pointed at
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC) if _FDS else None
        folder = _Folder(self.root, fd)
        try:
            for depth, name in enumerate(parts, start=1):
                info = folder.lstat(name)
                if info is None:
                    if not create:
                        folder.close()
                        return None
                    with contextlib.suppress(FileExistsError):
                        folder.mkdir(name)
                        self.created.append(parts[:depth])
                    info = folder.lstat(name)
                if info is None or not stat.S_ISDIR(info.st_mode):
                    mode = info.st_mode if info is not None else stat.S_IFREG
                    raise self._not_a_file(parts[:depth], mode, doing)
                try:
                    child = folder.child(name)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    # swapped for a symlink since the lstat above
                    raise self._not_a_file(parts[:depth], stat.S_IFLNK, doing) from None
                folder.close()
                folder = child
            return folder
        except BaseException:
            folder.close()
            raise

    @contextlib.contextmanager
    def _parent(self, parts: tuple[str, ...], create: bool) -> Iterator[_Folder | None]:
        folder = self._walk(parts[:-1], create, parts)
        try:
            yield folder
        finally:
            if folder is not None:
                folder.close()

    def _entry(self, folder: _Folder, parts: tuple[str, ...]) -> os.stat_result | None:
        """The file's own status; refuses anything but a regular file."""
        info = folder.lstat(parts[-1])
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise self._not_a_file(parts, info.st_mode, parts)
        return info

    # -- operations --------------------------------------------------------------------------

    def read_bytes(self, rel: str | Path) -> bytes | None:
        """The file's bytes, or None when it (or its folder) is missing."""
        parts = self._file(rel)
        with self._io("read", parts), self._parent(parts, create=False) as folder:
            if folder is None or self._entry(folder, parts) is None:
                return None
            fd = folder.open(parts[-1], os.O_RDONLY | _NONBLOCK)
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise self._not_a_file(parts, info.st_mode, parts)
                if info.st_size > MAX_MANAGED_BYTES:
                    raise self._refused(
                        self._path(parts),
                        f"is {info.st_size} bytes, more than opgen reads for a file it manages ({MAX_MANAGED_BYTES})",
                        "move it away",
                    )
                chunks = []
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
                return b"".join(chunks)
            finally:
                os.close(fd)

    def status(self, rel: str | Path) -> os.stat_result | None:
        """The status of a regular file at `rel` (None when missing); refuses symlinks and non-files."""
        parts = self._file(rel)
        with self._io("read", parts), self._parent(parts, create=False) as folder:
            return None if folder is None else self._entry(folder, parts)

    def stage(self, rel: str | Path, data: bytes, durable: bool = True) -> Staged:
        """Write `data` under a temporary name beside `rel` (making its folders); `commit` renames it.

        `durable`: on disk before the rename (fsync). A cache, which a crash may
        leave empty or damaged and a run then rebuilds, skips it (~3 ms a file)."""
        parts = self._file(rel)
        with self._io("write", parts), self._parent(parts, create=True) as folder:
            assert folder is not None
            info = self._entry(folder, parts)
            mode = stat.S_IMODE(info.st_mode) if info is not None else 0o644
            temporary = f".{parts[-1]}.{os.urandom(4).hex()}.tmp"
            fd = folder.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if hasattr(os, "fchmod"):
                    os.fchmod(fd, mode)
                else:  # Windows: only the read-only bit exists
                    os.chmod(folder.path / temporary, mode)
                if durable:
                    os.fsync(fd)
                written = os.fstat(fd)
                os.close(fd)
                fd = -1
            except BaseException:
                if fd >= 0:
                    os.close(fd)
                with contextlib.suppress(OSError):
                    folder.unlink(temporary)
                raise
            return Staged(parts, temporary, written)

    def commit(self, staged: Staged) -> None:
        """Rename a staged text over its target (atomic)."""
        parts = staged.parts
        with self._io("write", parts), self._parent(parts, create=False) as folder:
            if folder is None:
                raise FileNotFoundError(2, "its folder disappeared")
            self._entry(folder, parts)
            folder.replace(staged.temporary, folder, parts[-1])

    def discard(self, staged: Staged) -> None:
        """Remove a staged temporary that will not be committed (best effort)."""
        with contextlib.suppress(OSError, OpgenError):
            with self._parent(staged.parts, create=False) as folder:
                if folder is not None:
                    folder.unlink(staged.temporary)

    def write(self, rel: str | Path, data: bytes, durable: bool = True) -> os.stat_result:
        """Write a file atomically, making its folders; the status of the file written."""
        staged = self.stage(rel, data, durable)
        try:
            self.commit(staged)
        except BaseException:
            self.discard(staged)
            raise
        return staged.info

    def unlink(self, rel: str | Path) -> bool:
        """Delete a regular file if it is there; whether it was."""
        parts = self.parts(rel)
        with self._io("delete", parts), self._parent(parts, create=False) as folder:
            if folder is None or self._entry(folder, parts) is None:
                return False
            folder.unlink(parts[-1])
            return True

    def rename(self, src: str | Path, dst: str | Path) -> None:
        """Rename regular file `src` to `dst` (replacing a regular file there)."""
        src_parts, dst_parts = self._file(src), self._file(dst)
        with self._io("rename", src_parts), self._parent(src_parts, create=False) as source:
            if source is None or self._entry(source, src_parts) is None:
                raise FileNotFoundError(2, "it is missing")
            with self._parent(dst_parts, create=True) as target:
                assert target is not None
                self._entry(target, dst_parts)
                source.replace(src_parts[-1], target, dst_parts[-1])

    def mkdir(self, rel: str | Path) -> None:
        """Make the folder and its parents where missing; refuses a symlink or file on the way."""
        parts = self.parts(rel)
        with self._io("create the folder", parts):
            folder = self._walk(parts, True, parts)
            if folder is not None:
                folder.close()

    def listdir(self, rel: str | Path) -> list[str] | None:
        """The names in a folder (None when it is missing)."""
        parts = self.parts(rel)
        with self._io("list", parts):
            folder = self._walk(parts, False, parts)
            if folder is None:
                return None
            try:
                return sorted(folder.listdir())
            finally:
                folder.close()

    def check_tree(self, rel: str | Path) -> None:
        """Refuse a symlink anywhere in the folder `rel` or below it (a cache another tool writes into)."""
        parts = self.parts(rel)
        with self._io("list", parts):
            folder = self._walk(parts, False, (*parts, ""))
            if folder is None:
                return
            folder.close()
            for path, dirs, names in os.walk(self._path(parts)):
                for name in dirs + names:
                    mode = os.lstat(os.path.join(path, name)).st_mode
                    if stat.S_ISLNK(mode):
                        inner = Path(path, name).relative_to(self.root).parts
                        raise self._not_a_file(inner, mode, inner)

    def remove_created_folders(self) -> None:
        """Remove the folders this object made that are still empty (after a failed run)."""
        for parts in reversed(self.created):
            with contextlib.suppress(OSError, OpgenError), self._parent(parts, False) as folder:
                if folder is not None:
                    folder.rmdir(parts[-1])
        self.created.clear()

    def open_lock(self, rel: str | Path) -> int:
        """A descriptor of the lock file (created if missing), for `flock`."""
        parts = self._file(rel)
        with self._io("open", parts), self._parent(parts, create=True) as folder:
            assert folder is not None
            self._entry(folder, parts)
            fd = folder.open(parts[-1], os.O_RDWR | os.O_CREAT | _NONBLOCK)
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                os.close(fd)
                raise self._not_a_file(parts, info.st_mode, parts)
            return fd
