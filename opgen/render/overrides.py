"""A project's template overrides: list them, eject a built-in, notice when one falls behind.

Note [Ejected templates]
`opgen templates eject NAME` copies a built-in template into the project's
template folder and records the built-in's hash in `.opgen/ejected.json`,
with a copy of the text as ejected under `.opgen/ejected/NAME`. When a newer
opgen ships a different built-in, `opgen generate` warns that the override
is behind; `opgen templates diff NAME` shows what changed upstream since the
eject, and `opgen templates ack NAME` records that the override is caught up.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import Diagnostic, OpgenError
from ..incremental.inputs import EJECTED_FILE, builtin_templates_dir
from ..spec.config import CONFIG_FILE, build_config
from ..spec.load import load_toml
from ..spec.paths import STATE_DIR
from ..write.manifest import digest
from ..write.project_files import Batch, ProjectFiles

__all__ = [
    "TemplateInfo",
    "builtin_names",
    "list_templates",
    "eject",
    "acknowledge",
    "upstream_diff",
    "override_warnings",
    "template_folder",
    "DEFAULT_FOLDER",
]

DEFAULT_FOLDER = "templates"
_RECORD = EJECTED_FILE
_ORIGINALS = f"{STATE_DIR}/ejected"


@dataclass(frozen=True)
class TemplateInfo:
    """One line of `opgen templates list`."""

    name: str
    builtin: bool
    overridden: bool
    behind: bool  # the built-in changed since this override was ejected


def template_folder(root: Path) -> Path | None:
    """The project's template folder (`[options] templates`), or None when opgen.toml sets none."""
    return build_config(load_toml(root / CONFIG_FILE)).templates


def builtin_names() -> list[str]:
    """Every built-in template, as `opgen templates list` names it."""
    base = builtin_templates_dir()
    return sorted(p.relative_to(base).as_posix() for p in base.rglob("*.j2") if p.is_file())


def _override_names(folder: Path | None) -> list[str]:
    if folder is None or not folder.is_dir():
        return []
    return sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    )


def _builtin_text(name: str) -> str:
    return (builtin_templates_dir() / name).read_text(encoding="utf-8")


def _records(root: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(ProjectFiles(root).read_text(_RECORD) or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _save_records(batch: Batch, records: dict[str, dict[str, str]]) -> None:
    batch.write(_RECORD, json.dumps(records, indent=1, sort_keys=True) + "\n")


def _is_behind(root: Path, records: dict[str, dict[str, str]], name: str) -> bool:
    record = records.get(name)
    if record is None or name not in builtin_names():
        return False
    return record.get("sha256") != digest(_builtin_text(name))


def list_templates(root: Path, folder: Path | None) -> list[TemplateInfo]:
    """Every built-in template and every file of the override `folder`: overridden, and behind the built-in?"""
    builtins = builtin_names()
    overrides = set(_override_names(folder))
    records = _records(root)
    infos = [
        TemplateInfo(n, True, n in overrides, n in overrides and _is_behind(root, records, n))
        for n in builtins
    ]
    infos += [TemplateInfo(n, False, True, False) for n in sorted(overrides - set(builtins))]
    return infos


def override_warnings(root: Path, folder: Path | None) -> list[str]:
    """What `opgen generate` should tell the user about their overrides."""
    warnings = []
    for info in list_templates(root, folder):
        shown = f"{_shown(root, folder)}/{info.name}"
        if info.behind:
            warnings.append(
                f"{shown} overrides a built-in template that changed since you ejected it; "
                f"see `opgen templates diff {info.name}`, port what you need, then `opgen templates ack {info.name}`"
            )
        elif not info.builtin and not info.name.split("/")[-1].startswith("_"):
            warnings.append(
                f"{shown} does not replace any built-in template (check its name with `opgen templates list`)"
            )
    return warnings


def _shown(root: Path, folder: Path | None) -> str:
    if folder is None:
        return DEFAULT_FOLDER
    try:
        return folder.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(folder)


def _check_name(name: str) -> None:
    if name not in builtin_names():
        close = difflib.get_close_matches(name, builtin_names(), n=1)
        hint = (
            f"did you mean {close[0]!r}?"
            if close
            else "`opgen templates list` shows every template"
        )
        raise OpgenError(Diagnostic(None, None, f"no built-in template named {name!r}", hint))


def eject(root: Path, folder: Path | None, name: str) -> tuple[Path, bool]:
    """Copy built-in template `name` into the project's template folder for editing.

    Records the built-in's hash (Note [Ejected templates]) and, when opgen.toml
    names no template folder, sets `templates = "templates"` in it. Returns the
    copy's path and whether opgen.toml was changed. Never overwrites an override.
    """
    _check_name(name)
    files = ProjectFiles(root)
    set_option = folder is None
    folder = folder if folder is not None else files.root / DEFAULT_FOLDER
    target = files.path(folder / name)
    if target.exists():
        raise OpgenError(
            Diagnostic(
                target,
                None,
                "this template is already overridden; opgen will not overwrite your copy",
                "delete it first to eject a fresh copy, or see `opgen templates diff`",
            )
        )
    text = _builtin_text(name)
    batch = files.batch()
    if set_option:
        _set_templates_option(files, batch, DEFAULT_FOLDER)
    batch.write(target.relative_to(files.root).as_posix(), text)
    batch.write(f"{_ORIGINALS}/{name}", text)
    records = _records(root)
    records[name] = {"sha256": digest(text)}
    _save_records(batch, records)
    batch.stage()
    batch.commit()
    return target, set_option


def acknowledge(root: Path, name: str) -> None:
    """Record that the override of `name` is up to date with the current built-in (silences its warning)."""
    _check_name(name)
    batch = ProjectFiles(root).batch()
    text = _builtin_text(name)
    batch.write(f"{_ORIGINALS}/{name}", text)
    records = _records(root)
    records[name] = {"sha256": digest(text)}
    _save_records(batch, records)
    batch.stage()
    batch.commit()


def upstream_diff(root: Path, folder: Path | None, name: str) -> str:
    """How built-in `name` changed since the eject (a unified diff); without a record, the override against the built-in."""
    _check_name(name)
    new = _builtin_text(name)
    files = ProjectFiles(root)
    original = files.read_text(f"{_ORIGINALS}/{name}")
    override = files.read_text(folder / name) if folder is not None else None
    if original is not None:
        old, label = original, f"built-in {name} when ejected"
    elif override is not None:
        old, label = override, f"your {_shown(root, folder)}/{name}"
    else:
        old, label = "", "(nothing)"
    return "".join(
        difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), label, f"built-in {name} now"
        )
    )


_OPTIONS_HEADER = re.compile(r"^\s*\[options\]\s*(#.*)?$", re.MULTILINE)


def _set_templates_option(files: ProjectFiles, batch: Batch, folder: str) -> None:
    """Add `templates = "..."` under [options] in opgen.toml, keeping the rest of the file as it is."""
    text = files.read_text(CONFIG_FILE) or ""
    line = f'templates = "{folder}"      # template overrides, searched before the built-ins\n'
    match = _OPTIONS_HEADER.search(text)
    if match is None:
        text = text + ("" if text.endswith("\n") or not text else "\n") + "\n[options]\n" + line
    else:
        end = match.end() + 1 if match.end() < len(text) else match.end()
        if not text[:end].endswith("\n"):
            text += "\n"
            end = len(text)
        text = text[:end] + line + text[end:]
    batch.write(CONFIG_FILE, text)
