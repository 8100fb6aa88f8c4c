"""Plan `setup_context` and `backward` from the spec's gradient formulas.

Note [Saving only what formulas use]
A formula that reads only `x.shape` (or dtype, device, ndim) makes opgen save
that attribute on ctx instead of the tensor, so the tensor's memory can be
freed after forward. Inputs no formula reads are not saved at all. The
rewrite happens on the formula's AST, so the generated backward reads like
hand-written code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..spec.expr import SAFE_BUILTINS, names_used
from ..spec.model import OpSpec
from .literals import literal
from .pyexpr import unparse

__all__ = ["AutogradPlan", "plan_autograd", "METADATA_ATTRS"]

METADATA_ATTRS = ("shape", "dtype", "device", "ndim")


@dataclass(frozen=True)
class AutogradPlan:
    setup_params: str
    setup_lines: tuple[str, ...]
    backward_lines: tuple[str, ...]


class _Rewrite(ast.NodeTransformer):
    def __init__(self, op: OpSpec, metadata_only: set[str]):
        self.op = op
        self.inputs = {a.name for a in op.args}
        self.metadata_only = metadata_only

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in self.metadata_only:
            return ast.copy_location(ast.Name(f"_{node.value.id}_{node.attr}", ast.Load()), node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if (
            node.id in self.inputs
            or node.id in ("grad", "grads", "torch", "math", "F")
            or node.id.startswith("result")
        ):
            return node
        if node.id in SAFE_BUILTINS:
            return node
        # another op of the same library
        return ast.copy_location(
            ast.parse(f"torch.ops.{self.op.namespace}.{node.id}", mode="eval").body, node
        )


def _uses(op: OpSpec) -> tuple[set[str], dict[str, set[str]], set[str]]:
    """(fully used inputs, metadata attrs per input, result names used)."""
    tensors = {a.name for a in op.args if a.is_tensor and a.type == "Tensor"}
    inputs = {a.name for a in op.args}
    full: set[str] = set()
    meta: dict[str, set[str]] = {}
    results: set[str] = set()
    for formula in op.grads:
        tree = ast.parse(formula.expression, mode="eval")
        meta_nodes: set[int] = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in METADATA_ATTRS
                and isinstance(node.value, ast.Name)
                and node.value.id in tensors
            ):
                meta.setdefault(node.value.id, set()).add(node.attr)
                meta_nodes.add(id(node.value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                if node.id in inputs and id(node) not in meta_nodes:
                    full.add(node.id)
                elif node.id == "result" or (
                    node.id.startswith("result") and node.id[6:].isdigit()
                ):
                    results.add(node.id)
    for name in full:
        meta.pop(name, None)
    return full, meta, results


def plan_autograd(op: OpSpec) -> AutogradPlan:
    full, meta, results = _uses(op)
    args = op.args
    saved: list[str] = []  # expressions passed to save_for_backward, in order
    unpack: list[str] = []  # backward lines that restore saved tensors
    offset = "0"
    setup: list[str] = []
    needed_inputs = sorted(full | set(meta), key=[a.name for a in args].index)
    # Note [Tensor-list gradients]: backward must return a list per Tensor[]
    # input (torch checks the structure), so every list input's length is kept.
    lists = [a.name for a in args if a.is_tensor_list]
    if results:
        setup.append("_output = output")  # an input may be named `output`
    positional = [a.name for a in args if not a.kwarg_only]
    if (needed_inputs or lists) and positional:
        targets = f"({positional[0]},)" if len(positional) == 1 else ", ".join(positional)
        setup.append(f"{targets} = inputs")
    for name in lists:
        setup.append(f"ctx._{name}_count = len({name})")
    for arg in args:
        if arg.kwarg_only and arg.name in needed_inputs:
            setup.append(f"{arg.name} = keyword_only_inputs[{literal(arg.name)}]")
    for arg in args:
        if arg.name in full:
            if arg.is_tensor:
                saved.append(arg.name)
                unpack.append(f"{arg.name} = _saved[{offset}]")
                offset = _plus(offset, 1)
            elif arg.is_tensor_list:
                saved.append(f"*{arg.name}")
                end = _plus(offset, f"ctx._{arg.name}_count")
                unpack.append(f"{arg.name} = list(_saved[{_span(offset, end)}])")
                offset = end
            else:
                setup.append(f"ctx._{arg.name} = {arg.name}")
                unpack.append(f"{arg.name} = ctx._{arg.name}")
        for attr in sorted(meta.get(arg.name, ())):
            setup.append(f"ctx._{arg.name}_{attr} = {arg.name}.{attr}")
            unpack.append(f"_{arg.name}_{attr} = ctx._{arg.name}_{attr}")
    for name in sorted(results):
        if name == "result" or len(op.returns) == 1:
            source = "_output"
        else:
            source = f"_output[{int(name[6:])}]"
        saved.append(source)
        unpack.append(f"{name} = _saved[{offset}]")
        offset = _plus(offset, 1)
    if saved:
        setup.append(f"ctx.save_for_backward({', '.join(saved)})")
        unpack.insert(0, "_saved = ctx.saved_tensors")
    if not setup:
        setup.append("pass")

    backward: list[str] = list(unpack)
    uses_grad = any("grad" in names_used(ast.parse(f.expression, mode="eval")) for f in op.grads)
    if uses_grad:
        backward.append("grad = grads[0]")
    index = {a.name: i for i, a in enumerate(args)}
    # The dispatcher drops trailing arguments left at their defaults, so
    # needs_input_grad can be shorter than the schema: pad it.
    backward.append(f"_needs = (*ctx.needs_input_grad, *(False,) * {len(args)})")
    scalars = [a.name for a in args if not a.is_tensor_list]
    if scalars:
        backward.append(" = ".join(f"_grad_{name}" for name in scalars) + " = None")
    for name in lists:
        backward.append(f"_grad_{name} = [None] * ctx._{name}_count")
    rewrite = _Rewrite(op, set(meta))
    for formula in op.grads:
        tree = rewrite.visit(ast.parse(formula.expression, mode="eval"))
        code = unparse(tree, formula.expression)
        flags = [
            f"any(_needs[{index[name]}])" if name in lists else f"_needs[{index[name]}]"
            for name in formula.inputs
        ]
        condition = flags[0] if len(flags) == 1 else f"any(({', '.join(flags)}))"
        targets = ", ".join(f"_grad_{name}" for name in formula.inputs)
        backward.append(f"if {condition}:")
        backward.append(f"    {targets} = {code}")
    returns = ", ".join(f"_grad_{a.name}" for a in args)
    if lists:
        # With a Tensor[] input torch checks the structure: return exactly one
        # gradient per argument received (stripped defaults are not received).
        returned = f"({returns},)" if len(args) == 1 else f"({returns})"
        backward.append(f"return {returned}[: len(ctx.needs_input_grad)]")
    else:
        backward.append(f"return ({returns},)" if len(args) == 1 else f"return {returns}")
    params = "ctx, inputs, output" + (
        ", keyword_only_inputs" if any(a.kwarg_only for a in args) else ""
    )
    return AutogradPlan(params, tuple(setup), tuple(backward))


def _span(start: str, end: str) -> str:
    """`start:end` as black spaces a slice: around the colon unless both bounds are plain numbers."""
    return f"{start}:{end}" if start.isdigit() and end.isdigit() else f"{start} : {end}"


def _plus(offset: str, amount: int | str) -> str:
    if offset == "0":
        return str(amount)
    if isinstance(amount, int) and offset.isdigit():
        return str(int(offset) + amount)
    return f"{offset} + {amount}"
