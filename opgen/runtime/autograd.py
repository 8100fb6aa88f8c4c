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

__all__ = ["needs_function", "tensors_of", "flatten", "unflatten", "nest"]


def needs_function(*tensors: torch.Tensor, registered: bool = True) -> bool:
    """Whether a call of an op with these differentiable tensors needs its autograd.Function.

    register_autograd serves plain autograd only: forward mode (an input with a tangent)
    gets no tangent from it, and under a torch.func transform (whose inputs it wraps:
    `debug_unwrap` returns another tensor) it cannot run at all. An op whose formulas
    are not `registered` (torch refuses keyword-only tensors) needs the Function for
    every gradient. Under torch.compile the registered formulas serve (Dynamo cannot
    trace `debug_unwrap`). Pass Tensor[] and optional arguments through `tensors_of`.
    """
    first = tensors[0] if tensors else None
    if not isinstance(first, torch.Tensor):  # None is for the op's own check to name
        return False
    # Outside a dual level unpack_dual hands the tensor itself back as the primal, and no
    # tensor has a tangent: one call (0.3 µs) answers for every input.
    if unpack_dual(first).primal is not first and _has_tangent(tensors):
        return not torch.compiler.is_compiling()
    if not torch.is_grad_enabled():
        return False
    for tensor in tensors:
        if isinstance(tensor, torch.Tensor) and tensor.requires_grad:
            if torch.compiler.is_compiling():
                return False
            if not registered or debug_unwrap(tensor, recurse=False) is not tensor:
                return True
    return False


def _has_tangent(tensors: Sequence[torch.Tensor]) -> bool:
    return any(isinstance(t, torch.Tensor) and unpack_dual(t).tangent is not None for t in tensors)


def tensors_of(*values: torch.Tensor | Sequence[torch.Tensor | None] | None) -> list[torch.Tensor]:
    """The tensors among an op's tensor, optional-tensor and Tensor[] arguments, in order."""
    found: list[torch.Tensor] = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif value is not None:
            found.extend(t for t in value if t is not None)
    return found


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
