"""Kernel of the runtime matrix (tests/test_runtime_matrix.py), written over the stub."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def opt_add(x: Tensor, b: Tensor | None = None) -> Tensor:
    return x + b if b is not None else x.clone()
