"""Implementation of example::numpy_sin.

This file is yours: opgen created it from ops/numpy_sin.toml and will not
overwrite it. After a schema change, `opgen generate` merges the new function
signatures into it and keeps your bodies.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def numpy_sin_cpu(x: Tensor) -> Tensor:
    return _sin(x)


def numpy_sin_cuda(x: Tensor) -> Tensor:
    # NumPy runs on the host: copy over, compute, copy back.
    return _sin(x.cpu()).to(x.device)


def _sin(x: Tensor) -> Tensor:
    # np.sin of a 0-d array is a NumPy scalar, which ascontiguousarray makes 1-d:
    # the result takes x's shape back (the fake kernel's, `like = "x"`)
    return torch.from_numpy(np.ascontiguousarray(np.sin(x.numpy()))).reshape(x.shape)
