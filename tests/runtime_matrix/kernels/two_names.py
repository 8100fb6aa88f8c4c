"""Kernel of the runtime matrix (tests/test_runtime_matrix.py), written over the stub."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def two_names(x: Tensor, x_t: Tensor) -> Tensor:
    return x * x_t
