"""A project: its `opgen.toml` and every op spec under `ops/`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Diagnostic, OpgenError
from ..incremental.generate_cache import ABSENT, GenerateCache
from ..incremental.inputs import OPS_DIR, combine, find_root, spec_files
from ..spec.config import CONFIG_FILE, build_config
from ..spec.load import LoadedToml, load_toml, read_text
from ..spec.model import OpSpec, ProjectConfig
from ..spec.paths import STATE_DIR
from ..spec.serial import op_from_json, op_to_json
from ..spec.validate import build_op_spec
from ..spec.warnings import keyword_only_formulas_warning, sharding_key_warning, spec_warnings
from ..write.manifest import digest
from ..write.project_files import ProjectFiles
from .checks import project_problems

__all__ = ["Project", "find_root", "load_project", "OPS_DIR"]


@dataclass(frozen=True)
class Project:
    """A validated project: its opgen.toml and every op spec.

    `digests`: project-relative path -> digest of the text it was loaded from
    (opgen.toml and every spec), for the keys of Note [Generate cache].
    `warnings`: what works but will cost the user later (spec/warnings.py),
    computed from the models, so a spec restored from the cache has them too.
    """

    config: ProjectConfig
    ops: tuple[OpSpec, ...]
    digests: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[Diagnostic, ...] = ()

    @property
    def root(self) -> Path:
        return self.config.root


# Spec file names end up in generated headers, comments and test messages.
_SPEC_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\.toml\Z")


def _confinement_problems(root: Path, config: ProjectConfig) -> list[Diagnostic]:
    """Folders opgen reads or writes must be real folders, never symlinks (checked before any write).

    The writer refuses a symlink on the way to every file it touches as well
    (Note [Confined writes] in write/confined.py); this reports the common cases
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


def load_project(
    root: Path,
    *,
    sources: Mapping[str, str] | None = None,
    cache: GenerateCache | None = None,
) -> Project:
    """Load and validate the project at `root`: every spec and every check across specs.

    All problems are collected into one list and raised together (OpgenError),
    before anything is rendered or written. `sources` (project-relative path ->
    text) are files about to be written, e.g. a new spec and opgen.toml: they
    are validated as if they were on disk. With a `cache`, a spec validated by
    an earlier run with the same text, opgen.toml, opgen and op names is not
    validated again (Note [Generate cache] in incremental/inputs.py), and the cache learns
    the specs validated now.
    """
    root = root.resolve()
    sources = sources or {}
    config_path = root / CONFIG_FILE
    config = build_config(load_toml(config_path, sources.get(CONFIG_FILE)))
    digests: dict[str, str] = {}
    read_digest = _digester(root, cache)
    config_sha = read_digest(CONFIG_FILE, sources.get(CONFIG_FILE))
    if config_sha is not None:
        digests[CONFIG_FILE] = config_sha
    problems = _confinement_problems(root, config)
    folder_problems, listed = spec_files(root, sources)
    file_problems, files = _file_problems(root, listed)
    problems += folder_problems + file_problems
    specs: list[_Spec] = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        try:
            sha = read_digest(rel, sources.get(rel))
        except OpgenError:
            sha = None  # load_toml reports it
        if sha is not None:
            digests[rel] = sha
        record = cache.specs.get(rel) if cache is not None and sha is not None else None
        spec = _Spec(path, rel, sha, record if record and record.get("sha") == sha else None)
        if spec.record is None:
            try:
                spec.doc = load_toml(path, sources.get(rel))
            except OpgenError as exc:
                problems.extend(exc.diagnostics)
                continue
        specs.append(spec)
    op_names = frozenset(s.name for s in specs if s.name is not None)
    names = combine(sorted(op_names))
    ops: list[OpSpec] = []
    for spec in specs:
        key = (
            combine([cache.env, digests.get(CONFIG_FILE, ""), spec.sha or "", names])
            if cache
            else ""
        )
        op = spec.restore(key, root)
        if op is None:
            try:
                spec.doc = spec.doc or load_toml(spec.path, sources.get(spec.rel))
                op = build_op_spec(spec.doc, config, op_names)
            except OpgenError as exc:
                problems.extend(exc.diagnostics)
                continue
        spec.key, spec.op = key, op
        ops.append(op)
    problems.extend(project_problems(root, ops, config.cpp_target))
    if problems:
        # one block per file, each file's problems in the order found
        raise OpgenError(sorted(problems, key=lambda d: str(d.path or "")))
    if cache is not None:
        _remember_specs(cache, specs, root)
    warnings = tuple(w for op in ops for w in spec_warnings(op))
    warnings += tuple(
        w
        for op in ops
        for check in (sharding_key_warning, keyword_only_formulas_warning)
        if (w := check(op, config.private_torch)) is not None
    )
    return Project(config, tuple(ops), digests, warnings)


def _digester(root: Path, cache: GenerateCache | None) -> Callable[[str, str | None], str | None]:
    """The digest of a project file's text, or of the text it is about to have; None for a file
    that is not a regular file (load_toml reports it). Through the cache when there is one: a
    spec whose stat is the one recorded is not read (Note [Generate cache] in incremental/inputs.py).
    """
    files = ProjectFiles(root)

    def read_digest(rel: str, source: str | None) -> str | None:
        if source is not None:
            return digest(source)
        path = root / rel
        if not path.is_file():
            return None
        if cache is None:
            return digest(read_text(path))
        sha = cache.digest(files, rel)
        return None if sha == ABSENT else sha

    return read_digest


@dataclass
class _Spec:
    """One spec file on its way to an OpSpec: from the cache (`record`) or validated (`doc`)."""

    path: Path
    rel: str
    sha: str | None
    record: dict[str, Any] | None
    doc: LoadedToml | None = None
    key: str = ""
    op: OpSpec | None = None

    @property
    def name(self) -> str | None:
        if self.record is not None:
            name = self.record.get("name")
            return name if isinstance(name, str) else None
        return _declared_name(self.doc.data) if self.doc is not None else None

    def restore(self, key: str, root: Path) -> OpSpec | None:
        """The model cached for this very key; None when there is none (or it is damaged)."""
        if self.record is None or not key or self.record.get("key") != key:
            return None
        try:
            return op_from_json(json.loads(self.record["op"]), root)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def _remember_specs(cache: GenerateCache, specs: list[_Spec], root: Path) -> None:
    """Keep the model of every spec of this valid project; forget specs that are gone."""
    records = {}
    for spec in specs:
        if spec.op is None or spec.sha is None:
            continue
        old = cache.specs.get(spec.rel)
        if old is not None and old.get("key") == spec.key and old.get("sha") == spec.sha:
            records[spec.rel] = old
        else:
            try:
                # as a JSON text inside the cache: stored and loaded again whole, and decoded
                # only when restored (the models are most of the cache)
                model = json.dumps(op_to_json(spec.op, root), separators=(",", ":"))
            except TypeError:  # a part of the model the cache cannot store: validate it each run
                continue
            records[spec.rel] = {"sha": spec.sha, "key": spec.key, "name": spec.name, "op": model}
    if records != cache.specs:
        cache.specs = records
        cache.dirty = True


def _declared_name(data: dict[str, Any]) -> str | None:
    name = data.get("name")
    if isinstance(name, str) and "::" in name:
        return name.split("::", 1)[1].split(".", 1)[0]
    return None
