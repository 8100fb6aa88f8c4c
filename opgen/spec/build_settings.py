"""The `[build]` table of opgen.toml and of a C++ op's spec: what its compile needs beyond opgen's.

Note [Build settings]
opgen.toml's `[build]` (the whole library) and a C++ op's own `[build]` add to
the compile and link of `opgen build` (build/build.ninja) and of the wheel
build (setup.py's `build_settings` fence):
  cxx_flags, cuda_flags  more flags for g++ and nvcc, after opgen's own (`-O2` wins over `-O3`)
  defines                `NAME` or `NAME=VALUE`: `-D` for both compilers
  include_dirs           `-I` for both compilers
  library_dirs           `-L` and an rpath, so the library finds them when it loads
  libraries              `-l NAME` at the link
  sources                more `.cpp`, `.cc`, `.cxx` and `.cu` files compiled into the library
An op's table takes include_dirs, library_dirs, libraries and sources: they
join the library's (one library, one link) and leave with the op.

Paths. A relative path is the project's: it resolves inside the project (a
`..` out of it or a symlink leading out is refused) and must exist.
include_dirs and library_dirs may also be absolute or start with an
environment variable (`$CUTLASS_DIR/include`, `${CUDA_HOME}/lib64`), which
is expanded when a build runs (`opgen build`, setup.py) and nowhere else;
its value must be an absolute path. Sources are files of the project.

Flags. Each list item is one argument of the compiler, quoted for the shell
that ninja runs (no word splitting, no `$(...)`). nvcc hands its arguments to
its own sub-commands through a shell, inside double quotes, where `$`,
backquotes and backslashes still act: no setting may hold one (but the
leading `$NAME` of a folder, which opgen expands). A flag that names a path
goes through the keys above, whose paths are checked (`-I`, `-L`, `-l`, `-D`,
`-include`); a flag that makes the compiler write or run files of its own
choosing (`-o`, `-M...`, `-B`, `-wrapper`, `-fplugin`, `-specs`, `-ccbin`,
`-save-temps`, `--keep`, `@file`, a value that is a path) is refused. That
keeps a checkout's flags from reading or writing outside what the build
does by accident; it is not a sandbox: `opgen build` compiles and links the
checkout's code (docs/safety.md, "Trust and safety").
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..errors import DiagnosticSink
from .fields import check_keys, shown
from .load import LoadedToml
from .model import BuildSettings

__all__ = [
    "PROJECT_BUILD_KEYS",
    "OP_BUILD_KEYS",
    "CPP_SUFFIXES",
    "CUDA_SUFFIXES",
    "ENV_PATH",
    "build_settings",
]

PROJECT_BUILD_KEYS = (
    "cxx_flags",
    "cuda_flags",
    "defines",
    "include_dirs",
    "library_dirs",
    "libraries",
    "sources",
)
OP_BUILD_KEYS = ("include_dirs", "library_dirs", "libraries", "sources")
CPP_SUFFIXES = (".cpp", ".cc", ".cxx")
CUDA_SUFFIXES = (".cu",)
# `$NAME` or `${NAME}` at the start of a path, then the end or a `/`
ENV_PATH = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_]\w*)\}|(?P<bare>[A-Za-z_]\w*))(?=/|\Z)")
_DEFINE = re.compile(r"[A-Za-z_]\w*(=.*)?\Z", re.DOTALL)
_LIBRARY = re.compile(r":?[A-Za-z0-9_][A-Za-z0-9_.+\-]*\Z")
_COMPILED = ("csrc/cpu/", "csrc/cuda/")  # opgen compiles everything there already
# nvcc runs its sub-commands through a shell, each argument in double quotes: inside them
# `$(...)`, backquotes and backslashes still act, so no setting may hold one (Note [Build settings])
_SHELL_SPECIAL = "`\\"

# flag (or its part before `=`) -> the key that takes its path or value instead
_THROUGH_KEYS = {
    "-I": "include_dirs",
    "-isystem": "include_dirs",
    "-iquote": "include_dirs",
    "-idirafter": "include_dirs",
    "--include-path": "include_dirs",
    "--system-include": "include_dirs",
    "-L": "library_dirs",
    "--library-path": "library_dirs",
    "-l": "libraries",
    "--library": "libraries",
    "-D": "defines",
    "--define-macro": "defines",
    "-include": "sources (or an #include in a source)",
    "-imacros": "sources (or an #include in a source)",
    "--pre-include": "sources (or an #include in a source)",
}
# flags that make the compiler write, read or run files of their own choosing
_REFUSED = (
    "-o",
    "--output-file",
    "--output-directory",
    "-M",
    "--dependency-output",
    "-B",
    "-wrapper",
    "-fplugin",
    "-specs",
    "--specs",
    "-ccbin",
    "--compiler-bindir",
    "-save-temps",
    "--save-temps",
    "-keep",
    "--keep",
    "-fdump-",
    "-aux-info",
    "--options-file",
    "-optf",
    "--run",
    "-run",
    "@",
)
# options whose value may be the next list item; -X... values are flags of another tool
_TAKES_VALUE = {
    "-Xcompiler": True,
    "--compiler-options": True,
    "-Xptxas": True,
    "--ptxas-options": True,
    "-Xnvlink": True,
    "--nvlink-options": True,
    "-Xlinker": True,
    "-gencode": False,
    "--generate-code": False,
    "-arch": False,
    "--gpu-architecture": False,
    "-code": False,
    "--gpu-code": False,
    "-maxrregcount": False,
    "--maxrregcount": False,
    "-t": False,
    "--threads": False,
    "-x": False,
}
_FLAG_HINT = "one flag per list item, each starting with '-', e.g. cxx_flags = [\"-ffast-math\"]"


def _strings(
    sink: DiagnosticSink, doc: LoadedToml, value: Any, key: str, line: int
) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        sink.error(
            line,
            f"build.{key} must be a list of strings, not {shown(value)}",
            f'e.g. {key} = ["..."]',
        )
        return ()
    good = []
    special = _SHELL_SPECIAL if key in ("include_dirs", "library_dirs") else _SHELL_SPECIAL + "$"
    for item in items:
        if not item or any(ord(c) < 32 or c == "\x7f" for c in item):
            sink.error(
                line,
                f"build.{key} has {shown(item)}: an empty item or a control character",
                "write each item on one line, without tabs or line breaks",
            )
            continue
        used = sorted({c for c in item if c in special})
        if used:
            sink.error(
                line,
                f"build.{key} has {shown(item)}, with {' and '.join(map(repr, used))}: nvcc hands "
                "its arguments to a shell, which would run what they hold",
                "leave them out"
                + (
                    " ($NAME is expanded only at the start of a folder)"
                    if "$" not in special
                    else ""
                ),
            )
            continue
        good.append(item)
    return tuple(good)


def _flag_problem(flag: str) -> tuple[str, str] | None:
    """Why `flag` may not be a compiler flag of the settings, and the fix; None when it may."""
    head = flag.split("=", 1)[0]
    for prefix, key in _THROUGH_KEYS.items():
        if head == prefix or (len(prefix) == 2 and head.startswith(prefix)):
            return (
                f"the flag {shown(flag)} names a path or a value opgen checks",
                f"use build.{key} instead",
            )
    for prefix in _REFUSED:
        if head.startswith(prefix):
            return (
                f"the flag {shown(flag)} makes the compiler write, read or run files of its own choosing",
                "remove it: opgen chooses the outputs, and the compiler runs nothing else",
            )
    value = flag.split("=", 1)[1] if "=" in flag else ""
    if value.startswith(("/", "~", "$")) or ".." in value.split("/"):
        return (
            f"the flag {shown(flag)} takes a path",
            "flags take no paths: put folders in build.include_dirs or build.library_dirs",
        )
    return None


def _check_flags(sink: DiagnosticSink, flags: tuple[str, ...], key: str, line: int) -> None:
    forwarded: bool | None = None  # after an option that takes the next item as its value
    for flag in flags:
        if forwarded is not None:
            if forwarded:
                _check_forwarded(sink, flag, key, line)
            forwarded = None
            continue
        if not flag.startswith("-"):
            sink.error(
                line,
                f"build.{key} has {shown(flag)}, which is not a flag (a file would be compiled or linked)",
                _FLAG_HINT,
            )
            continue
        problem = _flag_problem(flag)
        if problem:
            sink.error(line, f"build.{key}: {problem[0]}", problem[1])
            continue
        head, _, joined = flag.partition("=")
        if head in _TAKES_VALUE:
            if joined and _TAKES_VALUE[head]:
                _check_forwarded(sink, joined, key, line)
            elif not joined:
                forwarded = _TAKES_VALUE[head]
    if forwarded is not None:
        sink.error(line, f"build.{key} ends with an option that needs a value", _FLAG_HINT)


def _check_forwarded(sink: DiagnosticSink, value: str, key: str, line: int) -> None:
    """The flags `-Xcompiler a,b` hands to another tool: each a flag, checked as the others."""
    for part in value.split(","):
        problem = (
            _flag_problem(part)
            if part.startswith("-")
            else (
                f"{shown(value)} hands {shown(part)} to another tool, which is not a flag",
                _FLAG_HINT,
            )
        )
        if problem:
            sink.error(line, f"build.{key}: {problem[0]}", problem[1])


def _inside(root: Path, rel: str) -> tuple[Path | None, str | None]:
    """The project path `rel` names, or why it cannot be used: absolute, `..` out, a symlink out."""
    if os.path.isabs(rel) or rel.startswith("~"):
        return None, "is not a path inside the project"
    parts = Path(rel).parts
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            return None, "leads out of the project ('..')"
    path = root / rel
    try:
        real = path.resolve()
        inside = real.is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return None, "cannot be resolved (a symlink loop?)"
    if not inside:
        return None, "is a symlink (or under one) that leads out of the project"
    return path, None


def _check_paths(
    sink: DiagnosticSink, root: Path, items: tuple[str, ...], key: str, line: int
) -> None:
    folder = key != "sources"
    for item in items:
        env = ENV_PATH.match(item)
        if folder and (os.path.isabs(item) or env):
            if "$" in item[env.end() if env else 0 :]:
                sink.error(
                    line,
                    f"build.{key} has {shown(item)}: an environment variable is expanded only at the start",
                    'write it as "$NAME/rest/of/path" or "${NAME}/rest"',
                )
            continue
        if "$" in item:
            where = "sources are files of the project" if not folder else "only a leading $NAME"
            sink.error(
                line,
                f"build.{key} has {shown(item)}: environment variables are not expanded here ({where})",
                (
                    'write a path relative to the project, e.g. "third_party/helpers.cu"'
                    if not folder
                    else 'write "$NAME/include" or "${NAME}/include"'
                ),
            )
            continue
        if not folder and not _check_source(sink, item, line):
            continue
        path, why = _inside(root, item)
        if path is None:
            hint = (
                "copy or link the file into the project, and name it relative to opgen.toml's folder"
                if not folder
                else "name a folder of the project, an absolute path, or one under $NAME"
            )
            sink.error(line, f"build.{key} has {shown(item)}, which {why}", hint)
            continue
        exists = path.is_dir() if folder else path.is_file()
        if not exists:
            sink.error(
                line,
                f"build.{key} has {shown(item)}: no such {'folder' if folder else 'file'} in the project",
                "check the path: it is relative to the folder of opgen.toml",
            )
            continue


def _check_source(sink: DiagnosticSink, item: str, line: int) -> bool:
    """Whether `item` may be a source by its name: a C++ or CUDA file opgen does not compile yet."""
    rel = os.path.normpath(item).replace(os.sep, "/")
    if not rel.endswith(CPP_SUFFIXES + CUDA_SUFFIXES):
        sink.error(
            line,
            f"build.sources has {shown(item)}, which is not a C++ or CUDA source",
            "list .cpp, .cc, .cxx or .cu files (headers are found through include_dirs)",
        )
        return False
    if rel.startswith(_COMPILED):
        sink.error(
            line,
            f"build.sources has {shown(item)}: every file under csrc/cpu/ and csrc/cuda/ is compiled already",
            "remove it from build.sources",
        )
        return False
    return True


def build_settings(
    sink: DiagnosticSink, doc: LoadedToml, table: Any, root: Path, *, per_op: bool
) -> BuildSettings:
    """The `[build]` table of opgen.toml (`per_op` False) or of an op's spec; problems go to `sink`."""
    if not isinstance(table, dict):
        sink.error(
            doc.line("build"),
            f"build must be a table, not {shown(table)}",
            "write [build] on its own line and the settings below it",
        )
        return BuildSettings()
    allowed = OP_BUILD_KEYS if per_op else PROJECT_BUILD_KEYS
    _library_keys_here(sink, doc, table, allowed)
    check_keys(
        sink,
        doc,
        {k: v for k, v in table.items() if k not in PROJECT_BUILD_KEYS},
        allowed,
        ("build",),
    )
    values: dict[str, tuple[str, ...]] = {}
    lines: list[tuple[str, int]] = []
    for key in allowed:
        if key not in table:
            continue
        line = doc.line("build", key)
        items = _strings(sink, doc, table[key], key, line)
        lines.append((key, line))
        _check_items(sink, root, items, key, line)
        values[key] = tuple(dict.fromkeys(items))
    return BuildSettings(**values, lines=tuple(lines))


