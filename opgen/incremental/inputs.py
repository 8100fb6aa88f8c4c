"""What the output of `opgen generate` depends on besides the specs: opgen itself and the templates.

Note [Generate cache]
A run skips the work whose inputs did not change since a run that
succeeded. Each output file is keyed on a hash of everything that determines
it (`opgen/render/output_keys.py`): this environment (`environment_digest`: opgen's
version and source, Python, and the installed black, jinja2 and torch), the
template sources (`templates_digest`: the built-ins and the override
folder), `opgen.toml`, and the specs it comes from: its own op's spec and
those of the ops its gradient and forward-mode formulas call; every spec
for package-wide files. The cache (`opgen/incremental/generate_cache.py`, `.opgen/cache/generate.json`) keeps,
per output, the key and the digest of the formatted text; per valid spec,
its model, keyed on the spec text, opgen.toml, the environment and the set
of op names; and per file opgen read or wrote, its size, mtime and inode
with its digest.
- A spec whose key is unchanged is not validated again. Invalid specs are
  never cached, so every diagnostic still appears.
- An output whose key is unchanged is not rendered or formatted: its digest
  is known, and its text is on disk or in the manifest when it is needed.
- A file whose size, mtime and inode are those recorded (and older than the
  cache itself, as git does for racily clean files) is not read again; any
  other is hashed, so a generated file edited or deleted by hand is found.
- A run where nothing changed still loads every spec from the cache and
  plans every file: on 100 ops that takes about 0.2 s (bench/opgen_speed.py),
  inside the 0.3 s the no-op run may take; recording and replaying that plan
  saved less than 0.2 s and was removed.
The cache is local state: git-ignored, and bound to the project folder (its
path, device and inode), so a cache that came with a checkout is ignored;
a damaged one is read as empty.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from .. import __version__
from ..errors import Diagnostic
from ..spec.paths import CONFIG_FILE, OPS_DIR, STATE_DIR

__all__ = [
    "builtin_templates_dir",
    "environment_digest",
    "templates_digest",
    "folder_identity",
    "combine",
    "spec_files",
    "CONFIG_FILE",
    "OPS_DIR",
    "EJECTED_FILE",
]

# the override records of Note [Ejected templates] in render/overrides.py: they decide its warnings
EJECTED_FILE = f"{STATE_DIR}/ejected.json"
# installed packages that shape the output: black formats it, jinja2 renders it, torchgen parses schemas
_PACKAGES = ("black", "jinja2", "torch")


def combine(parts: Iterable[str]) -> str:
    """One digest of several strings (each may hold anything but NUL)."""
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _tree_digest(folder: Path, suffixes: tuple[str, ...] | None) -> list[str]:
    """Relative path and content digest of every file under `folder` (hidden ones skipped)."""
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
        for name in filenames:
            if name.startswith(".") or (suffixes and not name.endswith(suffixes)):
                continue
            path = Path(dirpath) / name
            found.append((path.relative_to(folder).as_posix(), path))
    parts = []
    for rel, path in sorted(found):
        try:
            parts.append(f"{rel}:{hashlib.sha256(path.read_bytes()).hexdigest()}")
        except OSError:
            parts.append(f"{rel}:unreadable")
    return parts


def _package_stamp(name: str) -> str:
    """Where `name` is installed and when its entry file was written (a reinstall changes it)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return f"{name}:missing"
    try:
        info = os.stat(spec.origin)
    except OSError:
        return f"{name}:{spec.origin}"
    return f"{name}:{spec.origin}:{info.st_size}:{info.st_mtime_ns}"


# opgen's package folder: its source is an input of every output
_PACKAGE = Path(__file__).resolve().parent.parent


def builtin_templates_dir() -> Path:
    """Installed wheels carry templates inside the package; a checkout keeps them at the top."""
    packaged = _PACKAGE / "templates"
    if packaged.is_dir():
        return packaged
    return _PACKAGE.parent / "templates"


@functools.cache
def environment_digest() -> str:
    """opgen's version and source, the Python version and the installed black, jinja2 and torch."""
    source = _tree_digest(_PACKAGE, (".py",))
    stamps = [_package_stamp(name) for name in _PACKAGES]
    return combine([__version__, sys.version, *source, *stamps])


def templates_digest(builtin: Path, override: Path | None) -> str:
    """Every template source a render may read: the override folder first, then the built-ins."""
    parts = ["builtin", *_tree_digest(builtin, (".j2",))]
    if override is not None and override.is_dir():
        parts += ["override", *_tree_digest(override, None)]
    return combine(parts)


def find_root(start: Path) -> Path | None:
    """The first folder holding opgen.toml: `start` or one of its parents; None when there is none."""
    for folder in (start, *start.parents):
        if (folder / CONFIG_FILE).is_file():
            return folder
    return None


def spec_files(root: Path, new: Iterable[str] = ()) -> tuple[list[Diagnostic], list[Path]]:
    """The specs under ops/ (and new ones about to be written); hidden files (editor locks and backups) are skipped.

    `ops` that is not a real, readable folder is an error, never "no specs":
    a project that seems to have none would lose every generated file.
    """
    folder = root / OPS_DIR
    names: list[str] = []
    problem: tuple[str, str] | None = None
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        mode = None
    if mode is None:
        pass
    elif stat.S_ISLNK(mode):
        problem = (
            f"ops/ is a symlink (to {os.readlink(folder)}): opgen reads specs only from a real "
            "folder, as a symlink could lead outside the project",
            "make ops/ a real folder holding one spec per op",
        )
    elif not stat.S_ISDIR(mode):
        problem = (
            "ops is a file, not a folder: opgen reads one spec per op from the folder ops/",
            "move the file away and make ops/ a folder holding the specs",
        )
    else:
        try:
            names = os.listdir(folder)
        except OSError as exc:
            problem = (f"cannot list ops/: {exc.strerror}", "make the folder ops/ readable")
    found = {folder / n for n in names if n.endswith(".toml") and not n.startswith(".")}
    found |= {root / rel for rel in new if Path(rel).parent == Path(OPS_DIR)}
    problems = [Diagnostic(folder, None, *problem)] if problem else []
    return problems, sorted(found)


def folder_identity(root: Path) -> str:
    """The project folder as this machine knows it: a cache made elsewhere does not match."""
    try:
        info = os.stat(root)
    except OSError:
        return f"{root}:new"  # `opgen new` creates the folder in this run: nothing is cached yet
    return f"{root}:{info.st_dev}:{info.st_ino}"
