"""The plan of a project where nothing changed since the last run: recorded once, then replayed.

Note [Generate cache] in incremental/inputs.py. A run that ends with nothing left to
write records its plan with everything it depended on: the digests of
opgen.toml, every spec, the template sources, the manifest and the override
records, and of every file the plan looked at. The next run compares those
digests (from the files' stats where they are unchanged) and, if all match,
returns that plan without loading a spec or rendering anything, and the
warnings about the specs that the recorded run printed, since their specs
have not changed either. This module
imports no validation, api or template code, so that path stays light.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import Diagnostic, OpgenError
from ..write.changes import Action, Change
from ..write.manifest import MANIFEST_FILE, Manifest
from ..write.project_files import ProjectFiles
from .generate_cache import GenerateCache
from .inputs import (
    CONFIG_FILE,
    EJECTED_FILE,
    OPS_DIR,
    builtin_templates_dir,
    combine,
    spec_files,
    templates_digest,
)

__all__ = ["replay", "record"]


def _key(
    cache: GenerateCache,
    files: ProjectFiles,
    spec_digests: Mapping[str, str],
    templates: str,
    folder_argument: Path | None,
) -> str:
    """Everything a plan depends on besides the files it looked at."""
    return combine(
        [
            cache.env,
            templates,
            str(folder_argument or ""),
            f"{CONFIG_FILE}:{cache.digest(files, CONFIG_FILE)}",
            *(f"{path}:{sha}" for path, sha in sorted(spec_digests.items())),
            f"{MANIFEST_FILE}:{cache.digest(files, MANIFEST_FILE)}",
            f"{EJECTED_FILE}:{cache.digest(files, EJECTED_FILE)}",
        ]
    )


def replay(
    files: ProjectFiles,
    cache: GenerateCache,
    manifest: Manifest,
    folder_argument: Path | None,
) -> tuple[list[Change], list[str], list[Diagnostic]] | None:
    """The recorded plan, warnings and spec warnings, if nothing it depends on changed; None otherwise."""
    settled = cache.settled
    if not isinstance(settled, dict):
        return None
    try:
        folder = Path(settled["folder"]) if settled.get("folder") else None
        problems, paths = spec_files(files.root)
        if problems:
            return None  # the full run reports them
        names = (f"{OPS_DIR}/{path.name}" for path in paths)
        specs = {rel: cache.digest(files, rel) for rel in names}
        templates = templates_digest(builtin_templates_dir(), folder)
        if _key(cache, files, specs, templates, folder_argument) != settled["key"]:
            return None
        for path, sha in settled["files"].items():
            if cache.digest(files, path) != sha:
                return None
        changes = [
            Change(path, Action(action), None, None, manifest.files.get(path), note)
            for path, action, note in settled["changes"]
        ]
        spec_warnings = [
            Diagnostic(
                files.root / str(path), int(line) or None, str(message), str(hint), "warning"
            )
            for path, line, message, hint in settled["spec_warnings"]
        ]
        return changes, [str(w) for w in settled["warnings"]], spec_warnings
    except (OpgenError, OSError, KeyError, TypeError, ValueError, AttributeError):
        return None  # the full run reports what is wrong, if anything is


def record(
    files: ProjectFiles,
    cache: GenerateCache,
    changes: list[Change],
    warnings: list[str],
    spec_warnings: list[Diagnostic],
    spec_digests: Mapping[str, str],
    templates: str,
    folder: Path | None,
    folder_argument: Path | None,
) -> None:
    """Keep `changes`, a plan with nothing to write, for `replay`."""
    settled: dict[str, Any] = {
        "key": _key(cache, files, spec_digests, templates, folder_argument),
        "folder": str(folder) if folder is not None else "",
        "files": {c.path: cache.digest(files, c.path) for c in changes},
        "changes": [[c.path, c.action.value, c.note] for c in changes],
        "warnings": list(warnings),
        "spec_warnings": [_warning(files, w) for w in spec_warnings],
    }
    if settled != cache.settled:
        cache.settled = settled
        cache.dirty = True


def _warning(files: ProjectFiles, warning: Diagnostic) -> list[Any]:
    """A spec warning as JSON data: its spec relative to the project, line, message and hint."""
    path = warning.path or files.root
    shown = (
        path.relative_to(files.root).as_posix() if path.is_relative_to(files.root) else str(path)
    )
    return [shown, warning.line or 0, warning.message, warning.hint]
