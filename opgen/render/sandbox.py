"""Jinja's immutable sandbox, bounded in time and in the text a render writes and builds.

Note [Bounded rendering]
Template overrides come with a checkout, and `opgen generate --check` on a
pull request must end, in bounded memory, whatever they hold: loops nested
three deep over range(100000), a macro that calls itself twice, an include
of itself, `{{ 'a' * 10000000000 }}`. Every render that involves an override
(compiling it included) has a deadline, 10 s, and may write 64 MiB of text
and build 64 MiB of values (`RenderLimits` in render/budget.py; whoever runs opgen
raises them with OPGEN_RENDER_SECONDS and OPGEN_RENDER_MB). Past any of
them it stops with a diagnostic at the template's line (render/environment.py).

- Time. A thread cannot be killed, so the render checks the clock itself.
  The code generator compiles a check into the top of every loop iteration,
  loop filter, macro, call block, block and template of an override: the
  only ways a template repeats work (recursion and includes go through
  them). Every filter and call checks it too (|map calls a filter per
  item). Inside one filter or method call on a large value (sorting
  millions of items, wrapping a long text) there is no check; on the main
  thread of a POSIX system an interval timer (SIGALRM) interrupts that too,
  as its handler runs between any two bytecodes. The timer is armed around
  such a render, and only when no other timer is in use (pytest-timeout, an
  embedding program's own): then the checks bound the render alone. Not a
  timer alone: it needs the main thread and does not exist on Windows. Not
  a trace function: it slows every line of every template several times.
- Size. What an override writes is counted as it is written (any
  template's text is checked once it is whole). Every value an override
  builds with an operation that can multiply sizes (`*`, `**`, `%`, `~`,
  str.format, the padding, joining, splitting and replacing filters and
  methods, lipsum) is measured before it is built, and what its operators,
  filters, method calls and slices build is counted after. So
  `'a' * 10**10` is refused without allocating (nor is it folded while
  compiling, as jinja folds constants), and a loop that keeps building large
  values runs out of budget, not of memory. A container is measured by
  walking it, as printing it would (a list holding one large text 1000
  times prints it 1000 times).
- Where. The checks are compiled into overrides only: the code generator
  rewrites an override's operators, slices and `~` into check filters, and
  its filters into their checked twins (`opgen:join`; |map finds them
  through `call_filter`). A built-in template compiles to the code it
  always had and renders with a budget marked unchecked: opgen's own
  templates are trusted and lay out a spec's bounded data. What all
  templates share (method calls, str.format, lipsum) tests that mark first.
  The cost to normal generation is that test and the whole-text check:
  about 2 ms over the 310 renders of a 100-op project, within the noise of
  bench/opgen_speed.py.
- Compiled code. The checks are part of a template's compiled code, which lives
  in memory for one run only: nothing compiled is loaded from the project folder.
  The bounds themselves are read at run time.
"""

from __future__ import annotations

import contextlib
import operator
import os
import signal
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from functools import update_wrapper
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.utils import generate_lorem_ipsum
from jinja2.visitor import NodeTransformer

from .budget import RenderBudget, RenderLimits
from .sandbox_sizes import (
    FILTER_CHECKS,
    METHOD_CHECKS,
    TEXT_FILTERS,
    format_size,
    percent_size,
    power_size,
    repeat_size,
)

__all__ = ["BoundedSandbox", "bounded_render"]

_ALARM = hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")


# -- the checks compiled into an override ---------------------------------------------------


@jinja2.pass_context
def _tick(context: jinja2.runtime.Context, value: Any) -> Any:
    _budget(context.environment).tick()
    return value


@jinja2.pass_context
def _text(context: jinja2.runtime.Context, value: Any) -> str:
    budget = _budget(context.environment)
    return budget.text(value)


@jinja2.pass_context
def _written(context: jinja2.runtime.Context, size: int) -> str:
    _budget(context.environment).write(size, "writing the template's text")
    return ""


@jinja2.pass_context
def _concat(context: jinja2.runtime.Context, items: list[Any]) -> str:
    budget = _budget(context.environment)
    budget.need(sum(budget.measure(item) for item in items), "joining with ~")
    return budget.build_value("".join(str(item) for item in items), "joining with ~")


@jinja2.pass_context
def _slice(context: jinja2.runtime.Context, value: Any, start: Any, stop: Any, step: Any) -> Any:
    budget = _budget(context.environment)
    return budget.build_value(value[start:stop:step], "slicing")


_OPERATORS = {"+": operator.add, "*": operator.mul, "**": operator.pow, "%": operator.mod}
_BINOPS = {"Add": "+", "Mul": "*", "Pow": "**", "Mod": "%"}  # the operators that can grow a value


