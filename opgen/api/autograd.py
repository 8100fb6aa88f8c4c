"""Plan the op's autograd.Function: `forward`, `setup_context`, `backward` and `jvp`, from the
spec's formulas, as a careful engineer writes them (Note [One autograd.Function per op]).

Note [Saving only what formulas use]
A formula that reads only `x.shape` (or dtype, device, ndim) makes opgen keep
that attribute on ctx instead of the tensor, so the tensor's memory can be
freed after forward; inputs no formula reads are not saved at all. Tensors the
[grad] formulas read go to `save_for_backward`, each only when
`ctx.needs_input_grad` asks for a gradient whose formula reads it; those the
[jvp] formulas read go to `save_for_forward`. Other values the formulas read
(non-tensor arguments, metadata) become ctx attributes named after them. The
rewrite happens on the formula's AST, so the generated code reads like
hand-written code.

Note [Tensor-list gradients]
An autograd.Function tracks only the tensors it receives as arguments, so an
op with Tensor[] arguments hands its Function the lists' lengths first and then
every argument with the lists spliced in (the package's `_autograd.py`);
setup_context, backward and jvp rebuild the op's arguments (`unflatten`), and
backward returns one gradient per received tensor. A Tensor[] return is
spliced the same way and rebuilt by `nest`. Tensor[] arguments are saved
whole, whatever needs_input_grad says.

Note [Function local names]
Formulas name arguments, the incoming gradients, the outputs (Note [Formula
names], spec/formulas.py) and the tangents (Note [Tangent names]) as the spec
writes them. Inside the Function's methods each of them gets a local name
that shadows nothing the generated lines use (`ctx`, `inputs`, `torch`,
`len`, the module-level names of the op's module, the sibling modules): an
argument keeps its name unless it would, then it takes `_` suffixes (Note
[Generated names] in api/names.py). The ctx attributes are picked the same
way among the attributes torch's ctx already has.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..spec.formulas import EXPR_GLOBALS, FormulaNames, formula_names
from ..spec.model import OpSpec
from ..spec.tangents import tangent_names
from .decisions import decisions
from .layout import wrapped
from .literals import literal
from .names import Namer
from .pyexpr import unparse

__all__ = [
    "FunctionPlan",
    "FunctionNames",
    "plan_function",
    "METADATA_ATTRS",
    "list_positions",
    "sibling_call",
]

METADATA_ATTRS = ("shape", "dtype", "device", "ndim")

# names the generated method lines use themselves
_GENERATED = ("ctx", "inputs", "output", "info", "in_dims", "counts", "flat", "saved", "needs")
_GENERATED_BUILTINS = ("any", "len", "list", "tuple", "RuntimeError")
# attributes torch's autograd ctx has already: a value kept on ctx must not land on one
_CTX_ATTRIBUTES = frozenset(
    "saved_tensors saved_variables needs_input_grad next_functions metadata name materialize_grads "
    "to_save dirty_tensors non_differentiable _raw_saved_tensors _forward_cls _compiled_autograd_key "
    "_sequence_nr _input_metadata _register_hook_dict register_hook register_prehook "
    "save_for_backward save_for_forward mark_dirty mark_non_differentiable set_materialize_grads "
    "saved_for_forward apply vjp jvp backward forward set_materialize_grads".split()
)


@dataclass(frozen=True)
class FunctionNames:
    """The module-level names the Function's methods use (Note [Generated names])."""

    op: str = "_op"  # the raw overload
    wrapper: str = ""  # the op's typed wrapper (auto_linear calls it)
    flatten: str = "flatten"
    unflatten: str = "unflatten"
    nest: str = "nest"
    error: str = "RuntimeError"  # an alias of the builtin where the op's wrapper takes its name
    reserved: tuple[str, ...] = ()  # the module's other globals


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
    locals: Mapping[str, str] = field(default_factory=dict)  # argument -> its local name
    vmap_params: str = ""
    vmap_unpack: tuple[str, ...] = ()  # Tensor[] ops: rebuild the arguments and their in_dims
    uses_lists: bool = False  # whether the methods splice Tensor[] (the package's `_autograd.py`)


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


