"""Run ninja with its output shown as it comes, and read the compiler's messages for what opgen can fix.

A header the compiler cannot find is the first wall a user's own extension
hits (CUTLASS, CUB, a helper header beside the kernel): the message names
the #include, and the fix is a build setting (Note [Build settings]). So
the output is passed through line by line and kept, and a failed build ends
with one hint per missing header naming the file and line that include it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["run_ninja", "missing_header_hints"]

# gcc (and nvcc, whose preprocessing is gcc's): `file:line:col: fatal error: x.h: No such file...`
_MISSING = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?:\d+:)? fatal error: (?P<header>[^:\n]+): "
    r"No such file or directory",
    re.MULTILINE,
)
_PYTHON_HEADERS = ("Python.h", "pybind11/pybind11.h", "torch/extension.h", "torch/python.h")


def run_ninja(command: Sequence[str], cwd: Path) -> tuple[int, str]:
    """Run `command`, passing its output through to stdout; its exit code and its output."""
    kept: list[str] = []
    with subprocess.Popen(
        list(command),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            kept.append(line)
        status = process.wait()
    return status, "".join(kept)


def missing_header_hints(output: str) -> list[str]:
    """One hint per header the compiler could not find, naming the #include that wants it."""
    hints: list[str] = []
    for match in _MISSING.finditer(output):
        header, where = match["header"], f"{match['file']}:{match['line']}"
        if header in _PYTHON_HEADERS or header.startswith("pybind11/"):
            hint = (
                f"{where} includes <{header}>, which needs Python's headers: the library opgen "
                "builds is loaded by torch, not imported as a Python module, so kernels need "
                "neither Python.h nor pybind11. Include <torch/all.h> (classic) or the torch "
                "headers the code uses instead; `opgen import` leaves the Python bindings of "
                "files it imports out"
            )
        else:
            hint = (
                f"{where} includes <{header}>, which no include folder of the build holds: add "
                f"the folder that holds {header} to include_dirs under [build] in opgen.toml "
                '(a project folder, an absolute path or "$VAR/include"); see docs/cpp.md, '
                '"Build settings"'
            )
        if hint not in hints:
            hints.append(hint)
    return hints