@jinja2.pass_context
def _binop(context: jinja2.runtime.Context, left: Any, symbol: str, right: Any) -> Any:
    budget = _budget(context.environment)
    if symbol == "*":
        repeat_size(budget, left, right)
    elif symbol == "**":
        power_size(budget, left, right)
    elif symbol == "%" and isinstance(left, (str, bytes)):
        percent_size(budget, left if isinstance(left, str) else left.decode("latin-1"), right)
    return budget.build_value(_OPERATORS[symbol](left, right), f"the {symbol} operator")


_CHECKS = {
    "opgen_binop": _binop,
    "opgen_slice": _slice,
    "opgen_tick": _tick,
    "opgen_text": _text,
    "opgen_written": _written,
    "opgen_concat": _concat,
}


def _filter(node: nodes.Expr, name: str, lineno: int) -> nodes.Filter:
    return nodes.Filter(node, name, [], [], None, None, lineno=lineno)


def _tick_statement(lineno: int) -> nodes.ExprStmt:
    return nodes.ExprStmt(_filter(nodes.Const(None), "opgen_tick", lineno), lineno=lineno)


class _Checks(NodeTransformer):
    """Compiles the checks of Note [Bounded rendering] into an override's syntax tree.

    Only overrides are compiled this way: a built-in template's code is what it would be
    without the checks, so opgen's own templates run as fast as before."""

    def __init__(self, filters: Mapping[str, Any]) -> None:
        self.filters = filters

    def visit_Template(self, node: nodes.Template) -> nodes.Template:
        self.generic_visit(node)
        node.body.insert(0, _tick_statement(1))
        return node

    def _body_first(self, node: Any) -> Any:
        self.generic_visit(node)
        node.body.insert(0, _tick_statement(node.lineno))
        return node

    visit_Macro = visit_CallBlock = visit_Block = _body_first

    def visit_For(self, node: nodes.For) -> nodes.For:
        self._body_first(node)
        if node.test is not None:  # items the filter drops never reach the body
            ticked = _filter(nodes.Const(True), "opgen_tick", node.lineno)
            node.test = nodes.And(ticked, node.test, lineno=node.lineno)
        return node

    def visit_Output(self, node: nodes.Output) -> Any:
        self.generic_visit(node)
        static = sum(len(n.data) for n in node.nodes if isinstance(n, nodes.TemplateData))
        node.nodes = [
            n if isinstance(n, nodes.TemplateData) else _filter(n, "opgen_text", n.lineno)
            for n in node.nodes
        ]
        if not static:
            return node
        written = _filter(nodes.Const(static), "opgen_written", node.lineno)
        return [nodes.ExprStmt(written, lineno=node.lineno), node]

    def visit_Getitem(self, node: nodes.Getitem) -> nodes.Expr:
        self.generic_visit(node)
        if not isinstance(node.arg, nodes.Slice):
            return node  # the sandbox's getitem
        # jinja writes a slice as Python's `x[a:b]`, outside the sandbox: count what it copies
        bounds = [p or nodes.Const(None) for p in (node.arg.start, node.arg.stop, node.arg.step)]
        sliced = _filter(node.node, "opgen_slice", node.lineno)
        sliced.args = bounds
        return sliced

    def visit_Concat(self, node: nodes.Concat) -> nodes.Filter:
        self.generic_visit(node)
        return _filter(nodes.List(node.nodes, lineno=node.lineno), "opgen_concat", node.lineno)

    def _operator(self, node: nodes.BinExpr) -> nodes.Filter:
        """`+`, `*`, `**` and `%`: measured first, and never folded at compile time (jinja
        would compute `'a' * 10**10` while compiling)."""
        self.generic_visit(node)
        checked = _filter(node.left, "opgen_binop", node.lineno)
        checked.args = [nodes.Const(_BINOPS[type(node).__name__]), node.right]
        return checked

    visit_Add = visit_Mul = visit_Pow = visit_Mod = _operator

    def visit_Filter(self, node: nodes.Filter) -> nodes.Filter:
        self.generic_visit(node)
        if f"opgen:{node.name}" in self.filters:  # the filter's checked twin (`_bounded_filter`)
            node.name = f"opgen:{node.name}"
        return node


