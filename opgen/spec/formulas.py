"""The `[grad]` and `[fake]` tables of a spec: gradient formulas and the fake kernel's output rule."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import DiagnosticSink
from .expr import SAFE_BUILTINS, ExprProblem, check_expression
from .fields import check_keys, shown, string_list
from .load import LoadedToml
from .model import Arg, FakeRule, GradFormula, OpSpec, Ret
from .names import identifier_problem
from .tangents import tangent_names

__all__ = [
    "EXPR_GLOBALS",
    "FormulaNames",
    "formula_names",
    "build_grads",
    "build_fake",
    "check_exprs",
    "callable_ops",
    "called_ops",
]

# the names every spec expression may use besides the op's arguments
EXPR_GLOBALS = ("torch", "math", "F", *SAFE_BUILTINS)
_FAKE_KEYS = ("like", "expr", "checks")


@functools.lru_cache(maxsize=4)
def callable_ops(op_names: frozenset[str]) -> frozenset[str]:
    """The project's ops a formula may call by name (computed once per project, not per op)."""
    return frozenset(n for n in op_names if identifier_problem(n, "op name") is None)


@dataclass(frozen=True)
class FormulaNames:
    """What a gradient formula calls the incoming gradients and the op's outputs.

    Note [Formula names]
    In a formula, an argument's name always means that argument, whatever it
    shadows. The incoming gradient is `grad` (ops with one output) and the
    tuple of them `grads`; the outputs are `result` (one output) or `result0`,
    `result1`, ... When an argument already has one of these names, the
    gradient or output takes the name with `_` appended (`grad_` next to an
    argument `grad`; again while taken), so both stay reachable. torch, math,
    F, the small builtins and the library's other ops are reachable unless an
    argument has their name.
    """

    grad: str | None  # None with several outputs: use grads[i]
    grads: str
    result: str | None
    results: tuple[str, ...]


