"""Implementation of example::crop.

This file is yours: opgen created it from ops/crop.toml and will not
overwrite it. After a schema change, `opgen generate` merges the new function
signatures into it and keeps your bodies.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image
import torch
from torch import Tensor


def crop(pic: Tensor, box: Sequence[int]) -> Tensor:
    left, upper, right, lower = box
    planes = [plane.crop(_scaled((left, upper, right, lower), pic)) for plane in _to_planes(pic)]
    return _from_planes(planes, pic)


# PIL's float mode is float32-only and would round float64 images. Each
# (H, W) plane is therefore handed to PIL as 32-bit integers ("I" mode) holding
# the raw bytes: crop and paste only move pixels, so every dtype whose size is
# a multiple of 4 bytes comes back bit-exact, which gradcheck in float64 needs.


def _words(tensor: Tensor) -> int:
    size = tensor.element_size()
    if size % 4:
        raise TypeError(f"PIL-based crop/paste supports 4- and 8-byte dtypes, not {tensor.dtype}")
    return size // 4


def _to_planes(image: Tensor) -> list[Image.Image]:
    words = _words(image)
    array = image.detach().cpu().contiguous().numpy()
    planes = array.view(np.int32).reshape(array.shape[0], array.shape[1], array.shape[2] * words)
    return [Image.fromarray(plane, mode="I") for plane in planes]


def _from_planes(planes: list[Image.Image], like: Tensor) -> Tensor:
    words = _words(like)
    height, width = planes[0].height, planes[0].width // words
    array = np.stack([np.array(p, dtype=np.int32) for p in planes])
    array = array.reshape(len(planes), height, width * words)
    values = torch.from_numpy(array.view(np.dtype(str(like.dtype).removeprefix("torch."))).copy())
    return values.to(like.device)


def _scaled(box: tuple[int, ...], image: Tensor) -> tuple[int, ...]:
    """Horizontal coordinates in 32-bit words rather than elements."""
    words = _words(image)
    return tuple(v * words if i % 2 == 0 else v for i, v in enumerate(box))
