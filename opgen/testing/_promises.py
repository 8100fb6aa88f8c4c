"""What each built-in sharding rule must do, written apart from the rules themselves.

Note [Promise tables]
For given input placements, the output placements DTensor must produce. A
rule that lets DTensor take another path (a missing pair, a redistribution to
Replicate, a Shard where the op needs whole rows) fails the placement check
even when the values come out right; a wrong pair that DTensor follows fails
the value check. A `custom` rule has no table: its own pairs are its promise.
Where an input cannot be sharded as asked (a dim smaller than the mesh), or
the placement is one the rule must refuse (the last dim of a row-wise op) or
need not accept (each tensor sharded on the same dim), DTensor redistributes,
and any outcome of the table is accepted.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Case", "Inputs", "Table", "cases", "is_tensor", "table"]

# The placements of one call, one per positional argument (None where it is not a tensor).
Inputs = tuple[Any, ...]
# Input placements and the output placements the rule must give for them; None where the
# rule may refuse them (DTensor redistributes the inputs to a pair the rule offers).
Table = list[tuple[Inputs, Any]]


@dataclass(frozen=True)
class Case:
    """Inputs placed so, the op's outputs are placed as one of `outcomes`; no outcome: the call
    must refuse."""

    inputs: Inputs
    outcomes: tuple[tuple[Any, ...], ...]


def is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def _placed(args: Sequence[Any], placement: Callable[[Any], Any]) -> Inputs:
    """`placement(arg)` for each tensor argument, None for the others."""
    return tuple(placement(a) if is_tensor(a) else None for a in args)


def _elementwise_table(args: Sequence[Any], outputs: int) -> Table:
    from torch.distributed.tensor import Replicate, Shard

    shape = torch.broadcast_shapes(*(a.shape for a in args if is_tensor(a)))
    table = [(_placed(args, lambda a: Replicate()), (Replicate(),) * outputs)]
    for dim in range(len(shape)):
        # An input that broadcasts along `dim` (absent or of size 1) must stay whole.
        def place(a: Any, dim: int = dim) -> Any:
            own = a.ndim - len(shape) + dim
            return Shard(own) if own >= 0 and a.shape[own] == shape[dim] else Replicate()

        table.append((_placed(args, place), (Shard(dim),) * outputs))
    return table


def _rowwise_table(args: Sequence[Any], outputs: Sequence[str]) -> Table:
    from torch.distributed.tensor import Partial, Replicate, Shard

    rows = next(a for a in args if is_tensor(a))

    def rows_at(placement: Any) -> Inputs:
        return _placed(args, lambda a: placement if a.shape == rows.shape else Replicate())

    table: Table = [(rows_at(Replicate()), (Replicate(),) * len(outputs))]
    for dim in range(rows.ndim - 1):
        placed = tuple(Shard(dim) if kind == "rows" else Partial() for kind in outputs)
        table.append((rows_at(Shard(dim)), placed))
    if rows.ndim:
        # Refused: each rank would normalise part of a row.
        table.append((rows_at(Shard(rows.ndim - 1)), None))
    return table


def _matmul_table(args: Sequence[Any]) -> Table:
    from torch.distributed.tensor import Partial, Replicate, Shard

    first, second = [i for i, a in enumerate(args) if is_tensor(a)]

    def pair(a: Any, b: Any) -> Inputs:
        inputs: list[Any] = [None] * len(args)
        inputs[first], inputs[second] = a, b
        return tuple(inputs)

    return [
        (pair(Replicate(), Replicate()), (Replicate(),)),
        (pair(Shard(0), Replicate()), (Shard(0),)),  # rows of a
        (pair(Replicate(), Shard(1)), (Shard(1),)),  # columns of b
        (pair(Shard(1), Shard(0)), (Partial(),)),  # the inner dim: partial sums
    ]


def _sharded_on(dim: int) -> Callable[[Any], Any]:
    """Shard(dim) for a tensor that has the dim, Replicate() for one that has not."""
    from torch.distributed.tensor import Replicate, Shard

    return lambda a: Shard(dim) if dim < a.ndim else Replicate()


def _replicate_table(args: Sequence[Any], outputs: int) -> Table:
    from torch.distributed.tensor import Replicate

    ndim = max(a.ndim for a in args if is_tensor(a))
    table = [(_placed(args, lambda a: Replicate()), (Replicate(),) * outputs)]
    for dim in range(ndim):
        placed = _placed(args, _sharded_on(dim))
        table.append((placed, (Replicate(),) * outputs))  # gathered: the op runs whole
    return table


@dataclass(frozen=True)
class _RuleInput:
    """A tensor argument as a sharding rule sees it: what the generated rules promise to read
    (`.shape`, the global shape; `.ndim`; `.placements`, one per mesh dim; `.mesh`)."""

    shape: Any
    ndim: int
    placements: tuple[Any, ...]
    mesh: Any


def _custom_table(
    name: str, rules: str, args: Sequence[Any], kwargs: dict[str, Any], mesh: Any
) -> Table:
    """The user's own pairs, asked with replicated inputs (the global shapes are what a rule
    sees); `rules` is the module of the generated rules (`<package>.sharding`)."""
    from torch.distributed.tensor import Replicate

    replicated = tuple(Replicate() for _ in range(mesh.ndim))
    specs = [_RuleInput(a.shape, a.ndim, replicated, mesh) if is_tensor(a) else a for a in args]
    table = []
    for outputs, inputs in importlib.import_module(rules).RULES[name](*specs, **kwargs):
        # A rule may leave out the None of trailing arguments that are not tensors.
        table.append((tuple(inputs) + (None,) * (len(args) - len(inputs)), tuple(outputs)))
    return table


def table(
    rule: str,
    name: str,
    rules: str,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    outputs: Sequence[str],
    returns: int,
    mesh: Any,
) -> Table:
    """The promise table of the op's rule for these arguments (Note [Promise tables])."""
    if rule == "elementwise":
        return _elementwise_table(args, returns)
    if rule == "rowwise":
        return _rowwise_table(args, outputs)
    if rule == "matmul":
        return _matmul_table(args)
    if rule == "replicate":
        return _replicate_table(args, returns)
    return _custom_table(name, rules, args, kwargs, mesh)