def _library_keys_here(
    sink: DiagnosticSink, doc: LoadedToml, table: dict[str, Any], allowed: tuple[str, ...]
) -> None:
    """A setting of the whole library in an op's `[build]` is an error (each, in table order)."""
    for key in table:
        if key in PROJECT_BUILD_KEYS and key not in allowed:
            sink.error(
                doc.line("build", key),
                f"build.{key} applies to the whole library, not to one op",
                f"move it to [build] in opgen.toml ({', '.join(allowed)} may stay here)",
            )


def _check_items(
    sink: DiagnosticSink, root: Path, items: tuple[str, ...], key: str, line: int
) -> None:
    """Each item of `build.<key>` checked as what that key lists: flags, defines, libraries or
    paths."""
    if key in ("cxx_flags", "cuda_flags"):
        _check_flags(sink, items, key, line)
    elif key == "defines":
        for item in items:
            if not _DEFINE.match(item):
                sink.error(
                    line,
                    f"build.defines has {shown(item)}, which is not NAME or NAME=VALUE",
                    'e.g. defines = ["ENABLE_FP8", "BLOCK_SIZE=128"] (no -D, no macro arguments)',
                )
    elif key == "libraries":
        for item in items:
            if not _LIBRARY.match(item):
                sink.error(
                    line,
                    f"build.libraries has {shown(item)}, which is not a library name",
                    'name it as -l would, without -l or a path: libraries = ["cublas"]; '
                    "its folder goes in build.library_dirs",
                )
    else:
        _check_paths(sink, root, items, key, line)
