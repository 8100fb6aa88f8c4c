"""Plan the op's autograd.Function: `setup_context`, `backward` and `jvp`, from the spec's formulas.

Note [Saving only what formulas use]
A formula that reads only `x.shape` (or dtype, device, ndim) makes opgen save
that attribute on ctx instead of the tensor, so the tensor's memory can be
freed after forward. Inputs no formula reads are not saved at all; tensors the
[grad] formulas read go to `save_for_backward`, those the [jvp] formulas read
to `save_for_forward`. The rewrite happens on the formula's AST, so the
generated code reads like hand-written code.

Note [Tensor-list gradients]
An autograd.Function tracks only the tensors it receives as arguments, so an
op with Tensor[] arguments hands its Function the lists' lengths first and then
every argument with the lists spliced in (`_runtime.flatten`); setup_context,
backward and jvp rebuild the op's arguments (`unflatten`), and backward returns
one gradient per received tensor. A Tensor[] return is spliced the same way
and rebuilt by `nest`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..spec.expr import SAFE_BUILTINS
from ..spec.model import OpSpec
from ..spec.tangents import tangent_names
from . import python as py
from .pyexpr import unparse

__all__ = ["FunctionPlan", "plan_function", "METADATA_ATTRS", "list_positions", "sibling_call"]

METADATA_ATTRS = ("shape", "dtype", "device", "ndim")


@dataclass(frozen=True)
class FunctionPlan:
    """The bodies of the op's autograd.Function, as lines without the method's indentation."""

    forward_params: str
    forward_lines: tuple[str, ...]
    setup_lines: tuple[str, ...]
    backward_lines: tuple[str, ...]
    jvp_lines: tuple[str, ...]
    vmap_params: str
    vmap_lines: tuple[str, ...] = field(default=())


def list_positions(op: OpSpec) -> tuple[int, ...]:
    """The positions of the op's Tensor[] arguments (Note [Tensor-list gradients])."""
    return tuple(i for i, a in enumerate(op.args) if a.is_tensor_list)


def sibling_call(op: OpSpec, name: str, siblings: Mapping[str, str]) -> str:
    """How a formula of `op` calls the op `name` of the library: through its typed wrapper."""
    if name == op.name and op.module == siblings.get(name):
        return name
    module = siblings.get(name)
    if module is None:  # overloads share the name: the packet picks one by the arguments
        return f"torch.ops.{op.namespace}.{name}"
    return f"_op_{module}.{name}"


class _Rewrite(ast.NodeTransformer):
    """Formula names to generated names: metadata reads become ctx attributes, ops their wrappers."""

    def __init__(self, op: OpSpec, metadata_only: set[str], siblings: Mapping[str, str]):
        self.op = op
        self.locals = {a.name for a in op.args} | set(tangent_names(op.args).values())
        self.metadata_only = metadata_only
        self.siblings = siblings

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in self.metadata_only:
            return ast.copy_location(ast.Name(f"_{node.value.id}_{node.attr}", ast.Load()), node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        keep = ("grad", "grads", "torch", "math", "F", *SAFE_BUILTINS)
        if node.id in self.locals or node.id in keep or node.id.startswith("result"):
            return node
        target = sibling_call(self.op, node.id, self.siblings)
        return ast.copy_location(ast.parse(target, mode="eval").body, node)


@dataclass
class _Uses:
    """What one side (backward or jvp) reads: inputs in full, metadata attributes, results."""

    full: set[str] = field(default_factory=set)
    meta: dict[str, set[str]] = field(default_factory=dict)
    results: set[str] = field(default_factory=set)
    tangents: set[str] = field(default_factory=set)


def _uses(op: OpSpec, expressions: Iterable[str]) -> _Uses:
    tensors = {a.name for a in op.args if a.type == "Tensor"}
    inputs = {a.name for a in op.args}
    tangents = {t: a for a, t in tangent_names(op.args).items()}
    uses = _Uses()
    for text in expressions:
        tree = ast.parse(text, mode="eval")
        meta_nodes: set[int] = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in METADATA_ATTRS
                and isinstance(node.value, ast.Name)
                and node.value.id in tensors
            ):
                uses.meta.setdefault(node.value.id, set()).add(node.attr)
                meta_nodes.add(id(node.value))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Name):
                continue
            if node.id in inputs and id(node) not in meta_nodes:
                uses.full.add(node.id)
            elif node.id in tangents:
                uses.tangents.add(node.id)
            elif node.id == "result" or (node.id.startswith("result") and node.id[6:].isdigit()):
                uses.results.add(node.id)
    for name in uses.full:
        uses.meta.pop(name, None)
    return uses


