"""The build stamp: what the last successful `opgen build` was built from.

Note [Build stamp]
A successful `opgen build` writes `build/stamp.json`: a digest of every
input of the build, taken after generate and before ninja runs, and the
size and mtime of each library it produced. The inputs are
  * the project's files: `opgen.toml`, the specs, everything under `csrc/`
    (kernels, generated headers and registrations), every generated file the
    manifest lists (and the manifest), the template overrides, and
    `build/build.ninja` (the compile and link flags);
  * what the project's files are compiled with: torch (`torch/version.py`
    and where it is installed), the Python, the compilers and ninja found on
    PATH, the environment variables the toolchain reads, and opgen itself;
  * what the build settings name (Note [Build settings] in
    spec/build_settings.py): their sources outside csrc/ and the environment
    variables their paths start with. The stamp lists them (`watched`), so
    the next check hashes those files and reads those variables too.
`opgen build` and `opgen test` compare the stamp with the project as it is
now, reading and hashing files only: no torch, jinja2 or black import, a few
milliseconds. When it matches, `ninja -n` still checks what the stamp cannot
see (a touched file, a header outside csrc/ that a kernel includes). So
`opgen build` with nothing changed does not regenerate, relink or rerun the
ABI check, and `opgen test` never runs the tests against a library older
than its sources. A failed or partial build (`--no-generate`) removes the
stamp: the next `opgen build` or `opgen test` runs in full.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "STAMP_FILE",
    "Stamp",
    "Watched",
    "collect_inputs",
    "stale_reason",
    "write_stamp",
    "remove_stamp",
]

STAMP_FILE = "build/stamp.json"
_NINJA_FILE = "build/build.ninja"
_VERSION = 1
# Environment variables that choose the compilers, CUDA and its architectures.
_TOOL_ENV = ("CXX", "NVCC", "CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST")
_TOOLS = ("g++", "c++", "nvcc", "ninja")
_SHOWN = 3  # changed files named in a reason


@dataclass(frozen=True)
class Inputs:
    """Digest of each input file (project-relative path) and each fact about the toolchain."""

    files: Mapping[str, str]
    environment: Mapping[str, str]


@dataclass(frozen=True)
class Watched:
    """Inputs the build settings add: project files (sources outside csrc/) and environment variables."""

    files: tuple[str, ...] = ()
    environment: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stamp:
    """The inputs of the last successful build, its outputs' (size, mtime_ns), and its options."""

    inputs: Inputs
    outputs: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    ninja: str | None = None  # the ninja that built it: `ninja -n` asks the same one
    check_cuda: bool = False
    watched: Watched = Watched()

    def dumps(self) -> str:
        data = {
            "version": _VERSION,
            "files": dict(sorted(self.inputs.files.items())),
            "environment": dict(sorted(self.inputs.environment.items())),
            "outputs": {k: list(v) for k, v in sorted(self.outputs.items())},
            "ninja": self.ninja,
            "check_cuda": self.check_cuda,
            "watched": {
                "files": list(self.watched.files),
                "environment": list(self.watched.environment),
            },
        }
        return json.dumps(data, indent=1) + "\n"

    @classmethod
    def load(cls, root: Path) -> Stamp | None:
        """The stamp of `root`, or None when there is none (or it is damaged: then it proves nothing)."""
        try:
            data = json.loads((root / STAMP_FILE).read_text(encoding="utf-8"))
            if data.get("version") != _VERSION:
                return None
            watched = data.get("watched", {})
            return cls(
                Inputs(dict(data["files"]), dict(data["environment"])),
                {k: (int(v[0]), int(v[1])) for k, v in data["outputs"].items()},
                data.get("ninja"),
                bool(data.get("check_cuda")),
                Watched(
                    tuple(str(f) for f in watched.get("files", [])),
                    tuple(str(e) for e in watched.get("environment", [])),
                ),
            )
        except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
            return None


def _sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _tree(root: Path, folder: str) -> Iterable[str]:
    """Regular files under `folder`, project-relative; hidden files (editor swap files) are not inputs."""
    base = root / folder
    if not base.is_dir():
        return []
    found = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
        for name in filenames:
            if not name.startswith(".") and not name.endswith("~"):
                found.append(Path(dirpath, name).relative_to(root).as_posix())
    return found