def _free(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name


def formula_names(args: tuple[Arg, ...], rets: tuple[Ret, ...]) -> FormulaNames:
    """The names of the incoming gradients and outputs for this op (Note [Formula names])."""
    taken = {a.name for a in args}
    single = len(rets) == 1
    return FormulaNames(
        grad=_free("grad", taken) if single else None,
        grads=_free("grads", taken),
        result=_free("result", taken) if single else None,
        results=tuple(_free(f"result{i}", taken) for i in range(len(rets))),
    )


def _formula_names(
    args: tuple[Arg, ...], rets: tuple[Ret, ...], op_names: frozenset[str]
) -> set[str]:
    names = formula_names(args, rets)
    allowed = {a.name for a in args} | set(EXPR_GLOBALS) | callable_ops(op_names)
    allowed |= {names.grads, *names.results}
    allowed |= {n for n in (names.grad, names.result) if n is not None}
    return allowed


def build_grads(
    sink: DiagnosticSink,
    doc: LoadedToml,
    table: dict[str, Any],
    args: tuple[Arg, ...],
    rets: tuple[Ret, ...],
    op_names: frozenset[str],
) -> tuple[GradFormula, ...]:
    if table and _no_grads(sink, doc, args, rets):
        return ()
    allowed = _formula_names(args, rets, op_names)
    inputs = {a.name for a in args}
    taken: set[str] = set()
    by_name = {a.name: a for a in args}
    formulas: list[GradFormula] = []
    for key, expr in table.items():
        line = doc.line("grad", key)
        targets = tuple(t.strip() for t in key.split(","))
        _check_grad_targets(sink, line, targets, by_name, taken)
        formula = _grad_formula(sink, line, key, expr, targets, allowed, inputs, op_names)
        if formula is not None:
            formulas.append(formula)
    return tuple(formulas)


def _no_grads(
    sink: DiagnosticSink, doc: LoadedToml, args: tuple[Arg, ...], rets: tuple[Ret, ...]
) -> bool:
    """Whether the op can have no gradient formulas at all (reported): it returns nothing,
    writes an argument, or returns a view."""
    if not rets:
        sink.error(
            doc.line("grad"),
            "this op returns nothing, so it has no gradients",
            "remove the [grad] table",
        )
        return True
    written = [a.name for a in args if a.mutated]
    if written:
        # torch registers gradient formulas only for functional ops (Note [Mutating ops that return]).
        sink.error(
            doc.line("grad"),
            f"this op writes {', '.join(map(repr, written))}, and PyTorch registers gradient "
            "formulas only for ops that write nothing",
            "remove the [grad] table (the op then runs below autograd: its outputs do not "
            "require grad), or make the op functional: return new tensors instead of writing",
        )
        return True
    views = [i + 1 for i, r in enumerate(rets) if r.aliased]
    if views:
        sink.error(
            doc.line("grad"),
            f"return {views[0]} aliases an argument (a view), and PyTorch registers gradient "
            "formulas only for ops whose returns are new tensors",
            "remove the [grad] table (the op then runs below autograd), or return a new tensor",
        )
        return True
    return False


def _check_grad_targets(
    sink: DiagnosticSink,
    line: int,
    targets: tuple[str, ...],
    by_name: dict[str, Arg],
    taken: set[str],
) -> None:
    """Each input a formula is for is a differentiable tensor input without another formula;
    `taken` learns them."""
    for target in targets:
        arg = by_name.get(target)
        if arg is None:
            sink.error(
                line,
                f"gradient for unknown input {target!r}",
                f"inputs: {', '.join(by_name) or 'none'}",
            )
        elif not arg.differentiable:
            sink.error(
                line,
                f"input {target!r} is a {arg.type.spelling}, not a tensor: it has no gradient",
                "remove this formula",
            )
        elif arg.kwarg_only:
            sink.error(
                line,
                f"input {target!r} is keyword-only, and torch gives keyword-only tensors no gradient",
                "move it before the `*` in the schema, or remove this formula",
            )
        elif arg.mutated:
            sink.error(
                line,
                f"input {target!r} is mutated; gradients through mutated inputs are not supported",
                "remove this formula",
            )
        elif target in taken:
            sink.error(line, f"input {target!r} has two gradient formulas", "keep one")
        taken.add(target)


def _grad_formula(
    sink: DiagnosticSink,
    line: int,
    key: str,
    expr: object,
    targets: tuple[str, ...],
    allowed: set[str],
    inputs: set[str],
    op_names: frozenset[str],
) -> GradFormula | None:
    """The formula `key = expr`, or None (reported) when it is no string, no valid expression,
    or names an op without calling it."""
    if not isinstance(expr, str):
        sink.error(
            line,
            f"gradient formula for {key!r} must be a string, not {shown(expr)}",
            f'e.g. {targets[0] or "x"} = "grad * x.cos()"',
        )
        return None
    try:
        tree = check_expression(expr, allowed, f"gradient formula for {key!r}", inputs)
    except ExprProblem as exc:
        sink.error(line, exc.message, exc.hint)
        return None
    uncalled = _uncalled_ops(tree, callable_ops(op_names) - inputs)
    if uncalled:
        sink.error(
            line,
            f"gradient formula for {key!r} names the op {uncalled!r} without calling it",
            f"call it, e.g. {uncalled}(grad, ...)",
        )
        return None
    return GradFormula(targets, expr.strip(), line)


def called_ops(op: OpSpec) -> frozenset[str]:
    """The ops of the library that the op's gradient and forward-mode formulas call, by name.

    A valid formula names only inputs, tangents, results, globals and ops, so
    the names left once the others are taken away are ops. `auto_linear`
    calls the op itself, through whichever overload its name picks.
    """
    known = _formula_names(op.args, op.returns, frozenset()) | set(tangent_names(op.args).values())
    called = frozenset(
        node.id
        for text in (*(formula.expression for formula in op.grads), *op.jvp.result)
        for node in ast.walk(ast.parse(text, mode="eval"))
        if isinstance(node, ast.Name) and node.id not in known
    )
    return called | {op.name} if op.jvp.auto == "auto_linear" else called


def _uncalled_ops(tree: ast.AST, op_names: frozenset[str]) -> str | None:
    """An op of the library used as a value rather than called (the rewrite to torch.ops needs a call)."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in op_names and id(node) not in called:
            return node.id
    return None


def check_exprs(
    sink: DiagnosticSink,
    doc: LoadedToml,
    texts: Iterable[str],
    allowed: set[str],
    what: str,
    *path: str,
    args: Iterable[str] = (),
) -> list[str]:
    good: list[str] = []
    for text in texts:
        try:
            check_expression(text, allowed, what, args)
        except ExprProblem as exc:
            sink.error(doc.line(*path), exc.message, exc.hint)
            continue
        good.append(text.strip())
    return good


def build_fake(
    sink: DiagnosticSink,
    doc: LoadedToml,
    table: dict[str, Any],
    args: tuple[Arg, ...],
    rets: tuple[Ret, ...],
    present: bool,
) -> FakeRule:
    check_keys(sink, doc, table, _FAKE_KEYS, ("fake",))
    allowed = {a.name for a in args} | set(EXPR_GLOBALS)
    checks = string_list(sink, doc, table["checks"], "fake", "checks") if "checks" in table else ()
    names = [a.name for a in args]
    checks = tuple(
        check_exprs(sink, doc, checks or (), allowed, "fake check", "fake", "checks", args=names)
    )
    if not rets:
        if "like" in table or "expr" in table:
            sink.error(
                doc.line("fake"),
                "this op returns nothing; its fake kernel needs no output rule",
                "remove fake.like / fake.expr",
            )
        return FakeRule(checks=checks)
    if not present:
        return FakeRule()  # reported once, as the missing [fake] table
    if ("like" in table) == ("expr" in table):
        sink.error(
            doc.line("fake"),
            "the fake kernel needs exactly one of fake.like or fake.expr",
            'e.g. like = "x" (output shaped like x) or expr = "x.new_empty(x.shape[0], w.shape[1])"',
        )
        return FakeRule()
    if "like" in table:
        like = string_list(sink, doc, table["like"], "fake", "like") or ()
        other = next((r for r in rets if not r.is_tensor), None)
        if other is not None:
            sink.error(
                doc.line("fake", "like"),
                f"fake.like describes tensors, but this op also returns {other.type.spelling}",
                "use fake.expr with one expression per return, e.g. "
                'expr = ["x.new_empty(x.shape)", "x.shape[0]"]',
            )
        tensors = [a.name for a in args if a.is_tensor]
        for name in like:
            if name not in tensors:
                sink.error(
                    doc.line("fake", "like"),
                    f"fake.like names {shown(name)}, which is not a tensor input",
                    f"tensor inputs: {', '.join(tensors) or 'none'}",
                )
        rule = FakeRule(like=like, checks=checks)
    else:
        exprs = string_list(sink, doc, table["expr"], "fake", "expr") or ()
        good = check_exprs(sink, doc, exprs, allowed, "fake.expr", "fake", "expr", args=names)
        if len(good) != len(exprs):
            return FakeRule()
        rule = FakeRule(expr=tuple(good), checks=checks)
    count = len(rule.like or rule.expr)
    if count and count != len(rets):
        sink.error(
            doc.line("fake"),
            f"the fake rule gives {count} output(s) but the schema returns {len(rets)}",
            "give one rule per return, as a list",
        )
    return rule