class _GradToTangent(ast.NodeTransformer):
    """A [grad] formula read as a forward-mode one: the incoming gradient becomes `tangent`."""

    def __init__(self, tangent: str):
        self.tangent = tangent

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(self.tangent, ast.Load()) if node.id == "grad" else node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "grads":
            return ast.Name(self.tangent, ast.Load())
        return self.generic_visit(node)


def _element_wise_jvp(op: OpSpec) -> list[tuple[str, str]]:
    """auto_element_wise: each [grad] formula with the incoming gradient replaced by its input's tangent."""
    names = tangent_names(op.args)
    terms = []
    for formula in op.grads:
        (name,) = formula.inputs
        tree = _GradToTangent(names[name]).visit(ast.parse(formula.expression, mode="eval"))
        terms.append((name, unparse(tree, formula.expression)))
    return terms


def _jvp_expressions(op: OpSpec) -> list[str]:
    if op.jvp.auto == "auto_element_wise":
        return [text for _, text in _element_wise_jvp(op)]
    return list(op.jvp.result)


class _Saved:
    """Builds setup_context's saves and each side's unpacking of them."""

    def __init__(self, op: OpSpec):
        self.op = op
        self.setup: list[str] = []
        self.on_ctx: set[str] = set()

    def ctx_value(self, name: str, value: str) -> str:
        """Put `value` on ctx once; returns the ctx attribute."""
        attr = f"ctx.{name}"
        if name not in self.on_ctx:
            self.on_ctx.add(name)
            self.setup.append(f"{attr} = {value}")
        return attr

    def side(self, uses: _Uses, save: str) -> list[str]:
        """Save what one side reads (`save_for_backward` or `save_for_forward`); its unpacking lines."""
        saved: list[str] = []
        unpack: list[str] = []
        offset = "0"
        for arg in self.op.args:
            if arg.name in uses.full:
                if arg.is_tensor:
                    saved.append(arg.name)
                    unpack.append(f"{arg.name} = _saved[{offset}]")
                    offset = _plus(offset, 1)
                elif arg.is_tensor_list:
                    count = self.ctx_value(f"_{arg.name}_count", f"len({arg.name})")
                    saved.append(f"*{arg.name}")
                    end = _plus(offset, count)
                    unpack.append(f"{arg.name} = list(_saved[{_span(offset, end)}])")
                    offset = end
                else:
                    unpack.append(f"{arg.name} = {self.ctx_value(f'_{arg.name}', arg.name)}")
            for attr in sorted(uses.meta.get(arg.name, ())):
                value = self.ctx_value(f"_{arg.name}_{attr}", f"{arg.name}.{attr}")
                unpack.append(f"_{arg.name}_{attr} = {value}")
        for name in sorted(uses.results):
            if name == "result" or len(self.op.returns) == 1:
                source = "_output"
            else:
                source = f"_output[{int(name[6:])}]"
            saved.append(source)
            unpack.append(f"{name} = _saved[{offset}]")
            offset = _plus(offset, 1)
        if saved:
            self.setup.append(f"ctx.{save}({', '.join(saved)})")
            unpack.insert(0, "_saved = ctx.saved_tensors")
        return unpack


