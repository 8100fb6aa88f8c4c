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

Note [Function local names]
Formulas name arguments, the incoming gradients, the outputs (Note [Formula
names], spec/formulas.py) and the tangents (Note [Tangent names]) as the spec
writes them. Inside the Function's methods each of them gets a local name
that shadows nothing the generated lines use (`ctx`, `inputs`, `torch`,
`len`, the module's helpers named by `op.names`, the sibling modules): an
argument keeps its name unless it would, then it takes `_` suffixes (Note
[Generated names] in api/names.py). The generated locals (`_saved`, `_needs`,
`_grad_x`, ...) and the ctx attributes are picked the same way.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..spec.formulas import EXPR_GLOBALS, FormulaNames, formula_names
from ..spec.model import OpSpec
from ..spec.tangents import tangent_names
from .names import Namer
from .pyexpr import unparse

__all__ = [
    "FunctionPlan",
    "plan_function",
    "METADATA_ATTRS",
    "FUNCTION_GLOBALS",
    "list_positions",
    "sibling_call",
]

METADATA_ATTRS = ("shape", "dtype", "device", "ndim")

# the module-level helpers the Function's methods call, by role (`op.names`)
FUNCTION_GLOBALS = (
    "below_autograd call flatten unflatten nest no_gradient LISTS RETURNS RETURN_LISTS NO_GRAD "
    "NO_JVP".split()
)
# names the generated method lines use themselves besides the module's helpers
_GENERATED = ("ctx", "inputs", "output", "grads", "tangents", "info", "in_dims")
_GENERATED_BUILTINS = ("any", "len", "list", "tuple")
# attributes torch's autograd ctx has already: a saved value must not land on one
_CTX_ATTRIBUTES = frozenset(
    "saved_tensors saved_variables needs_input_grad next_functions metadata name materialize_grads "
    "to_save dirty_tensors non_differentiable _raw_saved_tensors _forward_cls _compiled_autograd_key "
    "_sequence_nr _input_metadata _register_hook_dict register_hook register_prehook "
    "save_for_backward save_for_forward mark_dirty mark_non_differentiable set_materialize_grads "
    "saved_for_forward".split()
)


@dataclass(frozen=True)
class FunctionPlan:
    """The bodies of the op's autograd.Function, as lines without the method's indentation."""

    forward_params: str
    forward_lines: tuple[str, ...]
    setup_lines: tuple[str, ...]
    backward_params: str
    backward_lines: tuple[str, ...]
    jvp_params: str
    jvp_lines: tuple[str, ...]
    vmap_params: str
    locals: Mapping[str, str] = field(default_factory=dict)  # argument -> its local name
    vmap_lines: tuple[str, ...] = field(default=())


def list_positions(op: OpSpec) -> tuple[int, ...]:
    """The positions of the op's Tensor[] arguments (Note [Tensor-list gradients])."""
    return tuple(i for i, a in enumerate(op.args) if a.is_tensor_list)


def sibling_call(op: OpSpec, name: str, siblings: Mapping[str, str], torch: str = "torch") -> str:
    """How a formula of `op` calls the op `name` of the library: through its typed wrapper."""
    if name == op.name and op.module == siblings.get(name):
        return name
    module = siblings.get(name)
    if module is None:  # overloads share the name: the packet picks one by the arguments
        return f"{torch}.ops.{op.namespace}.{name}"
    return f"_op_{module}.{name}"


def _default_globals() -> dict[str, str]:
    return {role: f"_{role}" for role in FUNCTION_GLOBALS}


class _Rewrite(ast.NodeTransformer):
    """Formula names to generated names: metadata reads become locals, ops their wrappers."""

    def __init__(self, plan: _Plan, metadata_only: set[str]):
        self.plan = plan
        self.metadata_only = metadata_only

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in self.metadata_only:
            local = self.plan.meta_local(node.value.id, node.attr)
            return ast.copy_location(ast.Name(local, ast.Load()), node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        plan = self.plan
        if node.id in plan.local:
            return ast.copy_location(ast.Name(plan.local[node.id], ast.Load()), node)
        if node.id in plan.ops:
            target = sibling_call(plan.op, node.id, plan.siblings)
            return ast.copy_location(ast.parse(target, mode="eval").body, node)
        return node


@dataclass
class _Uses:
    """What one side (backward or jvp) reads: inputs in full, metadata attributes, results."""

    full: set[str] = field(default_factory=set)
    meta: dict[str, set[str]] = field(default_factory=dict)
    results: set[str] = field(default_factory=set)
    tangents: set[str] = field(default_factory=set)


def _uses(op: OpSpec, formula: FormulaNames, expressions: Iterable[str]) -> _Uses:
    tensors = {a.name for a in op.args if a.family == "Tensor"}
    inputs = {a.name for a in op.args}
    tangents = {t: a for a, t in tangent_names(op.args).items()}
    results = {*formula.results, *([formula.result] if formula.result else [])}
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
            elif node.id in results:
                uses.results.add(node.id)
    for name in uses.full:
        uses.meta.pop(name, None)
    return uses


class _GradToTangent(ast.NodeTransformer):
    """A [grad] formula read as a forward-mode one: the incoming gradient becomes `tangent`."""

    def __init__(self, formula: FormulaNames, tangent: str):
        self.formula = formula
        self.tangent = tangent

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == self.formula.grad:
            return ast.copy_location(ast.Name(self.tangent, ast.Load()), node)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == self.formula.grads:
            return ast.copy_location(ast.Name(self.tangent, ast.Load()), node)
        return self.generic_visit(node)


def _element_wise_jvp(op: OpSpec) -> list[tuple[str, str]]:
    """auto_element_wise: each [grad] formula with the incoming gradient replaced by its input's tangent."""
    names = tangent_names(op.args)
    formula = formula_names(op.args, op.returns)
    terms = []
    for grad in op.grads:
        (name,) = grad.inputs
        tree = _GradToTangent(formula, names[name]).visit(ast.parse(grad.expression, mode="eval"))
        terms.append((name, unparse(tree, grad.expression)))
    return terms


def _jvp_expressions(op: OpSpec) -> list[str]:
    if op.jvp.auto == "auto_element_wise":
        return [text for _, text in _element_wise_jvp(op)]
    return list(op.jvp.result)


def _names(text: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}


class _Plan:
    """The names of one Function (Note [Function local names]) and its setup_context saves."""

    def __init__(
        self,
        op: OpSpec,
        siblings: Mapping[str, str],
        helpers: Mapping[str, str],
        reserved: Iterable[str],
    ):
        self.op = op
        self.siblings = siblings
        self.g = helpers
        self.formula = formula_names(op.args, op.returns)
        texts = [f.expression for f in op.grads] + _jvp_expressions(op)
        used = set().union(*(_names(t) for t in texts)) if texts else set()
        tangents = tangent_names(op.args)
        entities = {a.name for a in op.args} | set(tangents.values())
        entities |= {self.formula.grads, *self.formula.results}
        entities |= {n for n in (self.formula.grad, self.formula.result) if n}
        known = entities | set(EXPR_GLOBALS)
        self.ops = {n for n in used if n not in known}
        if op.jvp.auto == "auto_linear":
            self.ops.add(op.name)
        calls = {sibling_call(op, n, siblings) for n in self.ops}
        reserved = {
            *_GENERATED,
            *_GENERATED_BUILTINS,
            *EXPR_GLOBALS,
            *helpers.values(),
            *reserved,
            *(c.split(".")[0] for c in calls),
        }
        self.namer = Namer(reserved)
        self.local: dict[str, str] = {a.name: self.namer(a.name) for a in op.args}
        for tangent in tangents.values():
            self.local[tangent] = self.namer(tangent)
        for name in (self.formula.grad, self.formula.result, *self.formula.results):
            if name is not None and name not in self.local:
                self.local[name] = self.namer(name)
        # the incoming gradients arrive as `grads`, renamed like the others
        self.grads = self.namer(self.formula.grads) if self.formula.grads != "grads" else "grads"
        self.local[self.formula.grads] = self.grads
        self.saved = self.namer("_saved")
        self.needs = self.namer("_needs")
        self.output = self.namer("_output")
        self.tangents = self.namer("_tangents")
        self.result = self.namer("_result")
        self.accumulators = {a.name: self.namer(f"_grad_{self.local[a.name]}") for a in op.args}
        self._meta: dict[tuple[str, str], str] = {}
        self.attributes = Namer(_CTX_ATTRIBUTES)
        self._attrs: dict[str, str] = {}
        self.setup: list[str] = []
        self.on_ctx: set[str] = set()

    def meta_local(self, arg: str, attr: str) -> str:
        key = (arg, attr)
        if key not in self._meta:
            self._meta[key] = self.namer(f"_{self.local[arg]}_{attr}")
        return self._meta[key]

    def attribute(self, key: str) -> str:
        """The ctx attribute that holds `key` (`_x`, `_x_count`, `_counts`...)."""
        if key not in self._attrs:
            self._attrs[key] = self.attributes(key)
        return f"ctx.{self._attrs[key]}"

    def ctx_value(self, key: str, value: str) -> str:
        """Put `value` on ctx once; returns the ctx attribute."""
        attr = self.attribute(key)
        if key not in self.on_ctx:
            self.on_ctx.add(key)
            self.setup.append(f"{attr} = {value}")
        return attr

    def side(self, uses: _Uses, save: str) -> list[str]:
        """Save what one side reads (`save_for_backward` or `save_for_forward`); its unpacking lines."""
        saved: list[str] = []
        unpack: list[str] = []
        offset = "0"
        for arg in self.op.args:
            here = self.local[arg.name]
            if arg.name in uses.full:
                if arg.is_tensor:
                    saved.append(here)
                    unpack.append(f"{here} = {self.saved}[{offset}]")
                    offset = _plus(offset, 1)
                elif arg.is_tensor_list:
                    count = self.ctx_value(f"_{arg.name}_count", f"len({here})")
                    saved.append(f"*{here}")
                    end = _plus(offset, count)
                    unpack.append(f"{here} = list({self.saved}[{_span(offset, end)}])")
                    offset = end
                else:
                    unpack.append(f"{here} = {self.ctx_value(f'_{arg.name}', here)}")
            for attr in sorted(uses.meta.get(arg.name, ())):
                value = self.ctx_value(f"_{arg.name}_{attr}", f"{here}.{attr}")
                unpack.append(f"{self.meta_local(arg.name, attr)} = {value}")
        for name in sorted(uses.results):
            if name == self.formula.result or len(self.op.returns) == 1:
                source = self.output
            else:
                source = f"{self.output}[{self.formula.results.index(name)}]"
            saved.append(source)
            unpack.append(f"{self.local[name]} = {self.saved}[{offset}]")
            offset = _plus(offset, 1)
        if saved:
            self.setup.append(f"ctx.{save}({', '.join(saved)})")
            unpack.insert(0, f"{self.saved} = ctx.saved_tensors")
        return unpack

    def code(self, text: str, metadata_only: set[str]) -> str:
        return unparse(_Rewrite(self, metadata_only).visit(ast.parse(text, mode="eval")), text)


def plan_function(
    op: OpSpec,
    siblings: Mapping[str, str],
    helpers: Mapping[str, str] | None = None,
    reserved: Iterable[str] = (),
) -> FunctionPlan:
    """The Function of an op with formulas, or of one that refuses (Note [One autograd.Function per op]).

    `helpers` maps the roles of FUNCTION_GLOBALS to the module's names for them (`op.names`);
    no local takes a name of `reserved` (the module's other globals).
    """
    g = dict(helpers) if helpers is not None else _default_globals()
    plan = _Plan(op, siblings, g, reserved)
    args = op.args
    lists = list_positions(op)
    names = [plan.local[a.name] for a in args]
    list_returns = any(r.family == "Tensor[]" for r in op.returns)
    bwd = _uses(op, plan.formula, (f.expression for f in op.grads))
    fwd = _uses(op, plan.formula, _jvp_expressions(op)) if op.jvp.auto != "auto_linear" else _Uses()
    if op.jvp.auto == "auto_linear":
        fwd.full = {a.name for a in args if not a.differentiable}

    counts, flat = plan.namer("_counts"), plan.namer("_flat")
    call = ", ".join(
        f"{a.name}={plan.local[a.name]}" if a.kwarg_only else plan.local[a.name] for a in args
    )
    if lists:
        forward_params = f"{counts}, *{flat}"
        forward_lines = [f"{_unpack(names)} = {g['unflatten']}({g['LISTS']}, {counts}, {flat})"]
    else:
        forward_params = ", ".join(names)
        forward_lines = []
    result = f"{g['below_autograd']}({g['call']}, {call})"
    if not list_returns:
        forward_lines.append(f"return {result}")
    elif len(op.returns) == 1:
        forward_lines.append(f"return tuple({result})")
    else:
        forward_lines.append(f"return {g['flatten']}({g['RETURN_LISTS']}, {result})[1:]")

    needed = bwd.full | set(bwd.meta) | fwd.full | set(fwd.meta)
    if lists:
        plan.setup.append(
            f"{_unpack(names)} = {g['unflatten']}({g['LISTS']}, inputs[0], inputs[1:])"
        )
        plan.ctx_value("_counts", "inputs[0]")
    elif needed & {a.name for a in args}:
        plan.setup.append(f"{_unpack(names)} = inputs")
    if list_returns and (bwd.results or fwd.results):
        plan.setup.append(f"{plan.output} = {g['nest']}({g['RETURNS']}, output)")
    elif not list_returns:
        plan.output = "output"  # setup_context's own parameter: no argument takes its name
    backward_unpack = plan.side(bwd, "save_for_backward") if op.grads else []
    jvp_unpack = plan.side(fwd, "save_for_forward") if op.jvp.present else []
    setup_lines = plan.setup or ["pass"]

    backward = _backward_lines(plan, bwd, backward_unpack, lists, list_returns)
    jvp = _jvp_lines(plan, fwd, jvp_unpack, lists)
    vmap_params = "info, in_dims, " + (f"{counts}, *{flat}" if lists else ", ".join(names))
    return FunctionPlan(
        forward_params,
        tuple(forward_lines),
        tuple(setup_lines),
        f"ctx, *{plan.grads}",
        tuple(backward),
        "ctx, *tangents",
        tuple(jvp),
        vmap_params,
        dict(plan.local),
    )


def _unpack(names: list[str]) -> str:
    """Assignment targets as black writes them: a lone target is parenthesized, `(x,) = ...`."""
    return f"({names[0]},)" if len(names) == 1 else ", ".join(names)


def _backward_lines(
    plan: _Plan,
    uses: _Uses,
    unpack: list[str],
    lists: tuple[int, ...],
    list_returns: bool,
) -> list[str]:
    op, g = plan.op, plan.g
    if not op.grads:
        return [f"{g['no_gradient']}({g['NO_GRAD']})"]
    args = op.args
    grads, needs = plan.grads, plan.needs
    lines = list(unpack)
    if list_returns:
        lines.append(f"{grads} = {g['nest']}({g['RETURNS']}, {grads})")
    grad = plan.formula.grad
    if grad is not None and any(grad in _names(f.expression) for f in op.grads):
        lines.append(f"{plan.local[grad]} = {grads}[0]")
    if lists:
        counts = plan.attribute("_counts")
        lines.append(
            f"{needs} = {g['unflatten']}({g['LISTS']}, {counts}, ctx.needs_input_grad[1:])"
        )
    else:
        lines.append(f"{needs} = ctx.needs_input_grad")
    acc = plan.accumulators
    scalars = [acc[a.name] for a in args if not a.is_tensor_list]
    if scalars:
        lines.append(" = ".join(scalars) + " = None")
    for index in lists:
        lines.append(f"{acc[args[index].name]} = [None] * len({needs}[{index}])")
    index_of = {a.name: i for i, a in enumerate(args)}
    for formula in op.grads:
        code = plan.code(formula.expression, set(uses.meta))
        flags = [
            (
                f"any({needs}[{index_of[n]}])"
                if args[index_of[n]].is_tensor_list
                else f"{needs}[{index_of[n]}]"
            )
            for n in formula.inputs
        ]
        condition = flags[0] if len(flags) == 1 else f"any(({', '.join(flags)}))"
        targets = ", ".join(acc[name] for name in formula.inputs)
        lines.append(f"if {condition}:")
        lines.append(f"    {targets} = {code}")
    returned = ", ".join(acc[a.name] for a in args)
    if lists:
        lines.append(
            f"return (None, *{g['flatten']}({g['LISTS']}, ({returned}{',' if len(args) == 1 else ''}))[1:])"
        )
    else:
        lines.append(f"return ({returned},)" if len(args) == 1 else f"return {returned}")
    return lines


def _jvp_lines(plan: _Plan, uses: _Uses, unpack: list[str], lists: tuple[int, ...]) -> list[str]:
    op, g = plan.op, plan.g
    if not op.jvp.present:
        return [f"{g['no_gradient']}({g['NO_JVP']})"]
    args = op.args
    tangents = tangent_names(args)
    lines: list[str] = []
    if lists:
        source = plan.tangents
        counts = plan.attribute("_counts")
        lines.append(f"{source} = {g['unflatten']}({g['LISTS']}, {counts}, tangents[1:])")
    else:
        source = "tangents"
    if op.jvp.auto == "auto_linear":
        values = []
        for index, arg in enumerate(args):
            if arg.differentiable:
                value = f"{source}[{index}]"
            else:
                value = plan.attribute(f"_{arg.name}")
            values.append(f"{arg.name}={value}" if arg.kwarg_only else value)
        lines.append(f"return {sibling_call(op, op.name, plan.siblings)}({', '.join(values)})")
        return lines
    lines.extend(unpack)
    for index, arg in enumerate(args):
        if tangents.get(arg.name) in uses.tangents:
            lines.append(f"{plan.local[tangents[arg.name]]} = {source}[{index}]")
    meta = set(uses.meta)

    if op.jvp.auto == "auto_element_wise":
        # Missing tangents of tensors arrive as zeros; an omitted optional tensor's is None.
        optional = {a.name for a in args if a.family == "Tensor?"}
        terms = _element_wise_jvp(op)
        wrap = (lambda text: f"({text})") if len(terms) > 1 else (lambda text: text)
        required = [wrap(plan.code(text, meta)) for name, text in terms if name not in optional]
        rest = [(name, wrap(plan.code(text, meta))) for name, text in terms if name in optional]
        if not rest:
            lines.append(f"return {' + '.join(required)}")
            return lines
        result = plan.result
        lines.append(f"{result} = {' + '.join(required) if required else None}")
        for name, term in rest:
            lines.append(f"if {plan.local[tangents[name]]} is not None:")
            lines.append(f"    {result} = {term} if {result} is None else {result} + {term}")
        lines.append(f"return {result}")
        return lines
    results = [plan.code(text, meta) for text in op.jvp.result]
    lines.append(f"return {results[0] if len(results) == 1 else '(' + ', '.join(results) + ')'}")
    return lines


def _span(start: str, end: str) -> str:
    """`start:end` as black spaces a slice: around the colon unless both bounds are plain numbers."""
    return f"{start}:{end}" if start.isdigit() and end.isdigit() else f"{start} : {end}"


def _plus(offset: str, amount: int | str) -> str:
    if offset == "0":
        return str(amount)
    if isinstance(amount, int) and offset.isdigit():
        return str(int(offset) + amount)
    return f"{offset} + {amount}"
