"""The build settings of a project (Note [Build settings]) as compiler and linker arguments, here and now.

Paths were checked when the specs were validated; this checks them again at
build time, when the environment variables they start with are expanded, so
that a missing folder or an unset variable is an error naming the setting's
file and line rather than a compiler message about a header it cannot find.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import Diagnostic, OpgenError
from ...spec.backends import backend_of
from ...spec.build_settings import CUDA_SUFFIXES, ENV_PATH
from ...spec.model import BuildSettings

if TYPE_CHECKING:
    from ...project.load import Project

__all__ = ["UserBuild", "project_settings", "resolve_settings", "ninja_arg"]


@dataclass(frozen=True)
class UserBuild:
    """The settings as arguments (unquoted): one list item is one argument."""

    cxx_flags: tuple[str, ...] = ()
    cuda_flags: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()  # -DNAME[=VALUE]
    includes: tuple[str, ...] = ()  # -I<folder>
    link: tuple[str, ...] = ()  # -L<folder>, -Wl,-rpath,<folder>, -l<name>
    cpp_sources: tuple[str, ...] = ()  # project-relative
    cuda_sources: tuple[str, ...] = ()
    environment: tuple[str, ...] = ()  # the variables the paths were expanded from

    @property
    def sources(self) -> tuple[str, ...]:
        return self.cpp_sources + self.cuda_sources


def ninja_arg(arg: str) -> str:
    """One argument in a ninja variable: quoted for the shell ninja runs, `$` escaped for ninja."""
    return shlex.quote(arg).replace("$", "$$")


def project_settings(project: Project) -> list[tuple[Path, BuildSettings]]:
    """opgen.toml's [build], then each C++ op's, with the file each comes from."""
    found = [(project.config.path, project.config.build)]
    found += [(op.path, op.build) for op in project.ops if backend_of(op).compiles_cpp]
    return found


def _folder(
    root: Path, path: Path, settings: BuildSettings, key: str, item: str, environ: Mapping[str, str]
) -> tuple[str, str | None]:
    """A folder of include_dirs or library_dirs as the compiler gets it, and the variable expanded."""
    line = settings.line(key)
    match = ENV_PATH.match(item)
    if match is None:
        if os.path.isabs(item):
            folder, shown = item, item
        else:
            folder, shown = os.path.normpath(item), str(root / item)
            if not (root / item).resolve().is_relative_to(root.resolve()):
                raise OpgenError(
                    Diagnostic(
                        path,
                        line,
                        f"build.{key} has {item!r}, which leads out of the project",
                        "name a folder inside the project",
                    )
                )
        if not Path(shown).is_dir():
            raise OpgenError(
                Diagnostic(
                    path, line, f"build.{key}: the folder {shown} does not exist", "check the path"
                )
            )
        return folder, None
    name = match.group("braced") or match.group("bare")
    value = environ.get(name, "")
    if not value or not os.path.isabs(value):
        why = "is not set" if not value else f"is {value!r}, not an absolute path"
        raise OpgenError(
            Diagnostic(
                path,
                line,
                f"build.{key} has {item!r}, and the environment variable {name} {why}",
                f"export {name}=/absolute/path before the build, or change build.{key}",
            )
        )
    folder = value + item[match.end() :]
    if not Path(folder).is_dir():
        raise OpgenError(
            Diagnostic(
                path,
                line,
                f"build.{key} has {item!r}: {folder} (${name}) is not a folder",
                f"set {name} to the folder that holds it",
            )
        )
    return folder, name


def _rpath(folder: str, library_dir: str) -> str:
    """An absolute folder as it is; a project folder relative to the library ($ORIGIN)."""
    if os.path.isabs(folder):
        return folder
    return "$ORIGIN/" + os.path.relpath(folder, library_dir)


def resolve_settings(
    project: Project,
    library: str,
    environ: Mapping[str, str] | None = None,
) -> UserBuild:
    """Every setting of the project as arguments; raises OpgenError (file:line) on a bad path.

    `library`: the project-relative path of the library, for rpaths of project folders.
    """
    environ = os.environ if environ is None else environ
    root = project.root
    values: dict[str, list[str]] = {
        k: []
        for k in ("cxx_flags", "cuda_flags", "defines", "includes", "link", "cpp", "cuda", "env")
    }
    libraries: list[str] = []
    for path, settings in project_settings(project):
        values["cxx_flags"] += settings.cxx_flags
        values["cuda_flags"] += settings.cuda_flags
        values["defines"] += [f"-D{d}" for d in settings.defines]
        for key, flag in (("include_dirs", "-I"), ("library_dirs", "-L")):
            for item in getattr(settings, key):
                folder, name = _folder(root, path, settings, key, item, environ)
                if flag == "-I":
                    values["includes"].append(f"-I{folder}")
                else:
                    rpath = _rpath(folder, os.path.dirname(library) or ".")
                    values["link"] += [f"-L{folder}", f"-Wl,-rpath,{rpath}"]
                if name:
                    values["env"].append(name)
        libraries += [f"-l{name}" for name in settings.libraries]
        for source in settings.sources:
            rel = os.path.normpath(source).replace(os.sep, "/")
            if not (root / rel).is_file() or not (root / rel).resolve().is_relative_to(
                root.resolve()
            ):
                raise OpgenError(
                    Diagnostic(
                        path,
                        settings.line("sources"),
                        f"build.sources has {source!r}, which is no file of the project",
                        "check the path: it is relative to the folder of opgen.toml",
                    )
                )
            values["cuda" if rel.endswith(CUDA_SUFFIXES) else "cpp"].append(rel)
    unique = {k: tuple(dict.fromkeys(v)) for k, v in values.items()}
    return UserBuild(
        cxx_flags=tuple(values["cxx_flags"]),  # a flag may rightly come twice (-Xptxas -v ...)
        cuda_flags=tuple(values["cuda_flags"]),
        defines=unique["defines"],
        includes=unique["includes"],
        link=unique["link"] + tuple(dict.fromkeys(libraries)),
        cpp_sources=unique["cpp"],
        cuda_sources=unique["cuda"],
        environment=unique["env"],
    )