def plan_function(op: OpSpec, siblings: Mapping[str, str]) -> FunctionPlan:
    """The Function of an op with formulas, or of one that refuses (Note [One autograd.Function per op])."""
    args = op.args
    lists = list_positions(op)
    names = [a.name for a in args]
    list_returns = any(r.type == "Tensor[]" for r in op.returns)
    bwd = _uses(op, (f.expression for f in op.grads))
    fwd = _uses(op, _jvp_expressions(op)) if op.jvp.auto != "auto_linear" else _Uses()
    if op.jvp.auto == "auto_linear":
        fwd.full = {a.name for a in args if not a.differentiable}

    saved = _Saved(op)
    if lists:
        forward_params = "_counts, *_flat"
        forward_lines = [f"{_unpack(names)} = _unflatten(_LISTS, _counts, _flat)"]
        call = ", ".join(f"{a.name}={a.name}" if a.kwarg_only else a.name for a in args)
    else:
        forward_params = ", ".join(names)
        forward_lines = []
        call = py.call_arguments(op)
    result = f"_below_autograd(_call, {call})"
    if not list_returns:
        forward_lines.append(f"return {result}")
    elif len(op.returns) == 1:
        forward_lines.append(f"return tuple({result})")
    else:
        forward_lines.append(f"return _flatten(_RETURN_LISTS, {result})[1:]")

    needed = bwd.full | set(bwd.meta) | fwd.full | set(fwd.meta)
    if lists:
        saved.setup.append(f"{_unpack(names)} = _unflatten(_LISTS, inputs[0], inputs[1:])")
        saved.ctx_value("_counts", "inputs[0]")
    elif needed & set(names):
        saved.setup.append(f"{_unpack(names)} = inputs")
    if bwd.results or fwd.results:
        saved.setup.append(
            "_output = _nest(_RETURNS, output)" if list_returns else "_output = output"
        )
    backward_unpack = saved.side(bwd, "save_for_backward") if op.grads else []
    jvp_unpack = saved.side(fwd, "save_for_forward") if op.jvp.present else []
    setup_lines = saved.setup or ["pass"]

    backward = _backward_lines(op, bwd, backward_unpack, siblings, lists, list_returns)
    jvp = _jvp_lines(op, fwd, jvp_unpack, siblings, lists)
    vmap_params = "info, in_dims, " + ("_counts, *_flat" if lists else ", ".join(names))
    return FunctionPlan(
        forward_params,
        tuple(forward_lines),
        tuple(setup_lines),
        tuple(backward),
        tuple(jvp),
        vmap_params,
    )


def _unpack(names: list[str]) -> str:
    """Assignment targets as black writes them: a lone target is parenthesized, `(x,) = ...`."""
    return f"({names[0]},)" if len(names) == 1 else ", ".join(names)


