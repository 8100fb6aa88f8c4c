"""Sharding rule of example::crop on DTensors (its spec says rule = "custom").

This file is yours: opgen created it from ops/crop.toml and will not
overwrite it. After a schema change, `opgen generate` merges the new function
signature into it and keeps your body. `example_ops.sharding` registers it.
"""

from __future__ import annotations

from torch.distributed.tensor import Placement, Replicate, Shard


def strategies(pic, box) -> list[tuple[list[Placement], list[Placement | None]]]:
    """The (output placements, input placements) pairs DTensor may choose from, for one mesh dim.

    Tensors arrive as DTensorSpec: `.shape` is the global shape, `.ndim`, and
    `.placements` the current placement on each mesh dimension; other arguments
    as values (an argument the call leaves out takes its default here). Give one output
    placement per returned tensor (none for an op returning nothing) and one
    input placement per positional argument (None where it is not a tensor),
    e.g. ([Shard(0)], [Shard(0), Replicate(), None]); start with the all-Replicate
    pair, which is always valid. A Partial() output holds each rank's partial sum.
    The generated distributed tests run every pair this returns.
    """
    # Each channel is cropped on its own: shard the channels (dim 0), or keep the image whole.
    return [([Replicate()], [Replicate(), None]), ([Shard(0)], [Shard(0), None])]
