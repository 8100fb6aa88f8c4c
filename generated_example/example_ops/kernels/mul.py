"""Implementation of example::mul.

This file is yours: opgen created it from ops/mul.toml and will not
overwrite it. After a schema change, `opgen generate` merges the new function
signatures into it and keeps your bodies.
"""

from __future__ import annotations

from torch import Tensor


def mul(w: Tensor, x: Tensor) -> Tensor:
    return w * x
