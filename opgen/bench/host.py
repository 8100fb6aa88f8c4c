"""The machine a benchmark ran on: CPU model, SIMD extensions, load.

Kernels that pick their code path at run time (AVX2, AVX-512, AMX) run
differently on different hosts, and so do torch's own kernels: a ratio means
little without the CPU it was measured on and how busy that CPU was.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

__all__ = ["Host", "host", "isa_names"]

# /proc/cpuinfo flags shown, and their usual names (the AVX-512 and AMX families in one each).
_FAMILIES = (
    ("AVX2", ("avx2",)),
    ("AVX-512", ("avx512f",)),
    ("AVX-512 BF16", ("avx512_bf16",)),
    ("AMX", ("amx_tile",)),
)


def isa_names(flags: set[str]) -> list[str]:
    """`{"avx2", "avx512f", "amx_tile", ...}` -> `["AVX2", "AVX-512", "AMX"]`."""
    return [name for name, needs in _FAMILIES if all(f in flags for f in needs)]


class Host:
    def __init__(self, model: str, isa: list[str], torch_isa: str, load: tuple[float, ...]):
        self.model = model
        self.isa = isa
        self.torch_isa = torch_isa  # the code path ATen's own CPU kernels take
        self.load = load

    def line(self) -> str:
        isa = ", ".join(self.isa) or "no AVX2"
        load = " ".join(f"{v:.2f}" for v in self.load) if self.load else "unknown"
        return (
            f"host: {self.model} ({isa}; torch's kernels use {self.torch_isa}); load average {load}"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "cpu": self.model,
            "isa": self.isa,
            "torch_cpu_capability": self.torch_isa,
            "load_average": list(self.load),
        }


def _cpuinfo() -> tuple[str, set[str]]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or platform.machine(), set()
    model, flags = "", set[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
        if model and flags:
            break
    return model or platform.machine(), flags


def host() -> Host:
    import torch

    model, flags = _cpuinfo()
    try:
        load: tuple[float, ...] = os.getloadavg()
    except OSError:
        load = ()
    return Host(model, isa_names(flags), torch.backends.cpu.get_cpu_capability(), load)
