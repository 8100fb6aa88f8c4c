"""The CUDA toolkit a build compiles with: where it is, which GPUs it targets, whether it fits torch.

Note [CUDA toolchain]
Every answer comes from the toolkit itself, never from where a command
happens to sit:

- Home. `CUDA_HOME`, then `CUDA_PATH` (an explicit choice: an error if it has
  no `bin/nvcc`), then torch's own guess (`torch.utils.cpp_extension.CUDA_HOME`,
  consulted only for a CUDA torch: a CPU torch never guesses), then `nvcc` on
  PATH, then `/usr/local/cuda`. The `nvcc` found there may be a wrapper script
  that execs the real compiler in a versioned folder, so the toolkit folder is
  the one nvcc reports for itself (`nvcc -dryrun` prints `TOP=`), not the
  wrapper's grandparent.
- libcudart. Looked up in that folder's `lib64`, `targets/x86_64-linux/lib`
  and `lib`; the library is linked with an rpath to it, so it loads without
  `LD_LIBRARY_PATH` (a CUDA torch has already loaded its own copy, which the
  same soname then resolves to).
- Version. An nvcc-N object needs `libcudart.so.N`; a torch built with CUDA M
  loads `libcudart.so.M`. Different majors are refused with the folder of a
  matching toolkit when one is installed next to the conventional one.
- Archs. `TORCH_CUDA_ARCH_LIST` (PyTorch's syntax: "8.0;9.0+PTX", "8.6 9.0";
  every entry must be one nvcc can build), else `torch.cuda.get_arch_list()`
  less what this nvcc cannot build (nvcc 13 dropped sm_70, which cu126 wheels
  still list), with PTX for the highest so newer GPUs can JIT-compile it. A
  CPU torch lists no archs: the default is the oldest arch this nvcc builds,
  plus its PTX, so the library runs on every GPU the toolkit supports at the
  cost of one device compile per file.

Everything here is a function of its arguments (environment, paths, torch's
answers), so tests drive it over fake toolkit layouts.
"""

from __future__ import annotations

import ctypes
import functools
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CONVENTIONAL_HOME",
    "Arch",
    "Nvcc",
    "CudaToolkit",
    "CudaProblem",
    "CudaMissing",
    "find_cuda",
    "locate_nvcc",
    "probe_nvcc",
    "parse_arch_list",
    "select_archs",
    "check_versions",
    "cudart_library",
    "missing_cuda_shim_symbols",
]

CONVENTIONAL_HOME = Path("/usr/local/cuda")
_CUDART_DIRS = ("lib64", "targets/x86_64-linux/lib", "lib")
_ARCH_ENTRY = re.compile(r"^(\d+)\.(\d)([af]?)(\+PTX)?$")
_CPU_ONLY_HINT = "or pass --cpu-only to build only the CPU kernels"


