"""Implementation of example::add.

This file is yours: opgen created it from ops/add.toml and will not
overwrite it. After a schema change, `opgen generate` merges the new function
signatures into it and keeps your bodies.
"""

from __future__ import annotations

from torch import Tensor


def add(x: Tensor, b: Tensor) -> Tensor:
    return x + b
