"""Sharding rule of example::paste on DTensors (its spec says rule = "custom").

This file is yours: opgen created it from ops/paste.toml and will not
overwrite it. After a schema change, `opgen generate` merges the new function
signature into it and keeps your body. `example_ops.sharding` registers it.
"""

from __future__ import annotations

from torch.distributed.tensor import Placement, Replicate, Shard


def strategies(im1, im2, coord) -> list[tuple[list[Placement], list[Placement | None]]]:
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
    # Each channel of im2 is pasted into the same channel of im1: shard both on the channels.
    return [([Replicate()], [Replicate(), Replicate(), None]), ([Shard(0)], [Shard(0), Shard(0), None])]