class _Rewrite(ast.NodeTransformer):
    """Formula names to generated names: ctx values, locals, and ops as their wrappers."""

    def __init__(self, plan: _Plan, on_ctx: Mapping[str, str]):
        self.plan = plan
        self.on_ctx = on_ctx  # argument -> its ctx attribute (non-tensor values)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and (node.value.id, node.attr) in self.plan.meta:
            attr = self.plan.meta[(node.value.id, node.attr)]
            return ast.copy_location(ast.parse(attr, mode="eval").body, node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        plan = self.plan
        if node.id in self.on_ctx:
            return ast.copy_location(ast.parse(self.on_ctx[node.id], mode="eval").body, node)
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
    """The names of one Function (Note [Function local names]) and what its setup_context keeps."""

    def __init__(self, op: OpSpec, siblings: Mapping[str, str], names: FunctionNames):
        self.op = op
        self.siblings = siblings
        self.g = names
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
            names.op,
            names.wrapper,
            names.flatten,
            names.unflatten,
            names.nest,
            *names.reserved,
            *(c.split(".")[0] for c in calls),
        }
        self.namer = Namer(reserved)
        self.local: dict[str, str] = {a.name: self.namer(a.name) for a in op.args}
        all_tangents = {a.name: tangents.get(a.name, f"{a.name}_t") for a in op.args}
        self.tangent = {a: self.namer(t) for a, t in all_tangents.items()}
        for arg, tangent in tangents.items():
            self.local[tangent] = self.tangent[arg]
        for name in (self.formula.grad, self.formula.result, *self.formula.results):
            if name is not None and name not in self.local:
                self.local[name] = self.namer(name)
        # the incoming gradients arrive as `grads` (several outputs), renamed like the others
        self.grads = self.namer(self.formula.grads) if self.formula.grads != "grads" else "grads"
        self.local[self.formula.grads] = self.grads
        self.accumulators = {a.name: self.namer(f"grad_{self.local[a.name]}") for a in op.args}
        self.result = self.namer("result_t")
        self.attributes = Namer(_CTX_ATTRIBUTES)
        self._attrs: dict[str, str] = {}
        self.meta: dict[tuple[str, str], str] = {}
        self.setup: list[str] = []
        self.on_ctx: set[str] = set()

    def attribute(self, key: str) -> str:
        """The ctx attribute that holds `key` (`x_shape`, `alpha`, `counts`...)."""
        if key not in self._attrs:
            self._attrs[key] = self.attributes(key)
        return f"ctx.{self._attrs[key]}"

    def keep(self, key: str, value: str) -> str:
        """Put `value` on ctx once (in setup_context); returns the ctx attribute."""
        attr = self.attribute(key)
        if key not in self.on_ctx:
            self.on_ctx.add(key)
            self.setup.append(f"{attr} = {value}")
        return attr

    def code(self, text: str, on_ctx: Mapping[str, str]) -> str:
        return unparse(_Rewrite(self, on_ctx).visit(ast.parse(text, mode="eval")), text)


def _needs(positions: Iterable[int], needs: str = "ctx.needs_input_grad") -> str:
    """`ctx.needs_input_grad[i] or ctx.needs_input_grad[j]` for the formula inputs at `positions`."""
    return " or ".join(f"{needs}[{p}]" for p in sorted(set(positions)))


