"""A project: its `opgen.toml` and every op spec under `ops/`."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import Diagnostic, OpgenError
from .fs import STATE_DIR
from .project_checks import project_problems
from .spec.config import CONFIG_FILE, build_config
from .spec.load import load_toml
from .spec.model import OpSpec, ProjectConfig
from .spec.validate import build_op_spec

__all__ = ["Project", "find_root", "load_project", "OPS_DIR"]

OPS_DIR = "ops"


@dataclass(frozen=True)
class Project:
    """A validated project: its opgen.toml and every op spec."""

    config: ProjectConfig
    ops: tuple[OpSpec, ...]

    @property
    def root(self) -> Path:
        return self.config.root


def find_root(start: Path) -> Path | None:
    """The first folder holding opgen.toml: `start` or one of its parents; None when there is none."""
    for folder in (start, *start.parents):
        if (folder / CONFIG_FILE).is_file():
            return folder
    return None


# Spec file names end up in generated headers, comments and test messages.
_SPEC_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\.toml\Z")


def _spec_files(root: Path, new: Iterable[str]) -> tuple[list[Diagnostic], list[Path]]:
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


def _confinement_problems(root: Path, config: ProjectConfig) -> list[Diagnostic]:
    """Folders opgen reads or writes must be real folders, never symlinks (checked before any write).

    The writer refuses a symlink on the way to every file it touches as well
    (Note [Confined writes] in confined.py); this reports the common cases
    together, before even the lock file is made.
    """
    problems: list[Diagnostic] = []
    pkg = config.package
    seen: set[str] = set()
    folders = (
        "tests",
        STATE_DIR,
        pkg,
        f"{pkg}/_generated",
        f"{pkg}/kernels",
        f"{pkg}/sharding_rules",
        "csrc",
    )
    for rel in folders:
        parts = rel.split("/")
        for depth in range(1, len(parts) + 1):
            step = "/".join(parts[:depth])
            path = root / step
            if step in seen or not path.is_symlink():
                continue
            seen.add(step)
            problems.append(
                Diagnostic(
                    path,
                    None,
                    f"{step}/ is a symlink (to {os.readlink(path)}): opgen never writes through a "
                    "symlink in the project, which could lead outside the project",
                    f"make {step}/ a real folder",
                )
            )
    return problems


def _file_problems(root: Path, files: list[Path]) -> tuple[list[Diagnostic], list[Path]]:
    """Problems with the spec files themselves, and the files that can be loaded."""
    problems: list[Diagnostic] = []
    good: list[Path] = []
    ops_dir = root / OPS_DIR
    for path in files:
        if not _SPEC_FILE.match(path.name):
            problems.append(
                Diagnostic(
                    ops_dir,
                    None,
                    f"spec file name {path.name!r} has characters other than letters, digits, '_', '-' and '.'",
                    "rename the file, e.g. ops/my_op.toml",
                )
            )
        elif path.is_symlink() and not path.resolve().is_relative_to(root):
            problems.append(
                Diagnostic(
                    path,
                    None,
                    "spec is a symlink leading outside the project",
                    "copy the file into ops/ instead",
                )
            )
        else:
            good.append(path)
    return problems, good


def load_project(root: Path, sources: Mapping[str, str] | None = None) -> Project:
    """Load and validate the project at `root`: every spec and every check across specs.

    All problems are collected into one list and raised together (OpgenError),
    before anything is rendered or written. `sources` (project-relative path ->
    text) are files about to be written, e.g. a new spec and opgen.toml: they
    are validated as if they were on disk.
    """
    root = root.resolve()
    sources = sources or {}
    config = build_config(load_toml(root / CONFIG_FILE, sources.get(CONFIG_FILE)))
    problems = _confinement_problems(root, config)
    folder_problems, listed = _spec_files(root, sources)
    file_problems, files = _file_problems(root, listed)
    problems += folder_problems + file_problems
    docs = []
    for path in files:
        try:
            docs.append(load_toml(path, sources.get(path.relative_to(root).as_posix())))
        except OpgenError as exc:
            problems.extend(exc.diagnostics)
    op_names = frozenset(_declared_name(d.data) for d in docs) - {None}
    ops: list[OpSpec] = []
    for doc in docs:
        try:
            ops.append(build_op_spec(doc, config, op_names))  # type: ignore[arg-type]
        except OpgenError as exc:
            problems.extend(exc.diagnostics)
    problems.extend(project_problems(root, ops, config.cpp_target))
    if problems:
        # one block per file, each file's problems in the order found
        raise OpgenError(sorted(problems, key=lambda d: str(d.path or "")))
    return Project(config, tuple(ops))


def _declared_name(data: dict) -> str | None:
    name = data.get("name")
    if isinstance(name, str) and "::" in name:
        return name.split("::", 1)[1].split(".", 1)[0]
    return None
