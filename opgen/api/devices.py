"""What each device a spec names (`cpu`, `cuda`) is called in generated code."""

from __future__ import annotations

__all__ = ["DISPATCH_KEYS", "CPP_DEVICE_CHECKS"]

# the dispatch key a device's kernels register under (Python `Library.impl`, C++ `*_LIBRARY_IMPL`)
DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA"}

# how a C++ kernel stub checks an input's device: the tensor method, and how its message names the device
CPP_DEVICE_CHECKS = {"cpu": ("is_cpu", "a CPU tensor"), "cuda": ("is_cuda", "a CUDA tensor")}