def plan_function(
    op: OpSpec, siblings: Mapping[str, str], names: FunctionNames | None = None
) -> FunctionPlan:
    """The Function of an op with formulas, or of one that refuses (Note [One autograd.Function per op])."""
    names = names or FunctionNames(wrapper=op.name)
    plan = _Plan(op, siblings, names)
    args = op.args
    lists = list_positions(op)
    local = [plan.local[a.name] for a in args]
    list_returns = any(r.family == "Tensor[]" for r in op.returns)
    bwd = _uses(op, plan.formula, (f.expression for f in op.grads))
    if op.jvp.auto == "auto_linear":
        fwd = _Uses(full={a.name for a in args if not a.differentiable})
    else:
        fwd = _uses(op, plan.formula, _jvp_expressions(op))
    lists_literal = literal(lists)

    call = ", ".join(
        f"{a.name}={plan.local[a.name]}" if a.kwarg_only else plan.local[a.name] for a in args
    )
    if lists:
        forward_params = "counts, *flat"
        forward_lines = [f"{_unpack(local)} = {names.unflatten}({lists_literal}, counts, flat)"]
    else:
        forward_params = ", ".join(local)
        forward_lines = []
    result = f"{names.op}({call})"
    if not list_returns:
        forward_lines.append(f"return {result}")
    elif len(op.returns) == 1:
        forward_lines.append(f"return tuple({result})")
    else:
        spliced = literal(tuple(i for i, r in enumerate(op.returns) if r.family == "Tensor[]"))
        forward_lines.append(f"return {names.flatten}({spliced}, {result})[1:]")

    needed = bwd.full | set(bwd.meta) | fwd.full | set(fwd.meta)
    if lists:
        plan.setup.append(
            f"{_unpack(local)} = {names.unflatten}({lists_literal}, inputs[0], inputs[1:])"
        )
        plan.keep("counts", "inputs[0]")
    elif needed & {a.name for a in args}:
        plan.setup.append(f"{_unpack(local)} = inputs")
    returns = literal(tuple(r.family == "Tensor[]" for r in op.returns))
    output = "output"
    if list_returns and (bwd.results or fwd.results):
        output = plan.namer("outputs")
        plan.setup.append(f"{output} = {names.nest}({returns}, output)")

    on_ctx = _keep_values(plan, bwd, fwd)
    backward_unpack = (
        _save(plan, bwd, "save_for_backward", output, conditional=True) if op.grads else []
    )
    jvp_unpack = _save(plan, fwd, "save_for_forward", output) if op.jvp.present else []
    setup_lines = plan.setup or ["pass"]

    backward_params, backward = _backward(
        plan, backward_unpack, on_ctx, lists, list_returns, returns
    )
    jvp_params, jvp = _jvp(plan, fwd, jvp_unpack, on_ctx, lists)
    vmap_unpack: list[str] = []
    if lists:
        vmap_params = "info, in_dims, counts, *flat"
        vmap_unpack = [
            f"{_unpack(local)} = {names.unflatten}({lists_literal}, counts, flat)",
            f"in_dims = {names.unflatten}({lists_literal}, counts, in_dims[1:])",
        ]
    else:
        vmap_params = "info, in_dims, " + ", ".join(local)
    uses_lists = bool(lists) or list_returns
    return FunctionPlan(
        forward_params,
        tuple(forward_lines),
        tuple(setup_lines),
        backward_params,
        tuple(backward),
        jvp_params,
        tuple(jvp),
        dict(plan.local),
        vmap_params,
        tuple(vmap_unpack),
        uses_lists,
    )


def _unpack(names: list[str]) -> str:
    """Assignment targets as black writes them: a lone target is parenthesized, `(x,) = ...`."""
    return f"({names[0]},)" if len(names) == 1 else ", ".join(names)


def _keep_values(plan: _Plan, *sides: _Uses) -> dict[str, str]:
    """Non-tensor arguments and tensor metadata the formulas read, kept on ctx; argument -> attr."""
    on_ctx: dict[str, str] = {}
    for arg in plan.op.args:
        here = plan.local[arg.name]
        if any(arg.name in side.full for side in sides) and not arg.differentiable:
            on_ctx[arg.name] = plan.keep(arg.name, here)
        for attr in sorted(set().union(*(side.meta.get(arg.name, set()) for side in sides))):
            plan.meta[(arg.name, attr)] = plan.keep(f"{here}_{attr}", f"{here}.{attr}")
    return on_ctx


