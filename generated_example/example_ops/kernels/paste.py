"""Implementation of example::paste.

This file is yours: opgen created it from ops/paste.toml and will not
overwrite it. After a schema change, `opgen generate` merges the new function
signatures into it and keeps your bodies.
"""

from __future__ import annotations

from collections.abc import Sequence

from .crop import _from_planes, _scaled, _to_planes
from torch import Tensor


def paste(im1: Tensor, im2: Tensor, coord: Sequence[int]) -> Tensor:
    result = _to_planes(im1)
    for target, source in zip(result, _to_planes(im2)):
        target.paste(source, _scaled(tuple(coord), im2))
    return _from_planes(result, im1)