def _config(root: Path) -> dict[str, Any]:
    try:
        with open(root / "opgen.toml", "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _manifest_files(root: Path) -> list[str]:
    """The generated files the manifest lists, and the user files under csrc/ (compiled); not Python kernels."""
    try:
        data = json.loads((root / ".opgen" / "manifest.json").read_text(encoding="utf-8"))
        entries = data.get("files", {})
        return [
            path
            for path, entry in entries.items()
            if entry.get("owner") != "user" or path.startswith("csrc/")
        ]
    except (OSError, ValueError, AttributeError):
        return []


def _project_files(root: Path) -> list[str]:
    paths = {"opgen.toml", ".opgen/manifest.json", _NINJA_FILE}
    paths.update(p for p in _tree(root, "ops") if p.endswith(".toml"))
    paths.update(_tree(root, "csrc"))
    paths.update(_manifest_files(root))
    templates = _config(root).get("options", {}).get("templates")
    if isinstance(templates, str):
        folder = (root / templates).resolve()
        if folder.is_relative_to(root.resolve()):
            paths.update(_tree(root, folder.relative_to(root.resolve()).as_posix()))
    return sorted(paths)


def _opgen_fingerprint() -> str:
    """opgen's own code and templates, by name, size and mtime: a changed opgen may generate or build differently."""
    from .. import __version__
    from ..incremental.inputs import builtin_templates_dir

    here = Path(__file__).resolve().parent.parent  # the opgen package
    parts = [__version__]
    for folder, pattern in ((here, "*.py"), (builtin_templates_dir(), "*.j2")):
        for path in sorted(folder.rglob(pattern)):
            info = path.stat()
            parts.append(f"{path.relative_to(folder)}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _environment(variables: Iterable[str] = ()) -> dict[str, str]:
    facts = {"python": sys.version, "opgen": _opgen_fingerprint()}
    spec = importlib.util.find_spec("torch")  # finds torch without importing it (~2 s)
    if spec is not None and spec.origin is not None:
        torch_dir = Path(spec.origin).parent
        facts["torch"] = f"{torch_dir} {_sha(torch_dir / 'version.py')}"
    for name in (*_TOOL_ENV, *variables):
        facts[f"${name}"] = os.environ.get(name, "")
    for tool in _TOOLS:
        facts[tool] = shutil.which(tool) or ""
    return facts


def _inside(root: Path, rel: str) -> bool:
    """Whether `rel` (from a stamp, which a checkout could bring) names a file of the project."""
    path = Path(rel)
    if path.is_absolute() or ".." in path.parts:
        return False
    try:
        return (root / path).resolve().is_relative_to(root)
    except (OSError, RuntimeError):
        return False


def collect_inputs(root: Path, watched: Watched = Watched()) -> Inputs:
    """Everything a build of `root` depends on, as it is now. Note [Build stamp]."""
    root = root.resolve()
    files = {}
    extra = {rel for rel in watched.files if _inside(root, rel)}
    for rel in sorted({*_project_files(root), *extra}):
        sha = _sha(root / rel)
        if sha is not None:
            files[rel] = sha
    names = [n for n in watched.environment if n.isidentifier()]
    return Inputs(files, _environment(names))


def size_and_mtime(path: Path) -> tuple[int, int] | None:
    """A file's size and mtime, the build's test for a changed output; None when it is not there."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns


def write_stamp(
    root: Path,
    inputs: Inputs,
    outputs: Iterable[str],
    ninja: str | None,
    check_cuda: bool,
    watched: Watched = Watched(),
) -> None:
    """Record a successful build whose inputs were `inputs` (taken before it compiled)."""
    from ..write.project_files import ProjectFiles

    files = ProjectFiles(root)
    produced = {rel: size_and_mtime(files.path(rel)) for rel in outputs}
    stamp = Stamp(
        inputs, {k: v for k, v in produced.items() if v is not None}, ninja, check_cuda, watched
    )
    files.write_text(STAMP_FILE, stamp.dumps())


def remove_stamp(root: Path) -> None:
    """Forget the last build: the next `opgen build` or `opgen test` runs in full."""
    from ..write.project_files import ProjectFiles

    ProjectFiles(root).unlink(STAMP_FILE)


def _changed(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    return sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))


def _files_reason(old: Mapping[str, str], new: Mapping[str, str]) -> str | None:
    changed = _changed(old, new)
    if not changed:
        return None
    shown = ", ".join(
        f"{p} {'is new' if p not in old else 'was removed' if p not in new else 'changed'}"
        for p in changed[:_SHOWN]
    )
    more = f" (and {len(changed) - _SHOWN} more files)" if len(changed) > _SHOWN else ""
    return f"{shown}{more} since the last build"


def _ninja_reason(root: Path, ninja: str | None) -> str | None:
    """What `ninja -n` would do (it writes nothing): a touched file or a header outside csrc/."""
    if ninja is None or not (root / _NINJA_FILE).is_file():
        return None
    try:
        run = subprocess.run(
            [ninja, "-f", _NINJA_FILE, "-n"], cwd=root, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"ninja could not check the build ({exc})"
    if run.returncode == 0 and "no work to do" in run.stdout:
        return None
    lines = [line for line in run.stdout.splitlines() if line.startswith("[")]
    first = lines[0].split("] ", 1)[-1] if lines else (run.stderr.strip() or "out of date")
    return f"ninja would rebuild ({first})"


def stale_reason(root: Path, check_cuda: bool = False) -> str | None:
    """Why the last build of `root` is out of date, in a few words; None when it is up to date.

    Cheap: reads and hashes the project's files, runs `ninja -n`; imports no
    torch. `check_cuda`: the build must also have compile-checked CUDA.
    """
    root = root.resolve()
    stamp = Stamp.load(root)
    if stamp is None:
        return "no successful `opgen build` yet"
    now = collect_inputs(root, stamp.watched)
    env = _changed(stamp.inputs.environment, now.environment)
    if env:
        return f"{', '.join(env)} changed since the last build"
    files = _files_reason(stamp.inputs.files, now.files)
    if files:
        return files
    for rel, seen in sorted(stamp.outputs.items()):
        if size_and_mtime(root / rel) != seen:
            return f"{rel} is missing or was replaced since the last build"
    if check_cuda and not stamp.check_cuda:
        return "the last build did not compile-check CUDA (--check-cuda)"
    return _ninja_reason(root, stamp.ninja)
