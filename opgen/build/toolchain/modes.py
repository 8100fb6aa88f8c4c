"""Whether a build links, compile-checks or skips a project's CUDA sources.

Note [CUDA build modes]
| torch | CUDA toolkit (Note [CUDA toolchain])            | target  | CUDA sources                  |
|-------|-------------------------------------------------|---------|-------------------------------|
| CUDA  | found, same CUDA major                          | any     | linked                        |
| CUDA  | missing, other major, no libcudart, bad archs   | any     | error (hint: `--cpu-only`)    |
| CPU   | found                                           | stable  | linked (Note [CUDA on a CPU torch]) |
| CPU   | found                                           | classic | compile-checked with `--check-cuda`, else skipped |
| CPU   | missing                                         | any     | skipped (error with `--check-cuda`) |
| CPU   | unusable (CUDA_HOME wrong, no libcudart, ...)   | any     | error                         |

A CUDA torch with CUDA ops must get its CUDA kernels: building without them
"succeeds" and every CUDA call then fails with "Could not run ... with
arguments from the 'CUDA' backend", so that is an error unless the user asks
for a CPU-only build (`--cpu-only`), which the build then reports. A classic
CUDA library uses c10::cuda, which only a CUDA torch ships (libc10_cuda), so
on a CPU torch it can only be compile-checked. A machine with no CUDA toolkit
and a CPU torch builds the CPU library and says what it skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ...errors import Diagnostic, OpgenError
from .cuda import CudaMissing, CudaProblem, CudaToolkit

__all__ = ["CudaMode", "CudaDecision", "cuda_mode"]

_CPU_ONLY = "--cpu-only builds only the CPU kernels"


class CudaMode(Enum):
    NONE = "none"  # the project has no CUDA sources
    LINK = "link"  # compiled with nvcc and linked into the library
    CHECK = "check"  # compiled with nvcc, linked into nothing
    SKIP = "skip"  # not compiled

    @property
    def compiles(self) -> bool:
        return self in (CudaMode.LINK, CudaMode.CHECK)


@dataclass(frozen=True)
class CudaDecision:
    mode: CudaMode
    note: str | None = None  # what the build did with the CUDA sources, for the user


def cuda_mode(
    *,
    sources: int,
    stable: bool,
    torch_cuda: str | None,
    toolkit: CudaToolkit | None,
    problem: CudaProblem | None,
    check_cuda: bool = False,
    cpu_only: bool = False,
) -> CudaDecision:
    """Note [CUDA build modes]; raises OpgenError where the build must not go on."""
    if cpu_only and check_cuda:
        raise OpgenError(_error("--cpu-only and --check-cuda contradict each other", "pass one"))
    if sources == 0:
        return CudaDecision(CudaMode.NONE)
    files = f"{sources} .cu file(s)"
    if cpu_only:
        return CudaDecision(
            CudaMode.SKIP,
            f"CPU-only build (--cpu-only): {files} not built; an op called with CUDA tensors "
            "fails with \"Could not run ... with arguments from the 'CUDA' backend\"",
        )
    if toolkit is None:
        problem = problem or CudaMissing("the CUDA toolkit was not looked for")
        if torch_cuda is not None:
            raise OpgenError(
                _error(
                    f"torch was built with CUDA {torch_cuda} and the project has {files}, "
                    f"but {problem.message}",
                    _with_cpu_only(problem.hint),
                )
            )
        if isinstance(problem, CudaMissing):
            if check_cuda:
                raise OpgenError(
                    _error(f"--check-cuda needs nvcc, but {problem.message}", problem.hint)
                )
            return CudaDecision(
                CudaMode.SKIP, f"CUDA skipped: {problem.message}; {files} not built"
            )
        raise OpgenError(
            _error(f"cannot build {files}: {problem.message}", _with_cpu_only(problem.hint))
        )
    if torch_cuda is not None:
        return CudaDecision(CudaMode.LINK, f"CUDA: linked {files}; {toolkit.describe()}")
    if stable:
        major = toolkit.nvcc.version[0]
        return CudaDecision(
            CudaMode.LINK,
            f"CUDA: linked {files}; {toolkit.describe()}. This torch has no CUDA: the kernels "
            f"are registered and run under a CUDA {major}.x torch",
        )
    if check_cuda:
        return CudaDecision(
            CudaMode.CHECK,
            f"CUDA: compile-checked {files}, linked none (a classic-target CUDA library needs "
            f"a CUDA torch); {toolkit.describe()}",
        )
    return CudaDecision(
        CudaMode.SKIP,
        f"CUDA skipped: a classic-target CUDA library needs a CUDA torch (libc10_cuda); "
        f"{files} not built (pass --check-cuda to compile-check them with nvcc)",
    )


def _error(message: str, hint: str) -> Diagnostic:
    return Diagnostic(None, None, message, hint)


def _with_cpu_only(hint: str) -> str:
    if "--cpu-only" in hint:
        return hint
    return f"{hint}; or {_CPU_ONLY}" if hint else _CPU_ONLY
