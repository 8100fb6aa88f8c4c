"""The project file `opgen.toml`: namespace, Python package and options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import DiagnosticSink
from .build_settings import build_settings
from .fields import suggest
from .load import LoadedToml
from .model import (
    MAX_SAMPLE_ELEMENTS,
    PRIVATE_TORCH_CHECKS,
    Backend,
    CompileBackend,
    CppTarget,
    ProjectConfig,
    Registration,
)
from .names import RESERVED_NAMESPACES, identifier_problem, package_problem
from .paths import CONFIG_FILE

__all__ = ["build_config", "CONFIG_FILE"]

_PROJECT_KEYS = ("namespace", "package")
_OPTION_KEYS = (
    "backend",
    "cpp_target",
    "torch_target_version",
    "registration",
    "compile_backend",
    "pybind",
    "templates",
    "private_torch",
    "max_sample_elements",
)


def build_config(doc: LoadedToml) -> ProjectConfig:
    sink = DiagnosticSink(doc.path)
    root = doc.path.parent
    project, options = _tables(sink, doc)
    values = _project_values(sink, doc, project)
    values |= _choice_options(sink, doc, options)
    values |= _list_and_path_options(sink, doc, options, root)
    if "build" in doc.data:  # Note [Build settings] in spec/build_settings.py
        values["build"] = build_settings(sink, doc, doc.data["build"], root, per_op=False)
    sink.raise_if_any()
    return ProjectConfig(root=root, path=doc.path, **values)


def _tables(sink: DiagnosticSink, doc: LoadedToml) -> tuple[dict[str, Any], dict[str, Any]]:
    """The [project] and [options] tables; an unknown table or key is an error."""
    for key in doc.data:
        if key not in ("project", "options", "build"):
            sink.error(
                doc.line(key),
                f"unknown table or key {key!r}",
                "opgen.toml has a [project], an [options] and a [build] table",
            )
    project = doc.data.get("project", {})
    options = doc.data.get("options", {})
    if not isinstance(project, dict) or not isinstance(options, dict):
        sink.error(
            doc.line("project" if not isinstance(project, dict) else "options"),
            "[project] and [options] must be tables",
            'write [project] on its own line, then namespace = "..." and package = "..." below it',
        )
        sink.raise_if_any()
    for key in project:
        if key not in _PROJECT_KEYS:
            sink.error(
                doc.line("project", key),
                f"unknown key 'project.{key}'",
                suggest(key, _PROJECT_KEYS),
            )
    for key in options:
        if key not in _OPTION_KEYS:
            sink.error(
                doc.line("options", key), f"unknown key 'options.{key}'", suggest(key, _OPTION_KEYS)
            )
    return project, options


def _project_values(
    sink: DiagnosticSink, doc: LoadedToml, project: dict[str, Any]
) -> dict[str, Any]:
    """The namespace and the package, both required."""
    values: dict[str, Any] = {}
    for key in _PROJECT_KEYS:
        value = project.get(key)
        if value is None:
            sink.error(
                doc.line("project"),
                f"missing required field 'project.{key}'",
                f'add {key} = "..." under [project]',
            )
            continue
        problem = identifier_problem(value, key) if key == "namespace" else package_problem(value)
        if problem:
            sink.error(
                doc.line("project", key),
                problem,
                f'use a short snake_case identifier of your own, e.g. {key} = "mylib"',
            )
        elif key == "namespace" and (value in RESERVED_NAMESPACES or value.startswith("_")):
            sink.error(
                doc.line("project", key),
                f"namespace {value!r} is reserved by PyTorch",
                "choose your own library name, e.g. 'mylib'",
            )
        values[key] = value
    return values


def _choice_options(
    sink: DiagnosticSink, doc: LoadedToml, options: dict[str, Any]
) -> dict[str, Any]:
    """The options that take one value of a few: the choices, the torch version, pybind."""
    values: dict[str, Any] = {}
    for key, enum in (
        ("backend", Backend),
        ("cpp_target", CppTarget),
        ("registration", Registration),
        ("compile_backend", CompileBackend),
    ):
        if key in options:
            choices = tuple(c.value for c in enum)  # Note [Choice enums] in model.py
            if options[key] not in choices:
                sink.error(
                    doc.line("options", key),
                    f"options.{key} is {options[key]!r}",
                    f"use one of {', '.join(map(repr, choices))}",
                )
            else:
                values[key] = enum(options[key])
    if "torch_target_version" in options:
        version = options["torch_target_version"]
        if not isinstance(version, str) or not _is_version(version):
            sink.error(
                doc.line("options", "torch_target_version"),
                f"torch_target_version {version!r} is not a version string",
                'write it quoted, as major.minor: torch_target_version = "2.10"',
            )
        else:
            values["torch_target_version"] = version
    if "pybind" in options:
        if not isinstance(options["pybind"], bool):
            sink.error(
                doc.line("options", "pybind"),
                f"options.pybind must be true or false, not {options['pybind']!r}",
                "write pybind = true or pybind = false",
            )
        else:
            values["pybind"] = options["pybind"]
    return values


def _list_and_path_options(
    sink: DiagnosticSink, doc: LoadedToml, options: dict[str, Any], root: Path
) -> dict[str, Any]:
    """private_torch (a list of checks), max_sample_elements and the templates folder."""
    values: dict[str, Any] = {}
    if "private_torch" in options:
        checks = options["private_torch"]
        wrong = (
            [c for c in checks if c not in PRIVATE_TORCH_CHECKS]
            if isinstance(checks, list)
            else [checks]
        )
        if wrong:
            sink.error(
                doc.line("options", "private_torch"),
                f"options.private_torch names {wrong[0]!r}, which is no check opgen has",
                "a list of some of " + ", ".join(map(repr, PRIVATE_TORCH_CHECKS)),
            )
        else:
            values["private_torch"] = tuple(dict.fromkeys(checks))
    if "max_sample_elements" in options:
        bound = options["max_sample_elements"]
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            sink.error(
                doc.line("options", "max_sample_elements"),
                f"options.max_sample_elements must be a positive integer, not {bound!r}",
                f"e.g. max_sample_elements = {MAX_SAMPLE_ELEMENTS} (the default, 2**28)",
            )
        else:
            values["max_sample_elements"] = bound
    if "templates" in options:
        folder = options["templates"]
        resolved, why = _folder(root, folder)
        if resolved is None or not resolved.is_relative_to(root.resolve()):
            why = why or "points outside the project"
            sink.error(
                doc.line("options", "templates"),
                f"options.templates {folder!r} {why}",
                'use a folder inside the project, e.g. templates = "templates"',
            )
        else:
            values["templates"] = resolved
    return values


def _folder(root: Path, name: object) -> tuple[Path | None, str]:
    """The folder `name` names under `root`, resolved, or None and why it names none."""
    if not isinstance(name, str) or not name:
        return None, "is not a folder name"
    if not name.isprintable():  # a NUL byte would reach the file system as an exception
        return None, "holds a control character, which no folder name of a project has"
    try:
        return (root / name).resolve(), ""
    except RuntimeError:  # Python < 3.13
        return None, "is a loop of symlinks"
    except (OSError, ValueError) as exc:
        return None, f"cannot be resolved ({exc})"


def _is_version(text: str) -> bool:
    parts = text.split(".")
    return len(parts) == 2 and all(p.isdigit() for p in parts)
