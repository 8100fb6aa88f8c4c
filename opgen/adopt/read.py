"""Which files `opgen import` reads, and what they define together."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import Diagnostic, OpgenError
from ..spec.paths import GENERATED_MARK
from .cpp_reader import read_cpp
from .found import Found, FoundOp
from .py_reader import read_python

__all__ = ["source_files", "read_sources"]

_CPP = {".cpp", ".cc", ".cxx", ".cu", ".h", ".hpp", ".cuh"}


def source_files(cwd: Path, paths: Sequence[Path], skip: list[Path]) -> list[Path]:
    """The C++ and Python files under `paths` (relative to `cwd`), less those under `skip`."""
    found: list[Path] = []
    for given in paths:
        path = (cwd / given).resolve()
        if not path.exists():
            raise OpgenError(
                Diagnostic(
                    path,
                    None,
                    "no such file or folder",
                    "pass the files or folders of your extension",
                )
            )
        candidates = sorted(path.rglob("*")) if path.is_dir() else [path]
        for file in candidates:
            if not file.is_file() or file.suffix not in _CPP | {".py"} or file.name == "setup.py":
                continue
            if any(file.is_relative_to(s) for s in skip):
                continue
            found.append(file)
    return sorted(set(found))


def read_sources(files: Sequence[Path], problems: list[Diagnostic]) -> Found:
    """Every op, kernel and function the files define; impls merged into their defs."""
    found = Found()
    # C++ first: Python modules register fakes and autograd for ops that C++ defines
    for file in sorted(files, key=lambda f: f.suffix == ".py"):
        text = file.read_text(encoding="utf-8", errors="replace")
        if GENERATED_MARK in text[:300]:
            continue
        (read_python if file.suffix == ".py" else read_cpp)(file, text, found, problems)
    merged: dict[str, FoundOp] = {}
    for op in [o for o in found.ops if o.schema]:
        if op.qualname in merged:
            first = merged[op.qualname]
            problems.append(
                Diagnostic(
                    op.path,
                    op.line,
                    f"{op.qualname} is defined twice (first at {first.path.name}:{first.line})",
                    "keep one definition; this one was skipped",
                )
            )
            continue
        merged[op.qualname] = op
    for impl in [o for o in found.ops if not o.schema]:
        target = merged.get(impl.qualname)
        if target is None:
            problems.append(
                Diagnostic(
                    impl.path,
                    impl.line,
                    f"an impl of {impl.qualname}, which no file read defines",
                    "pass the file with its def too",
                    "warning",
                )
            )
            continue
        target.kernels.extend(impl.kernels)
        target.notes.extend(impl.notes)
    found.ops = list(merged.values())
    return found
