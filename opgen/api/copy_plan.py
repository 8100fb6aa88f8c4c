"""The copy-through starter of a schema (Note [Starter bodies] in starter.py).

`opgen new --schema` writes the spec's starter reference, fake rule and
samples from it, and the kernels' starter bodies copy accordingly: the two
sides are computed here so that they agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CopyPlan", "Param", "copy_plan"]


@dataclass(frozen=True)
class Param:
    """What a starter needs to know of an argument."""

    name: str
    type: str  # schema type without alias annotations or list sizes: Tensor, Tensor?, int[]...
    mutated: bool = False


@dataclass(frozen=True)
class CopyPlan:
    """A copy-through body: `source` (`x`, or `xs[0]` of a list) into each output and mutated tensor."""

    source: str  # the argument read
    source_is_list: bool
    returns: tuple[str, ...]  # "Tensor" or "Tensor[]", per return
    mutated: tuple[str, ...]  # mutated Tensor arguments, written in place

    @property
    def source_expr(self) -> str:
        return f"{self.source}[0]" if self.source_is_list else self.source

    def _copy(self) -> str:
        return f"{self.source_expr}.clone()"

    def values(self) -> list[str]:
        """Python expressions of the outputs: each return, else each mutated argument's new value."""
        if not self.returns:
            return [self._copy() for _ in self.mutated]
        return [f"[{self._copy()}]" if r == "Tensor[]" else self._copy() for r in self.returns]

    @property
    def reference(self) -> str:
        """The spec's starter reference: what the copy-through computes."""
        values = self.values()
        value = values[0] if len(values) == 1 else f"({', '.join(values)})"
        if not (self.returns and self.mutated):
            return value
        # the reference writes the arguments the op writes, on its copies, then gives the returns
        writes = [f"{name}.copy_({self.source_expr})" for name in self.mutated]
        return f"({', '.join(writes)}, {value})[-1]"

    def python_body(self) -> tuple[str, ...]:
        lines = [f"{name}.copy_({self.source_expr})" for name in self.mutated]
        if self.returns:
            lines.append(f"return {', '.join(self.values())}")
        return tuple(lines)

    def fake(self) -> tuple[str, tuple[str, ...]]:
        """The spec's `[fake]` rule: ("like", inputs) when every output copies a plain tensor, else ("expr", ...)."""
        if not self.source_is_list and all(r == "Tensor" for r in self.returns):
            return "like", tuple(self.source for _ in self.returns)
        empty = f"{self.source_expr}.new_empty({self.source_expr}.shape)"
        return "expr", tuple(f"[{empty}]" if r == "Tensor[]" else empty for r in self.returns)


def copy_plan(params: Sequence[Param], returns: Sequence[str]) -> CopyPlan | None:
    """The copy-through of a schema, or None when it has no tensor to copy or nothing to write."""
    readable = [p for p in params if not p.mutated]
    source = next((p for p in readable if p.type == "Tensor"), None) or next(
        (p for p in readable if p.type == "Tensor[]"), None
    )
    mutated = tuple(p.name for p in params if p.mutated and p.type == "Tensor")
    if source is None or (not returns and not mutated):
        return None
    if any(r not in ("Tensor", "Tensor[]") for r in returns):
        return None  # a non-tensor return, or one aliasing an argument, is no copy
    if any(p.mutated and p.type != "Tensor" for p in params):
        return None
    return CopyPlan(source.name, source.type == "Tensor[]", tuple(returns), mutated)