class CudaProblem(Exception):
    """The CUDA toolkit cannot be used: `message` says what is wrong, `hint` how to fix it."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint


class CudaMissing(CudaProblem):
    """No CUDA toolkit was found at all (not an error for a CPU torch)."""


@dataclass(frozen=True, order=True)
class Arch:
    """One GPU target: machine code `sm_<code>`, plus `compute_<code>` PTX when `ptx`."""

    number: int  # 90 for "9.0": sorts archs
    suffix: str = ""  # "a" / "f": arch-specific feature sets (sm_90a)
    ptx: bool = False

    @property
    def code(self) -> str:
        return f"{self.number}{self.suffix}"

    @property
    def label(self) -> str:
        return f"sm_{self.code}" + ("+PTX" if self.ptx else "")

    def gencode(self) -> list[str]:
        flags = [f"-gencode=arch=compute_{self.code},code=sm_{self.code}"]
        if self.ptx:
            flags.append(f"-gencode=arch=compute_{self.code},code=compute_{self.code}")
        return flags


@dataclass(frozen=True)
class Nvcc:
    """What an nvcc says about itself."""

    path: Path  # the command as found (may be a wrapper script)
    home: Path  # the toolkit folder of the real compiler
    version: tuple[int, int]
    gpu_codes: frozenset[int]  # from `nvcc --list-gpu-code`: 75, 80, ...

    @property
    def version_text(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


@dataclass(frozen=True)
class CudaToolkit:
    """The toolkit a build uses, its libcudart and the GPUs it targets."""

    nvcc: Nvcc
    found_by: str  # "CUDA_HOME", "nvcc on PATH", ...
    cudart_dir: Path
    cudart_link: str  # "-lcudart" or "-l:libcudart.so.13"
    archs: tuple[Arch, ...]
    arch_source: str  # why these archs
    dropped: tuple[str, ...] = ()  # archs torch lists that this nvcc cannot build

    @property
    def arch_labels(self) -> str:
        return " ".join(a.label for a in self.archs)

    def gencode_flags(self) -> list[str]:
        return [flag for arch in self.archs for flag in arch.gencode()]

    def describe(self) -> str:
        text = (
            f"CUDA {self.nvcc.version_text} at {self.nvcc.home} ({self.found_by}); "
            f"archs {self.arch_labels} ({self.arch_source})"
        )
        if self.dropped:
            text += (
                f"; not built: {', '.join(self.dropped)} "
                f"(nvcc {self.nvcc.version_text} cannot target them)"
            )
        return text


def parse_arch_list(text: str) -> tuple[Arch, ...]:
    """`TORCH_CUDA_ARCH_LIST` as PyTorch reads it: "8.0;9.0+PTX", "8.6 9.0", "9.0a"."""
    archs: dict[str, Arch] = {}
    for entry in text.replace(";", " ").split():
        match = _ARCH_ENTRY.match(entry)
        if match is None:
            raise CudaProblem(
                f"TORCH_CUDA_ARCH_LIST={text!r}: cannot read {entry!r}",
                'write compute capabilities separated by ";" or spaces, with "+PTX" '
                'to embed PTX: TORCH_CUDA_ARCH_LIST="8.0;9.0+PTX"',
            )
        major, minor, suffix, ptx = match.groups()
        arch = Arch(int(major) * 10 + int(minor), suffix, bool(ptx))
        known = archs.get(arch.code)
        archs[arch.code] = Arch(arch.number, suffix, arch.ptx or bool(known and known.ptx))
    if not archs:
        raise CudaProblem(
            "TORCH_CUDA_ARCH_LIST is set but empty",
            'unset it, or list compute capabilities: TORCH_CUDA_ARCH_LIST="8.0;9.0+PTX"',
        )
    return tuple(sorted(archs.values()))


def select_archs(
    requested: str | None, torch_archs: Sequence[str], nvcc: Nvcc
) -> tuple[tuple[Arch, ...], str, tuple[str, ...]]:
    """(archs, why these, torch archs this nvcc cannot build): Note [CUDA toolchain]."""
    supported = ", ".join(f"sm_{c}" for c in sorted(nvcc.gpu_codes))
    if requested is not None and requested.strip() != "":
        archs = parse_arch_list(requested)
        unknown = [a.label.removesuffix("+PTX") for a in archs if a.number not in nvcc.gpu_codes]
        if unknown:
            raise CudaProblem(
                f"TORCH_CUDA_ARCH_LIST asks for {', '.join(unknown)}, which nvcc "
                f"{nvcc.version_text} ({nvcc.path}) cannot build",
                f"this nvcc builds {supported}: change TORCH_CUDA_ARCH_LIST, or set CUDA_HOME "
                "to a toolkit that supports those GPUs",
            )
        return archs, "TORCH_CUDA_ARCH_LIST", ()
    listed = sorted({int(a[3:]) for a in torch_archs if re.fullmatch(r"sm_\d+", a)})
    if listed:
        kept = [n for n in listed if n in nvcc.gpu_codes]
        dropped = tuple(f"sm_{n}" for n in listed if n not in nvcc.gpu_codes)
        if not kept:
            raise CudaProblem(
                f"nvcc {nvcc.version_text} ({nvcc.path}) can build none of the archs torch "
                f"supports ({', '.join(dropped)})",
                f"this nvcc builds {supported}: use the nvcc of the CUDA version torch was "
                'built with, or set TORCH_CUDA_ARCH_LIST (e.g. "8.0;9.0+PTX")',
            )
        archs = tuple(Arch(n) for n in kept[:-1]) + (Arch(kept[-1], ptx=True),)
        return archs, "torch.cuda.get_arch_list(), PTX for the newest", dropped
    if not nvcc.gpu_codes:
        raise CudaProblem(f"`{nvcc.path} --list-gpu-code` listed no GPU architectures")
    oldest = min(nvcc.gpu_codes)
    why = (
        "a CPU torch lists none: the oldest this nvcc builds, plus PTX that newer GPUs "
        "compile at load; TORCH_CUDA_ARCH_LIST overrides"
    )
    return (Arch(oldest, ptx=True),), why, ()


def locate_nvcc(
    env: Mapping[str, str],
    torch_home: Callable[[], str | None] | None,
    which: Callable[[str], str | None],
    conventional: Path = CONVENTIONAL_HOME,
) -> tuple[Path, str]:
    """(the nvcc to probe, how it was found), in the order of Note [CUDA toolchain]."""
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        value = env.get(variable)
        if value:
            nvcc = Path(value) / "bin" / "nvcc"
            if not nvcc.is_file():
                raise CudaProblem(
                    f"{variable}={value} has no bin/nvcc",
                    f"point {variable} at a CUDA toolkit folder (the one with bin/nvcc and "
                    f"lib64/libcudart.so), or unset it",
                )
            return nvcc, variable
    guess = torch_home() if torch_home is not None else None
    if guess and (Path(guess) / "bin" / "nvcc").is_file():
        return Path(guess) / "bin" / "nvcc", "torch.utils.cpp_extension.CUDA_HOME"
    on_path = which("nvcc")
    if on_path:
        return Path(on_path), "nvcc on PATH"
    if (conventional / "bin" / "nvcc").is_file():
        return conventional / "bin" / "nvcc", str(conventional)
    raise CudaMissing(
        f"no CUDA toolkit found (CUDA_HOME and CUDA_PATH are unset, no nvcc on PATH, "
        f"no {conventional}/bin/nvcc)",
        "install the CUDA toolkit and set CUDA_HOME to it",
    )


def probe_nvcc(path: Path) -> Nvcc:
    """Ask nvcc for its version, its GPU targets and its toolkit folder (cached per binary)."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise CudaProblem(f"cannot run {path}: {exc.strerror}") from None
    return _probe(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _probe(path: str, _mtime_ns: int, _size: int) -> Nvcc:
    """Three quick runs (about 50 ms together), once per process and nvcc binary."""
    version_out = _run(path, "--version")
    version = re.search(r"release (\d+)\.(\d+)", version_out)
    if version is None:
        raise CudaProblem(f"`{path} --version` printed no CUDA release: {version_out.strip()!r}")
    codes = frozenset(int(c) for c in re.findall(r"\bsm_(\d+)\b", _run(path, "--list-gpu-code")))
    # -dryrun prints nvcc's environment, TOP included, and runs nothing.
    dryrun = _run(path, "-dryrun", "-c", "opgen_probe.cu", "-o", "opgen_probe.o")
    top = re.search(r"^#\$ TOP=(.+)$", dryrun, re.M)
    home = Path(top.group(1).strip()).resolve() if top else Path(path).resolve().parent.parent
    return Nvcc(Path(path), home, (int(version.group(1)), int(version.group(2))), codes)


def _run(nvcc: str, *args: str) -> str:
    try:
        done = subprocess.run([nvcc, *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CudaProblem(f"cannot run {nvcc}: {exc}") from None
    if done.returncode != 0 and args[0] != "-dryrun":
        raise CudaProblem(f"`{nvcc} {' '.join(args)}` failed: {done.stderr.strip()[-300:]}")
    return done.stdout + done.stderr


def check_versions(
    nvcc: Nvcc, torch_cuda: str | None, conventional: Path = CONVENTIONAL_HOME
) -> None:
    """Refuse an nvcc whose CUDA major differs from torch's (they need different libcudart)."""
    if torch_cuda is None:
        return
    major = int(torch_cuda.split(".")[0])
    if nvcc.version[0] == major:
        return
    matching = sorted(
        (p for p in conventional.parent.glob(f"cuda-{major}.*") if (p / "bin" / "nvcc").is_file()),
        key=lambda p: [int(x) for x in re.findall(r"\d+", p.name)],
    )
    use = (
        f"set CUDA_HOME={matching[-1]} (CUDA {matching[-1].name.removeprefix('cuda-')})"
        if matching
        else f"install a CUDA {major}.x toolkit and set CUDA_HOME to it"
    )
    raise CudaProblem(
        f"nvcc {nvcc.path} is CUDA {nvcc.version_text} (in {nvcc.home}), but torch was built "
        f"with CUDA {torch_cuda}: objects from nvcc {nvcc.version[0]} need "
        f"libcudart.so.{nvcc.version[0]}, while this torch loads libcudart.so.{major}",
        f"use the nvcc of a CUDA {major}.x toolkit: {use}; {_CPU_ONLY_HINT}",
    )


def cudart_library(home: Path, major: int) -> tuple[Path, str]:
    """(folder of libcudart, its linker argument); the dev symlink, else the runtime soname."""
    for sub in _CUDART_DIRS:
        if (home / sub / "libcudart.so").exists():
            return home / sub, "-lcudart"
    for sub in _CUDART_DIRS:
        if (home / sub / f"libcudart.so.{major}").exists():
            return home / sub, f"-l:libcudart.so.{major}"
    raise CudaProblem(
        f"no libcudart.so in the CUDA toolkit at {home} " f"(looked in {', '.join(_CUDART_DIRS)})",
        "set CUDA_HOME to a complete CUDA toolkit (bin/nvcc and lib64/libcudart.so), "
        + _CPU_ONLY_HINT,
    )


def find_cuda(
    env: Mapping[str, str],
    torch_cuda: str | None,
    torch_archs: Sequence[str],
    torch_home: Callable[[], str | None] | None,
    which: Callable[[str], str | None],
    conventional: Path | None = None,
) -> CudaToolkit:
    """The toolkit to build with; raises CudaMissing or CudaProblem (Note [CUDA toolchain])."""
    conventional = conventional or CONVENTIONAL_HOME
    path, found_by = locate_nvcc(env, torch_home, which, conventional)
    nvcc = probe_nvcc(path)
    check_versions(nvcc, torch_cuda, conventional)
    cudart_dir, cudart_link = cudart_library(nvcc.home, nvcc.version[0])
    archs, why, dropped = select_archs(env.get("TORCH_CUDA_ARCH_LIST"), torch_archs, nvcc)
    return CudaToolkit(nvcc, found_by, cudart_dir, cudart_link, archs, why, dropped)


_SHIM_HEADERS = ("torch/csrc/stable/c", "torch/csrc/inductor/aoti_torch/c")
_SHIM_EXPORT = re.compile(r"AOTI_TORCH_EXPORT\s+[^;(]*?\b((?:aoti_torch|torch)_\w+)\s*\(")


def missing_cuda_shim_symbols(include_dir: Path, library: Path) -> tuple[str, ...]:
    """The CUDA functions of the stable C shim that `library` (and its dependencies) lack.

    Note [CUDA on a CPU torch]: a CPU torch has no libtorch_cuda, so the shim's
    CUDA functions (`aoti_torch_get_current_cuda_stream`, `torch_c10_cuda_check_msg`,
    ...) exist only as declarations. The build makes references to exactly
    these weak in the CUDA objects: the library then links with --no-undefined
    and loads; they are only called with CUDA tensors, which a CPU torch never
    makes. Under a CUDA torch a weak reference binds only to a library in the
    global scope, and torch loads libtorch_cuda locally: the generated
    `_library.py` first promotes it (`RTLD_NOLOAD | RTLD_GLOBAL`), so one
    library built here runs its CUDA kernels under any CUDA torch of its CUDA
    major (without that, each reference stays null and the first CUDA call crashes).
    """
    names: set[str] = set()
    for folder in _SHIM_HEADERS:
        for header in sorted((include_dir / folder).glob("*.h")):
            names.update(_SHIM_EXPORT.findall(header.read_text(encoding="utf-8", errors="replace")))
    handle = ctypes.CDLL(str(library))  # already loaded by `import torch`: a lookup, not a load
    return tuple(sorted(n for n in names if "cuda" in n and not hasattr(handle, n)))