def _formula_positions(op: OpSpec, name: str) -> set[int] | None:
    """The positions of the inputs whose gradient formulas read `name`; None: all of them."""
    index_of = {a.name: i for i, a in enumerate(op.args)}
    readers = [f for f in op.grads if name in _names(f.expression)]
    every = {index_of[n] for f in op.grads for n in f.inputs}
    positions = {index_of[n] for f in readers for n in f.inputs}
    return None if positions == every else positions


def _save(plan: _Plan, uses: _Uses, save: str, output: str, conditional: bool = False) -> list[str]:
    """Save the tensors one side reads (Note [Saving only what formulas use]); its unpacking lines."""
    op = plan.op
    saved: list[str] = []
    targets: list[str] = []
    pieces: list[str] = []  # unpacking of spliced lists: `xs = list(saved[i : j])`
    offset = "0"
    lists = bool(list_positions(op))
    for arg in op.args:
        here = plan.local[arg.name]
        if arg.name not in uses.full or not arg.differentiable:
            continue
        if arg.is_tensor_list:
            count = plan.keep(f"{here}_count", f"len({here})")
            saved.append(f"*{here}")
            end = _plus(offset, count)
            pieces.append(f"{here} = list(saved[{_span(offset, end)}])")
            offset = end
            continue
        positions = _formula_positions(op, arg.name) if conditional and not lists else None
        value = here if positions is None else f"{here} if {_needs(positions)} else None"
        saved.append(value)
        targets.append(here)
        pieces.append(f"{here} = saved[{offset}]")
        offset = _plus(offset, 1)
    for name in sorted(uses.results):
        if name == plan.formula.result or len(op.returns) == 1:
            source = output
        else:
            source = f"{output}[{plan.formula.results.index(name)}]"
        positions = _formula_positions(op, name) if conditional and not lists else None
        saved.append(source if positions is None else f"{source} if {_needs(positions)} else None")
        targets.append(plan.local[name])
        pieces.append(f"{plan.local[name]} = saved[{offset}]")
        offset = _plus(offset, 1)
    if not saved:
        return []
    plan.setup += wrapped(f"ctx.{save}(", saved, ")", _METHOD)
    if any(s.startswith("*") for s in saved):
        return ["saved = ctx.saved_tensors", *pieces]
    return [f"{_unpack(targets)} = ctx.saved_tensors"]


def _backward(
    plan: _Plan,
    unpack: list[str],
    on_ctx: Mapping[str, str],
    lists: tuple[int, ...],
    list_returns: bool,
    returns: str,
) -> tuple[str, list[str]]:
    """backward's parameters and lines: `ctx, grad` for one output, else `ctx, *grads`."""
    op, g = plan.op, plan.g
    grads = plan.grads
    message = decisions(op).no_grad_message
    if message:
        return f"ctx, *{grads}", _raise(message, g.error)
    args = op.args
    lines = list(unpack)
    read = set().union(*(_names(f.expression) for f in op.grads))
    grad = plan.formula.grad
    single = grad is not None and not list_returns and plan.formula.grads not in read
    params = f"ctx, {plan.local[grad]}" if single and grad else f"ctx, *{grads}"
    if list_returns:
        lines.append(f"{grads} = {g.nest}({returns}, {grads})")
    if grad is not None and not single and grad in read:
        lines.append(f"{plan.local[grad]} = {grads}[0]")
    needs = "ctx.needs_input_grad"
    if lists:
        counts = plan.attribute("counts")
        lines.append(f"needs = {g.unflatten}({literal(lists)}, {counts}, ctx.needs_input_grad[1:])")
        needs = "needs"
    acc = plan.accumulators
    with_formula = [a for a in args if any(a.name in f.inputs for f in op.grads)]
    scalars = [acc[a.name] for a in with_formula if not a.is_tensor_list]
    if scalars:
        lines.append(" = ".join(scalars) + " = None")
    for arg in with_formula:
        if arg.is_tensor_list:
            lines.append(f"{acc[arg.name]} = [None] * len({needs}[{args.index(arg)}])")
    index_of = {a.name: i for i, a in enumerate(args)}
    for formula in op.grads:
        code = plan.code(formula.expression, on_ctx)
        flags = [
            (
                f"any({needs}[{index_of[n]}])"
                if args[index_of[n]].is_tensor_list
                else f"{needs}[{index_of[n]}]"
            )
            for n in formula.inputs
        ]
        targets = ", ".join(acc[name] for name in formula.inputs)
        lines.append(f"if {' or '.join(flags)}:")
        lines.append(f"    {targets} = {code}")
    returned = [
        (
            acc[a.name]
            if a in with_formula
            else f"[None] * len({needs}[{i}])" if a.is_tensor_list else "None"
        )
        for i, a in enumerate(args)
    ]
    if lists:
        items = ", ".join(returned) + ("," if len(args) == 1 else "")
        lines.append(f"return (None, *{g.flatten}({literal(lists)}, ({items}))[1:])")
    else:
        lines.append(f"return {returned[0]}" if len(args) == 1 else f"return {', '.join(returned)}")
    return params, lines


