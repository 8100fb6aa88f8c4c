"""What the typed wrappers need to reach their op's autograd.Function.

Each op with formulas registers them twice: with `torch.library.register_autograd`
(what the raw `torch.ops` handle and torch.compile use) and as an
`autograd.Function` (what forward mode and the torch.func transforms reach).
`needs_function` says which a call needs.

A Function tracks only the tensors it receives directly, so an op with Tensor[]
arguments hands its Function the lists' lengths first and then every argument
with the lists spliced in (`flatten`); the Function's methods rebuild the op's
arguments (`unflatten`). A Tensor[] return is spliced the same way and rebuilt
by `nest`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.autograd.forward_ad import unpack_dual
from torch.func import debug_unwrap

__all__ = ["needs_function", "flatten", "unflatten", "nest"]


def needs_function(
    *inputs: torch.Tensor | Sequence[torch.Tensor | None] | None, registered: bool = True
) -> bool:
    """Whether a call of an op with these differentiable inputs needs its autograd.Function.

    register_autograd serves plain autograd only: forward mode (an input with a tangent)
    gets no tangent from it, and under a torch.func transform (whose inputs it wraps:
    `debug_unwrap` returns another tensor) it cannot run at all. An op whose formulas
    are not `registered` (torch refuses keyword-only tensors) needs the Function for
    every gradient.
    """
    for value in inputs:
        for tensor in value if isinstance(value, (list, tuple)) else (value,):
            if tensor is None:
                continue
            if unpack_dual(tensor).tangent is not None:
                return True
            if (
                tensor.requires_grad
                and torch.is_grad_enabled()
                and (not registered or debug_unwrap(tensor, recurse=False) is not tensor)
            ):
                return True
    return False


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
