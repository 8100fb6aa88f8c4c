"""Plan `setup_context` and `backward` from the spec's gradient formulas.

Note [Saving only what formulas use]
A formula that reads only `x.shape` (or dtype, device, ndim) makes opgen save
that attribute on ctx instead of the tensor, so the tensor's memory can be
freed after forward. Inputs no formula reads are not saved at all. The
rewrite happens on the formula's AST, so the generated backward reads like
hand-written code.

Formulas name arguments, the incoming gradients and the outputs as Note
[Formula names] (spec/formulas.py) says. Inside the generated functions each
of them gets a local name that shadows nothing the generated lines use
(`ctx`, `inputs`, `len`, `torch`...): an argument keeps its name unless it
would, then it takes `_` suffixes (Note [Generated names] in api/names.py).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..spec.expr import names_used
from ..spec.formulas import EXPR_GLOBALS, formula_names
from ..spec.model import OpSpec
from .literals import literal
from .names import Namer
from .pyexpr import unparse

__all__ = ["AutogradPlan", "plan_autograd", "METADATA_ATTRS"]

METADATA_ATTRS = ("shape", "dtype", "device", "ndim")

# names the generated setup_context and backward lines use themselves
_GENERATED = ("ctx", "inputs", "output", "keyword_only_inputs", "_saved", "_needs")
_GENERATED_BUILTINS = ("any", "len", "list")
# attributes torch's autograd ctx has already: an argument's saved value must not land on one
_CTX_ATTRIBUTES = frozenset(
    "saved_tensors saved_variables needs_input_grad next_functions metadata name materialize_grads "
    "to_save dirty_tensors non_differentiable _raw_saved_tensors _forward_cls _compiled_autograd_key "
    "_sequence_nr _input_metadata _register_hook_dict register_hook register_prehook".split()
)


@dataclass(frozen=True)
class AutogradPlan:
    setup_params: str
    setup_lines: tuple[str, ...]
    backward_params: str
    backward_lines: tuple[str, ...]


@dataclass(frozen=True)
class _Names:
    """Formula name -> local name in the generated functions, and the ctx attributes used."""

    local: dict[str, str]
    meta: dict[tuple[str, str], str]  # (argument, attribute) -> local holding it
    ctx: dict[str, str]  # key -> ctx attribute name
    grads: str
    accumulators: dict[str, str]  # argument -> local holding its gradient


class _Rewrite(ast.NodeTransformer):
    def __init__(self, op: OpSpec, names: _Names, metadata_only: set[str], ops: set[str]):
        self.op = op
        self.names = names
        self.metadata_only = metadata_only
        self.ops = ops

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in self.metadata_only:
            local = self.names.meta[(node.value.id, node.attr)]
            return ast.copy_location(ast.Name(local, ast.Load()), node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.names.local:
            return ast.copy_location(ast.Name(self.names.local[node.id], ast.Load()), node)
        if node.id in self.ops:
            # another op of the same library
            call = ast.parse(f"torch.ops.{self.op.namespace}.{node.id}", mode="eval").body
            return ast.copy_location(call, node)
        return node


def _trees(op: OpSpec) -> list[ast.Expression]:
    return [ast.parse(f.expression, mode="eval") for f in op.grads]


def _uses(op: OpSpec, trees: list[ast.Expression]) -> tuple[set[str], dict[str, set[str]]]:
    """(inputs used whole, metadata attributes per input used only for them)."""
    tensors = {a.name for a in op.args if a.family == "Tensor"}
    inputs = {a.name for a in op.args}
    full: set[str] = set()
    meta: dict[str, set[str]] = {}
    for tree in trees:
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
            if isinstance(node, ast.Name) and node.id in inputs and id(node) not in meta_nodes:
                full.add(node.id)
    for name in full:
        meta.pop(name, None)
    return full, meta


def _allocate(
    op: OpSpec, used: set[str], meta: dict[str, set[str]], ops: set[str]
) -> tuple[_Names, str | None, list[str]]:
    """Local names for everything; returns (names, incoming-grad local or None, result locals used)."""
    formula = formula_names(op.args, op.returns)
    entities = {a.name for a in op.args} | {formula.grads, *formula.results}
    entities |= {n for n in (formula.grad, formula.result) if n}
    globals_used = (used - entities) | ({"torch"} if used & ops else set())
    namer = Namer({*_GENERATED, *_GENERATED_BUILTINS, *globals_used})
    local = {a.name: namer(a.name) for a in op.args}
    grads = namer("grads")
    local[formula.grads] = grads
    grad = None
    if formula.grad is not None and formula.grad in used:
        grad = local[formula.grad] = namer("grad")
    results = []
    result_names = list(formula.results)
    if formula.result is not None:
        result_names.append(formula.result)
    for name in result_names:
        if name in used:
            local[name] = namer(name)
            results.append(name)
    meta_locals = {
        (arg, attr): namer(f"_{local[arg]}_{attr}") for arg in meta for attr in sorted(meta[arg])
    }
    accumulators = {a.name: namer(f"_grad_{local[a.name]}") for a in op.args}
    attributes = Namer(_CTX_ATTRIBUTES)
    ctx = {}
    for arg in op.args:
        ctx[arg.name] = attributes(f"_{arg.name}")
        ctx[f"{arg.name}.count"] = attributes(f"_{arg.name}_count")
        for attr in sorted(meta.get(arg.name, ())):
            ctx[f"{arg.name}.{attr}"] = attributes(f"_{arg.name}_{attr}")
    return _Names(local, meta_locals, ctx, grads, accumulators), grad, results


def plan_autograd(op: OpSpec) -> AutogradPlan:
    trees = _trees(op)
    full, meta = _uses(op, trees)
    used = set().union(*(names_used(t) for t in trees)) if trees else set()
    inputs = {a.name for a in op.args}
    ops = {n for n in used if n not in inputs} - _known_globals(op)
    names, grad, results = _allocate(op, used, meta, ops)
    local, ctx = names.local, names.ctx
    args = op.args
    formula = formula_names(op.args, op.returns)
    saved: list[str] = []  # expressions passed to save_for_backward, in order
    unpack: list[str] = []  # backward lines that restore saved values
    offset = "0"
    setup: list[str] = []
    needed = sorted(full | set(meta), key=[a.name for a in args].index)
    # Note [Tensor-list gradients]: backward must return a list per Tensor[]
    # input (torch checks the structure), so every list input's length is kept.
    lists = [a.name for a in args if a.is_tensor_list]
    positional = [local[a.name] for a in args if not a.kwarg_only]
    if (needed or lists) and positional:
        targets = f"({positional[0]},)" if len(positional) == 1 else ", ".join(positional)
        setup.append(f"{targets} = inputs")
    for name in lists:
        setup.append(f"ctx.{ctx[name + '.count']} = len({local[name]})")
    for arg in args:
        if arg.kwarg_only and arg.name in needed:
            setup.append(f"{local[arg.name]} = keyword_only_inputs[{literal(arg.name)}]")
    for arg in args:
        here = local[arg.name]
        if arg.name in full:
            if arg.is_tensor:
                saved.append(here)
                unpack.append(f"{here} = _saved[{offset}]")
                offset = _plus(offset, 1)
            elif arg.is_tensor_list:
                saved.append(f"*{here}")
                end = _plus(offset, f"ctx.{ctx[arg.name + '.count']}")
                unpack.append(f"{here} = list(_saved[{_span(offset, end)}])")
                offset = end
            else:
                setup.append(f"ctx.{ctx[arg.name]} = {here}")
                unpack.append(f"{here} = ctx.{ctx[arg.name]}")
        for attr in sorted(meta.get(arg.name, ())):
            attribute = ctx[f"{arg.name}.{attr}"]
            setup.append(f"ctx.{attribute} = {here}.{attr}")
            unpack.append(f"{names.meta[(arg.name, attr)]} = ctx.{attribute}")
    for name in results:
        source = "output" if name == formula.result or len(op.returns) == 1 else None
        if source is None:
            source = f"output[{formula.results.index(name)}]"
        saved.append(source)
        unpack.append(f"{local[name]} = _saved[{offset}]")
        offset = _plus(offset, 1)
    if saved:
        setup.append(f"ctx.save_for_backward({', '.join(saved)})")
        unpack.insert(0, "_saved = ctx.saved_tensors")
    if not setup:
        setup.append("pass")

    backward: list[str] = list(unpack)
    if grad is not None:
        backward.append(f"{grad} = {names.grads}[0]")
    index = {a.name: i for i, a in enumerate(args)}
    # The dispatcher drops trailing arguments left at their defaults, so
    # needs_input_grad can be shorter than the schema: pad it.
    backward.append(f"_needs = (*ctx.needs_input_grad, *(False,) * {len(args)})")
    accumulators = names.accumulators
    scalars = [accumulators[a.name] for a in args if not a.is_tensor_list]
    if scalars:
        backward.append(" = ".join(scalars) + " = None")
    for name in lists:
        backward.append(f"{accumulators[name]} = [None] * ctx.{ctx[name + '.count']}")
    rewrite = _Rewrite(op, names, set(meta), ops)
    for f, tree in zip(op.grads, trees, strict=True):
        code = unparse(rewrite.visit(tree), f.expression)
        flags = [
            f"any(_needs[{index[name]}])" if name in lists else f"_needs[{index[name]}]"
            for name in f.inputs
        ]
        condition = flags[0] if len(flags) == 1 else f"any(({', '.join(flags)}))"
        targets = ", ".join(accumulators[name] for name in f.inputs)
        backward.append(f"if {condition}:")
        backward.append(f"    {targets} = {code}")
    returns = ", ".join(accumulators[a.name] for a in args)
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
    return AutogradPlan(params, tuple(setup), f"ctx, *{names.grads}", tuple(backward))


def _known_globals(op: OpSpec) -> set[str]:
    """Names a formula may use that are not another op of the library (spec/formulas.py)."""
    formula = formula_names(op.args, op.returns)
    names = {a.name for a in op.args} | set(EXPR_GLOBALS) | {formula.grads, *formula.results}
    return names | {n for n in (formula.grad, formula.result) if n}


def _span(start: str, end: str) -> str:
    """`start:end` as black spaces a slice: around the colon unless both bounds are plain numbers."""
    return f"{start}:{end}" if start.isdigit() and end.isdigit() else f"{start} : {end}"


def _plus(offset: str, amount: int | str) -> str:
    if offset == "0":
        return str(amount)
    if isinstance(amount, int) and offset.isdigit():
        return str(int(offset) + amount)
    return f"{offset} + {amount}"