def _jvp(
    plan: _Plan, uses: _Uses, unpack: list[str], on_ctx: Mapping[str, str], lists: tuple[int, ...]
) -> tuple[str, list[str]]:
    op, g = plan.op, plan.g
    args = op.args
    if lists:
        params = "ctx, *tangents"
    else:
        params = "ctx, " + ", ".join(plan.tangent[a.name] for a in args)
    message = decisions(op).no_jvp_message
    if message:
        return params, _raise(message, g.error)
    lines: list[str] = []
    tangents = tangent_names(args)
    if lists:
        targets = [plan.tangent[a.name] for a in args]
        lines.append(
            f"{_unpack(targets)} = {g.unflatten}({literal(lists)}, {plan.attribute('counts')}, tangents[1:])"
        )
    if op.jvp.auto == "auto_linear":
        values = []
        for arg in args:
            value = plan.tangent[arg.name] if arg.differentiable else on_ctx[arg.name]
            values.append(f"{arg.name}={value}" if arg.kwarg_only else value)
        lines.append(f"return {sibling_call(op, op.name, plan.siblings)}({', '.join(values)})")
        return params, lines
    lines.extend(unpack)
    if op.jvp.auto == "auto_element_wise":
        # A missing tangent of a tensor arrives as zeros; an omitted optional tensor's is None.
        optional = {a.name for a in args if a.family == "Tensor?"}
        terms = _element_wise_jvp(op)
        wrap = (lambda text: f"({text})") if len(terms) > 1 else (lambda text: text)
        required = [wrap(plan.code(text, on_ctx)) for name, text in terms if name not in optional]
        rest = [(name, wrap(plan.code(text, on_ctx))) for name, text in terms if name in optional]
        if not rest:
            lines.append(f"return {' + '.join(required)}")
            return params, lines
        result = plan.result
        lines.append(f"{result} = {' + '.join(required) if required else None}")
        for name, term in rest:
            lines.append(f"if {plan.local[tangents[name]]} is not None:")
            lines.append(f"    {result} = {term} if {result} is None else {result} + {term}")
        lines.append(f"return {result}")
        return params, lines
    results = [plan.code(text, on_ctx) for text in op.jvp.result]
    lines.append(f"return {results[0] if len(results) == 1 else ', '.join(results)}")
    return params, lines


_METHOD = "        "  # the indentation of a method's body


def _raise(message: str, error: str) -> list[str]:
    return wrapped(f"raise {error}(", [literal(message)], ")", _METHOD)


def _span(start: str, end: str) -> str:
    """`start:end` as black spaces a slice: around the colon unless both bounds are plain numbers."""
    return f"{start}:{end}" if start.isdigit() and end.isdigit() else f"{start} : {end}"


def _plus(offset: str, amount: int | str) -> str:
    if offset == "0":
        return str(amount)
    if isinstance(amount, int) and offset.isdigit():
        return str(int(offset) + amount)
    return f"{offset} + {amount}"
