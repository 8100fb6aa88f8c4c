"""What the optional `_pybind` extension module (classic target, `pybind = true`) compiles and links with.

Note [pybind link]
An extension module takes Python's C API from the interpreter that imports
it, so it must not depend on libpython itself: under a statically linked
interpreter that would load a second Python. Its own link therefore cannot
use `--no-undefined`. Instead the same objects and libraries are linked
first into `build/link_check/` with `--no-undefined` and the interpreter's
shared libpython: every symbol except Python's must then resolve from the
kernels (CPU and CUDA), torch and libcudart, so a kernel missing from the link
fails the build instead of the import ("undefined symbol"). The module is
linked after that check passes, without libpython.
"""

from __future__ import annotations

import shlex
import sysconfig
from pathlib import Path

__all__ = ["pybind_cflags", "libpython", "module_name"]


def module_name() -> str:
    return f"_pybind{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"


def pybind_cflags() -> list[str]:
    """Compile flags of csrc/pybind.cpp: Python's headers and torch's pybind11 ABI tags."""
    import torch

    flags = [
        f"-isystem {shlex.quote(sysconfig.get_paths()['include'])}",
        "-DTORCH_EXTENSION_NAME=_pybind",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
    ]
    for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
        value = getattr(torch._C, f"_PYBIND11_{name}", None)
        if value is not None:
            flags.append(f"-DPYBIND11_{name}='\"{value}\"'")
    return flags


def libpython() -> Path | None:
    """This interpreter's shared libpython, for the link check of Note [pybind link]."""
    config = sysconfig.get_config_var
    names = [n for n in (config("INSTSONAME"), f"libpython{config('LDVERSION')}.so") if n]
    libdir = config("LIBDIR") or ""
    folders = [libdir, str(Path(libdir) / (config("MULTIARCH") or "")), config("LIBPL") or ""]
    for folder in folders:
        for name in names:
            path = Path(folder) / name
            if folder and ".so" in name and path.is_file():
                return path
    return None
