"""A project: its `opgen.toml` and every op spec under `ops/`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import Diagnostic, OpgenError
from .spec.config import CONFIG_FILE, build_config
from .spec.load import load_toml
from .spec.model import OpSpec, ProjectConfig
from .spec.validate import build_op_spec

__all__ = ["Project", "find_root", "load_project", "OPS_DIR"]

OPS_DIR = "ops"


@dataclass(frozen=True)
class Project:
    config: ProjectConfig
    ops: tuple[OpSpec, ...]

    @property
    def root(self) -> Path:
        return self.config.root


def find_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / CONFIG_FILE).is_file():
            return folder
    return None


def _spec_files(root: Path) -> list[Path]:
    folder = root / OPS_DIR
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == ".toml")


def load_project(root: Path) -> Project:
    """Load and validate everything; raises OpgenError with all problems found."""
    root = root.resolve()
    config = build_config(load_toml(root / CONFIG_FILE))
    files = _spec_files(root)
    problems: list[Diagnostic] = []
    for path in files:
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            problems.append(Diagnostic(path, None, "spec is a symlink leading outside the project", "copy the file into ops/ instead"))
    docs = []
    for path in files:
        try:
            docs.append(load_toml(path))
        except OpgenError as exc:
            problems.extend(exc.diagnostics)
    op_names = frozenset(_declared_name(d.data) for d in docs) - {None}
    ops: list[OpSpec] = []
    for doc in docs:
        try:
            ops.append(build_op_spec(doc, config, op_names))  # type: ignore[arg-type]
        except OpgenError as exc:
            problems.extend(exc.diagnostics)
    seen: dict[str, OpSpec] = {}
    for op in ops:
        key = op.name + (f".{op.overload}" if op.overload else "")
        module = module_name(op)
        for other_key in (key, f"module:{module}"):
            first = seen.get(other_key)
            if first is not None:
                problems.append(
                    Diagnostic(op.path, op.lines.get("name", 1), f"op {op.qualname} is also defined in {first.path.name}", "keep one spec per op (delete or rename one)")
                )
                break
        seen[key] = op
        seen[f"module:{module}"] = op
    if problems:
        raise OpgenError(problems)
    return Project(config, tuple(ops))


def _declared_name(data: dict) -> str | None:
    name = data.get("name")
    if isinstance(name, str) and "::" in name:
        return name.split("::", 1)[1].split(".", 1)[0]
    return None


def module_name(op: OpSpec) -> str:
    """File-system name of an op: the op name, plus the overload if any."""
    return op.name + (f"_{op.overload}" if op.overload else "")
