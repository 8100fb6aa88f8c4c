"""The names of the tangents in forward-mode formulas (Note [Tangent names])."""

from __future__ import annotations

from .model import Arg

__all__ = ["tangent_names"]


def tangent_names(args: tuple[Arg, ...]) -> dict[str, str]:
    """Note [Tangent names]
    In a [jvp] formula the tangent of input `x` is `x_t`, as in derivatives.yaml.
    An op whose arguments include both `x` and `x_t` would make that ambiguous,
    so its tangents all take the suffix `_tt` instead (then `_ttt`, ...): the
    first suffix that names no argument. Arguments always keep their own names.
    """
    taken = {a.name for a in args}
    suffix = "_t"
    while any(a.name + suffix in taken for a in args):
        suffix += "t"
    return {a.name: a.name + suffix for a in args if a.differentiable}
