"""Implementation of mylib::sine.

This file is yours: opgen created it from ops/sine.toml and will not
overwrite it. After a schema change, `opgen generate` merges the new function
signatures into it and keeps your bodies.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def sine(x: Tensor) -> Tensor:
    return torch.sin(x)