def shardable(args: Sequence[Any], inputs: Sequence[Any], world: int) -> bool:
    """DTensor drops a pair that shards a dim smaller than the mesh."""
    from torch.distributed.tensor import Shard

    return all(
        not isinstance(p, Shard) or a.shape[p.dim] >= world
        for a, p in zip(args, inputs, strict=False)
    )


def _probed(table: Table, args: Sequence[Any]) -> Table:
    """The table, plus every tensor sharded on each dim where it has no such entry.

    A rule need not accept those placements, but DTensor must still reach one
    of the table's outcomes from them. They also catch a sharding decision that
    DTensor cached for a call with other non-tensor arguments.
    """
    seen = {inputs for inputs, _ in table}
    probes: Table = []
    for dim in range(max(a.ndim for a in args if is_tensor(a))):
        inputs = _placed(args, _sharded_on(dim))
        if inputs not in seen:
            seen.add(inputs)
            probes.append((inputs, None))
    return table + probes


def cases(table: Table, args: Sequence[Any], mutated: Sequence[int], world: int) -> Iterator[Case]:
    """The calls to run: each entry of the table (and the probes), with the outcomes allowed."""
    table = _probed(table, args)
    allowed = tuple(outcome for _, outcome in table if outcome is not None)
    if not mutated:
        for inputs, outcome in table:
            exact = outcome is not None and shardable(args, inputs, world)
            yield Case(inputs, (outcome,) if exact else allowed)
        return
    # A mutated argument must keep its placement (were it redistributed, the op would write
    # into a temporary): try each placement it can have against each entry of the table.
    keeps = [inputs for inputs, outcome in table if outcome is not None]
    placements = list(dict.fromkeys(inputs[i] for inputs, _ in table for i in mutated))
    for inputs, _ in table:
        for placement in placements:
            moved = tuple(placement if i in mutated else p for i, p in enumerate(inputs))
            kept = any(all(k[i] == placement for i in mutated) for k in keeps)
            ok = kept and shardable([args[i] for i in mutated], [placement] * len(mutated), world)
            yield Case(moved, ((placement,) * len(mutated),) if ok else ())
