"""The `schema` (and `mutates`) of a spec: read in PyTorch's dialect, checked, made into the model.

Note [Written arguments]
Which arguments an op writes comes from the schema's write annotations
(`Tensor(a!)`, `Tensor!`, `Tensor!?`, `Tensor(a6!)?`, `Tensor[](a!)`). `mutates`
is optional: when given, it must agree with the annotations, and an argument
it names that carries no annotation gets one (`Tensor out` + `mutates = ["out"]`
registers `Tensor(a!) out`). A bare `!` is registered as a named set: torch
would name it `$0`, which its own parser cannot read back; numbered and named
sets stay as written.
"""

from __future__ import annotations

import keyword
from itertools import count

from ..errors import DiagnosticSink
from .dialect.parser import SchemaError, parse
from .dialect.rules import schema_problems
from .dialect.types import AliasSet, Param
from .fields import shown
from .load import LoadedToml
from .model import Arg, Ret
from .types import RETURN_FAMILIES, arg_type_supported, supported_arg_types

__all__ = ["parse_schema"]

_RETURN_HINT = (
    "return Tensor, Tensor?, Tensor[], int, SymInt, float, bool, str, ScalarType, a list "
    "of int, SymInt, float, bool or str (int[], ...), or a tuple of them: (Tensor, Tensor, int)"
)


def _excerpt(text: str, offset: int) -> str:
    rest = text[offset:].split("\n", 1)[0].strip()
    if not rest:
        return ""
    return f" (at {shown(rest if len(rest) <= 30 else rest[:27] + '...')})"


class _Reporter:
    """Reports problems of one schema at their file line."""

    def __init__(self, sink: DiagnosticSink, doc: LoadedToml, text: str) -> None:
        self.sink, self.doc, self.text = sink, doc, text
        self.ok = True

    def error(self, offset: int, message: str, hint: str) -> None:
        line = self.doc.value_line("schema", self.text.count("\n", 0, offset))
        self.sink.error(line, message, hint)
        self.ok = False


def _set_names(params: list[Param]) -> set[str]:
    return {name for p in params for a in p.type.aliases() for name in a.before}


def _new_set(taken: set[str]) -> str:
    """The first free set name: a, b, ..., z, a1, ..., z1, a2, ..."""
    for round_ in count():
        for letter in "abcdefghijklmnopqrstuvwxyz":
            name = letter + (str(round_) if round_ else "")
            if name not in taken:
                taken.add(name)
                return name
    raise AssertionError("unreachable")


def _check_types(report: _Reporter, args: tuple[Param, ...], rets: tuple[Param, ...]) -> None:
    for arg in args:
        if keyword.iskeyword(arg.name):
            report.error(
                arg.offset,
                f"argument name {arg.name!r} is a Python keyword: torch accepts it, but the "
                "generated Python (typed wrapper, kernel, fake) takes every argument as a "
                "parameter of the same name",
                f"rename it, e.g. {arg.name}_",
            )
        if not arg_type_supported(arg.type):
            report.error(
                arg.offset,
                f"argument {arg.name!r} has type {arg.type.spelling}, which opgen does not generate code for",
                f"use {supported_arg_types()}",
            )
    for index, ret in enumerate(rets):
        if ret.type.family not in RETURN_FAMILIES:
            report.error(
                ret.offset,
                f"return {index + 1} has type {ret.type.spelling}, which opgen does not generate code for",
                _RETURN_HINT,
            )


def _written(
    report: _Reporter,
    doc: LoadedToml,
    args: tuple[Param, ...],
    mutates: list[str] | None,
) -> set[str]:
    """The names `mutates` adds annotations to (Note [Written arguments]); problems go to `report`."""
    if mutates is None:
        return set()
    by_name = {a.name: a for a in args}
    added: set[str] = set()
    line = doc.line("mutates")
    for name in mutates:
        arg = by_name.get(name)
        if arg is None:
            report.sink.error(
                line,
                f"mutated argument {name!r} is not in the schema",
                f"arguments: {', '.join(by_name) or 'none'}",
            )
        elif arg.type.element != "Tensor":
            report.sink.error(
                line,
                f"mutated argument {name!r} has type {arg.type.spelling}, not Tensor",
                f"only tensors can be mutated: remove {name!r} from mutates",
            )
        elif not arg.type.is_write:
            added.add(name)
    for arg in args:
        if arg.type.is_write and arg.name not in mutates:
            report.error(
                arg.offset,
                f"argument {arg.name!r} is annotated as written ({arg.text}) but is not in `mutates`",
                f'add it: mutates = ["{arg.name}"], or delete `mutates`: opgen reads the written '
                "arguments from the annotations",
            )
    return added


def parse_schema(
    sink: DiagnosticSink, doc: LoadedToml, text: str, mutates: list[str] | None
) -> tuple[tuple[Arg, ...], tuple[Ret, ...]] | None:
    """The op's arguments and returns as registered, or None after reporting why not."""
    report = _Reporter(sink, doc, text)
    if not text.lstrip().startswith("("):
        report.error(
            0,
            f"schema {shown(text)} must start with the argument list",
            'write it as "(Tensor x) -> Tensor", without the op name',
        )
        return None
    try:
        parsed = parse(text)
    except SchemaError as exc:
        report.error(
            exc.offset,
            f"invalid schema: {exc.message}{_excerpt(text, exc.offset)}",
            exc.hint
            or 'write it in PyTorch\'s schema language, e.g. "(Tensor x, float alpha=1.0) -> Tensor"',
        )
        return None
    for problem in schema_problems(parsed):
        report.error(problem.offset, problem.message, problem.hint)
    _check_types(report, parsed.args, parsed.returns)
    added = _written(report, doc, parsed.args, mutates)
    if not report.ok:
        return None
    # Note [Written arguments]: bare `!` and `mutates` become named sets.
    taken = _set_names(list(parsed.args + parsed.returns))
    fresh = {
        a.fresh: _new_set(taken)
        for p in parsed.args + parsed.returns
        for a in p.type.aliases()
        if a.fresh is not None
    }
    args = []
    for param in parsed.args:
        kind = param.type.renamed_aliases(fresh)
        if param.name in added:
            kind = kind.with_alias(AliasSet((_new_set(taken),), None, True))
        args.append(Arg(param.name, kind, param.default, param.kwarg_only, param.text))
    rets = [Ret(r.name, r.type.renamed_aliases(fresh)) for r in parsed.returns]
    return tuple(args), tuple(rets)
