"""How an op's `Tensor[]` arguments and returns pass through its autograd.Function.

A Function tracks only the tensors it receives directly, so an op with Tensor[]
arguments hands its Function the lists' lengths first and then every argument
with the lists spliced in (`flatten`); the Function's methods rebuild the op's
arguments (`unflatten`). A Tensor[] return is spliced the same way and rebuilt
by `nest`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["flatten", "unflatten", "nest"]


def flatten(lists: tuple[int, ...], args: Sequence[Any]) -> tuple[Any, ...]:
    """The lengths of the Tensor[] arguments at positions `lists`, then every argument with
    those lists spliced in."""
    flat: list[Any] = []
    for index, value in enumerate(args):
        if index in lists:
            flat.extend(value)
        else:
            flat.append(value)
    return (tuple(len(args[i]) for i in lists), *flat)


def unflatten(lists: tuple[int, ...], counts: Sequence[int], flat: Sequence[Any]) -> list[Any]:
    """The inverse of `flatten`, given the lengths and the spliced arguments."""
    args: list[Any] = []
    position = 0
    count = iter(counts)
    while position < len(flat):
        if len(args) in lists:
            size = next(count)
            args.append(list(flat[position : position + size]))
            position += size
        else:
            args.append(flat[position])
            position += 1
    while len(args) in lists:  # trailing empty lists
        next(count)
        args.append([])
    return args


def nest(returns: tuple[bool, ...], flat: Sequence[Any]) -> Any:
    """A Function's flat outputs in the op's structure: the one Tensor[] return (flagged in
    `returns`) as a list."""
    list_at = returns.index(True)
    size = len(flat) - (len(returns) - 1)
    out = [*flat[:list_at], list(flat[list_at : list_at + size]), *flat[list_at + size :]]
    return out[0] if len(returns) == 1 else tuple(out)
