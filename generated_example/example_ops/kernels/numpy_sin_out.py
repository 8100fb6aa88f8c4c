"""Implementation of example::numpy_sin_out.

This file is yours: opgen created it from ops/numpy_sin_out.toml and will not
overwrite it. After a schema change, `opgen generate` merges the new function
signatures into it and keeps your bodies.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def numpy_sin_out(input: Tensor, output: Tensor) -> None:
    output.copy_(torch.from_numpy(np.sin(input.numpy())))