def _backward_lines(
    op: OpSpec,
    uses: _Uses,
    unpack: list[str],
    siblings: Mapping[str, str],
    lists: tuple[int, ...],
    list_returns: bool,
) -> list[str]:
    if not op.grads:
        return ["raise RuntimeError(_NO_GRAD)"]
    args = op.args
    lines = list(unpack)
    if list_returns:
        lines.append("grads = _nest(_RETURNS, grads)")
    if any("grad" in _names(f.expression) for f in op.grads):
        lines.append("grad = grads[0]")
    if lists:
        lines.append("_needs = _unflatten(_LISTS, ctx._counts, ctx.needs_input_grad[1:])")
    else:
        lines.append("_needs = ctx.needs_input_grad")
    scalars = [a.name for a in args if not a.is_tensor_list]
    if scalars:
        lines.append(" = ".join(f"_grad_{name}" for name in scalars) + " = None")
    for index in lists:
        name = args[index].name
        lines.append(f"_grad_{name} = [None] * len(_needs[{index}])")
    index_of = {a.name: i for i, a in enumerate(args)}
    rewrite = _Rewrite(op, set(uses.meta), siblings)
    for formula in op.grads:
        code = unparse(
            rewrite.visit(ast.parse(formula.expression, mode="eval")), formula.expression
        )
        flags = [
            (
                f"any(_needs[{index_of[n]}])"
                if args[index_of[n]].is_tensor_list
                else f"_needs[{index_of[n]}]"
            )
            for n in formula.inputs
        ]
        condition = flags[0] if len(flags) == 1 else f"any(({', '.join(flags)}))"
        targets = ", ".join(f"_grad_{name}" for name in formula.inputs)
        lines.append(f"if {condition}:")
        lines.append(f"    {targets} = {code}")
    grads = ", ".join(f"_grad_{a.name}" for a in args)
    if lists:
        lines.append(
            f"return (None, *_flatten(_LISTS, ({grads}{',' if len(args) == 1 else ''}))[1:])"
        )
    else:
        lines.append(f"return ({grads},)" if len(args) == 1 else f"return {grads}")
    return lines


def _jvp_lines(
    op: OpSpec,
    uses: _Uses,
    unpack: list[str],
    siblings: Mapping[str, str],
    lists: tuple[int, ...],
) -> list[str]:
    if not op.jvp.present:
        return ["raise RuntimeError(_NO_JVP)"]
    args = op.args
    tangents = tangent_names(args)
    lines: list[str] = []
    if lists:
        source = "_tangents"
        lines.append("_tangents = _unflatten(_LISTS, ctx._counts, tangents[1:])")
    else:
        source = "tangents"
    if op.jvp.auto == "auto_linear":
        values = []
        for index, arg in enumerate(args):
            if arg.differentiable:
                value = f"{source}[{index}]"
            else:
                value = f"ctx._{arg.name}"
            values.append(f"{arg.name}={value}" if arg.kwarg_only else value)
        lines.append(f"return {sibling_call(op, op.name, siblings)}({', '.join(values)})")
        return lines
    lines.extend(unpack)
    for index, arg in enumerate(args):
        if tangents.get(arg.name) in uses.tangents:
            lines.append(f"{tangents[arg.name]} = {source}[{index}]")
    rewrite = _Rewrite(op, set(uses.meta), siblings)

    def code(text: str) -> str:
        return unparse(rewrite.visit(ast.parse(text, mode="eval")), text)

    if op.jvp.auto == "auto_element_wise":
        # Missing tangents of tensors arrive as zeros; an omitted optional tensor's is None.
        optional = {a.name for a in args if a.type == "Tensor?"}
        terms = _element_wise_jvp(op)
        wrap = (lambda text: f"({text})") if len(terms) > 1 else (lambda text: text)
        required = [wrap(code(text)) for name, text in terms if name not in optional]
        rest = [(name, wrap(code(text))) for name, text in terms if name in optional]
        if not rest:
            lines.append(f"return {' + '.join(required)}")
            return lines
        lines.append(f"_result = {' + '.join(required) if required else None}")
        for name, term in rest:
            lines.append(f"if {tangents[name]} is not None:")
            lines.append(f"    _result = {term} if _result is None else _result + {term}")
        lines.append("return _result")
        return lines
    results = [code(text) for text in op.jvp.result]
    lines.append(f"return {results[0] if len(results) == 1 else '(' + ', '.join(results) + ')'}")
    return lines


def _names(text: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}


def _span(start: str, end: str) -> str:
    """`start:end` as black spaces a slice: around the colon unless both bounds are plain numbers."""
    return f"{start}:{end}" if start.isdigit() and end.isdigit() else f"{start} : {end}"


def _plus(offset: str, amount: int | str) -> str:
    if offset == "0":
        return str(amount)
    if isinstance(amount, int) and offset.isdigit():
        return str(int(offset) + amount)
    return f"{offset} + {amount}"
