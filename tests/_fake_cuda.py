"""Fake CUDA toolkits for the toolchain tests: an `nvcc` shell script that answers like the real one.

The script answers `--version`, `--list-gpu-code` and `-dryrun` (the `#$ TOP=`
line the real nvcc prints on stderr), and counts its runs in `calls` next to it.
"""

from __future__ import annotations

import os
from pathlib import Path

NVCC13_CODES = (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121)
NVCC12_CODES = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 120)

_SCRIPT = """#!/bin/sh
here="$(cd "$(dirname "$0")" && pwd)"
echo x >> "$here/calls"
case "$1" in
  --version) echo "Cuda compilation tools, release {version}, V{version}.1" ;;
  --list-gpu-code) printf '{codes}' ;;
  -dryrun) echo "#\\$ _HERE_=$here" >&2; echo "#\\$ TOP=$here/.." >&2 ;;
  *) echo "fake nvcc: unexpected $*" >&2; exit 2 ;;
esac
"""


def fake_toolkit(
    folder: Path,
    version: str = "13.0",
    codes: tuple[int, ...] = NVCC13_CODES,
    lib: str | None = "targets/x86_64-linux/lib",
    dev_symlink: bool = True,
) -> Path:
    """A toolkit in `folder`: bin/nvcc and (unless `lib` is None) libcudart in `lib`."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    nvcc = bin_dir / "nvcc"
    nvcc.write_text(_SCRIPT.format(version=version, codes="".join(f"sm_{c}\\n" for c in codes)))
    nvcc.chmod(0o755)
    if lib is not None:
        lib_dir = folder / lib
        lib_dir.mkdir(parents=True, exist_ok=True)
        major = version.split(".")[0]
        (lib_dir / f"libcudart.so.{major}").write_bytes(b"")
        if dev_symlink:
            os.symlink(f"libcudart.so.{major}", lib_dir / "libcudart.so")
    return folder


def wrapper(bin_dir: Path, target: Path) -> Path:
    """A `nvcc` in `bin_dir` that execs `target`, like /usr/local/bin/nvcc on some machines."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "nvcc"
    path.write_text(f'#!/bin/sh\nexec "{target}" "$@"\n')
    path.chmod(0o755)
    return path


def calls(toolkit: Path) -> int:
    counter = toolkit / "bin" / "calls"
    return len(counter.read_text().split()) if counter.exists() else 0


def which_in(*folders: Path):
    """A `shutil.which` that searches only `folders` (a PATH without the real nvcc)."""

    def which(name: str) -> str | None:
        for folder in folders:
            path = folder / name
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
        return None

    return which