class _CodeGenerator(CodeGenerator):
    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        environment = self.environment
        assert isinstance(environment, BoundedSandbox)
        if not environment.is_builtin_file(self.filename):
            node = _Checks(environment.filters).visit(node)
            node.set_environment(environment)
        super().visit_Template(node, frame)


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    passes = getattr(getattr(func, "jinja_pass_arg", None), "name", None)
    check = FILTER_CHECKS.get(name)
    factor = TEXT_FILTERS.get(name, 0)
    what = f"the |{name} filter"

    def bounded(context: jinja2.runtime.Context, value: Any, *args: Any, **kwargs: Any) -> Any:
        environment = context.environment
        budget = _budget(environment)
        budget.tick()  # |map, |select and |reject call filters once per item
        if factor:
            budget.need(factor * budget.measure(value), what)
        if check is not None:
            value, args, kwargs = check(budget, value, args, kwargs)
        if passes == "context":
            result = func(context, value, *args, **kwargs)
        elif passes == "eval_context":
            result = func(context.eval_ctx, value, *args, **kwargs)
        elif passes == "environment":
            result = func(environment, value, *args, **kwargs)
        else:
            result = func(value, *args, **kwargs)
        return budget.build_value(result, what)

    # pass_context after update_wrapper, which copies the filter's own mark; it also keeps the
    # filter from running at compile time on constants
    return jinja2.pass_context(update_wrapper(bounded, func))


# -- the environment ------------------------------------------------------------------------


def _budget(environment: jinja2.Environment) -> RenderBudget:
    """The budget of the render in progress: opgen's filters and checks run in a BoundedSandbox."""
    if not isinstance(environment, BoundedSandbox):
        raise TypeError("opgen's bounded filters run in a BoundedSandbox only")
    return environment.budget


class BoundedSandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with the bounds of Note [Bounded rendering].

    `budget` is the budget of the render in progress (`bounded_render` sets
    it): one render at a time per environment."""

    code_generator_class = _CodeGenerator

    def __init__(self, builtin_dir: Path, **options: Any) -> None:
        super().__init__(**options)
        self._builtin_prefix = os.path.normpath(builtin_dir) + os.sep
        self.budget = RenderBudget(RenderLimits())
        twins = {f"opgen:{name}": _bounded_filter(name, f) for name, f in self.filters.items()}
        self.filters.update(twins)
        self.filters.update(_CHECKS)
        self.globals["lipsum"] = self._lipsum

    def is_builtin_file(self, filename: str | None) -> bool:
        """Whether a template's file is one of opgen's (compiled without the checks)."""
        return filename is not None and os.path.normpath(filename).startswith(self._builtin_prefix)

    def _lipsum(self, n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
        if not self.budget.checked:
            return generate_lorem_ipsum(n, html, min, max)
        if isinstance(n, int) and isinstance(max, int):
            self.budget.need(n * abs(max) * 16, "lipsum")
        return self.budget.build_value(generate_lorem_ipsum(n, html, min, max), "lipsum")

    def call_filter(
        self,
        name: str,
        value: Any,
        args: Any = None,
        kwargs: Any = None,
        context: Any = None,
        eval_ctx: Any = None,
    ) -> Any:
        """What |map, |select and |reject call: in a checked render, the filter's checked twin."""
        if self.budget.checked and context is not None and f"opgen:{name}" in self.filters:
            name = f"opgen:{name}"
        return super().call_filter(name, value, args, kwargs, context, eval_ctx)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        budget = __self.budget
        if not budget.checked:
            return super().call(__context, __obj, *args, **kwargs)
        budget.tick()
        if isinstance(__obj, types.BuiltinMethodType) and isinstance(
            __obj.__self__, (str, bytes, int)
        ):
            check = METHOD_CHECKS.get(__obj.__name__)
            if check is not None:
                args, kwargs = check(budget, __obj.__self__, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        return budget.build_value(result, f"calling {getattr(__obj, '__name__', 'a function')}")

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        template = value.__self__
        by_name = value.__name__ == "format_map"

        def bounded(*args: Any, **kwargs: Any) -> str:
            if not self.budget.checked:
                return wrapped(*args, **kwargs)
            if by_name:
                mapping = args[0] if args and isinstance(args[0], Mapping) else {}
                format_size(self.budget, template, (), mapping)
            else:
                format_size(self.budget, template, args, kwargs)
            return self.budget.build_value(wrapped(*args, **kwargs), "str.format")

        return update_wrapper(bounded, wrapped)


@contextlib.contextmanager
def bounded_render(environment: BoundedSandbox, limits: RenderLimits) -> Iterator[RenderBudget]:
    """A fresh budget for one render, and the interval timer of Note [Bounded rendering] where
    it can be armed."""
    budget = environment.budget = RenderBudget(limits)
    armed = (
        _ALARM
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
        and not signal.getitimer(signal.ITIMER_REAL)[0]
    )
    if not armed:
        try:
            yield budget
        finally:
            budget.active = False
        return

    def expire(signum: int, frame: types.FrameType | None) -> None:
        if budget.active:
            raise budget.timed_out()

    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, limits.seconds)
    try:
        yield budget
    finally:
        budget.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
