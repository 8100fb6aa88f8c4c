"""The `schema` of a spec: parsed with torchgen, checked, turned into the model's arguments and returns."""

from __future__ import annotations

import re
from typing import Any

from ..errors import DiagnosticSink
from .fields import shown
from .load import LoadedToml
from .model import Arg, Ret
from .names import identifier_problem
from .types import SUPPORTED_ARG_TYPES, SUPPORTED_RETURN_TYPES, default_problem, normalize_type

__all__ = ["parse_schema"]

# Names generated Python or C++ code uses around the arguments (`std`, `at` and
# `c10` are C++ namespaces a parameter of that name would hide).
_RESERVED_ARG_NAMES = frozenset(
    {
        "grad",
        "grads",
        "result",
        "torch",
        "math",
        "F",
        "ctx",
        "keyword_only_inputs",
        "std",
        "at",
        "c10",
    }
)
_SCHEMA_PLACEHOLDER = "opgen_op"
_SCHEMA_HINT = (
    'write it in PyTorch\'s schema language, e.g. "(Tensor x, float alpha=1.0) -> Tensor"'
)


def _schema_syntax_hint(text: str) -> str:
    """A specific fix for the schema mistakes torchgen reports only vaguely."""
    if "->" not in text:
        return 'add the return type: "(Tensor x) -> Tensor", or "-> ()" when the op returns nothing'
    args = text.split("->", 1)[0]
    if args.count("(") != args.count(")"):
        return "close the argument list: add ')' before '->'"
    return _SCHEMA_HINT


def _default_hint(type_text: str, name: str) -> str:
    base = normalize_type(type_text).rstrip("?")
    if base in ("Tensor", "Tensor[]"):
        return f"tensors take no default except None: write Tensor? {name}=None"
    if base.endswith("[]"):
        return f"write a list, e.g. {name}=[0, 1]"
    return {
        "int": f"write an integer, e.g. {name}=1",
        "SymInt": f"write an integer, e.g. {name}=1",
        "float": f"write a number, e.g. {name}=1.0",
        "Scalar": f"write a number, e.g. {name}=1",
        "bool": f"write True or False, e.g. {name}=False",
        "str": f"quote the string, e.g. {name}='mean'",
    }.get(base, f"remove the default of {name!r}")


def _arg_name_ok(sink: DiagnosticSink, line: int, name: str) -> bool:
    problem = identifier_problem(name, "argument name")
    if problem is None and name.startswith("_"):
        problem = f"argument name {name!r} starts with an underscore, which opgen keeps for generated locals"
    if problem is None and name in _RESERVED_ARG_NAMES:
        problem = f"argument name {name!r} is reserved: the generated code uses it"
    if problem:
        sink.error(line, problem, "rename the argument (a short snake_case name)")
    return problem is None


def _torchgen_parse(sink: DiagnosticSink, line: int, text: str) -> Any:
    from torchgen.model import FunctionSchema

    try:
        return FunctionSchema.parse(_SCHEMA_PLACEHOLDER + text.strip())
    except BaseException as exc:  # torchgen reports with assert and RuntimeError alike
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        message = " ".join(str(exc).replace(_SCHEMA_PLACEHOLDER, "").split()) or type(exc).__name__
        message = message if len(message) <= 200 else message[:197] + "..."
        sink.error(line, f"invalid schema: {message}", _schema_syntax_hint(text))
        return None


def parse_schema(
    sink: DiagnosticSink, doc: LoadedToml, text: str, mutates: list[str]
) -> tuple[tuple[Arg, ...], tuple[Ret, ...]] | None:
    line = doc.line("schema")
    if not text.lstrip().startswith("("):
        sink.error(
            line,
            f"schema {shown(text)} must start with the argument list",
            'write it as "(Tensor x) -> Tensor", without the op name',
        )
        return None
    if any(ord(c) < 32 or c == "\x7f" for c in text):
        sink.error(
            line,
            "schema contains control characters (a newline or tab)",
            "write the schema on one line, with spaces only",
        )
        return None
    if "->" in text and re.search(r"Tensor\s*\(", text.rsplit("->", 1)[1]):
        sink.error(
            line,
            "returns cannot carry alias annotations",
            "return a new tensor, or return () and mutate an argument",
        )
        return None
    schema = _torchgen_parse(sink, line, text)
    if schema is None:
        return None
    args: list[Arg] = []
    ok = True
    positional = {a.name for a in schema.arguments.flat_positional}
    seen: set[str] = set()
    for a in schema.arguments.flat_all:
        ok = _arg_name_ok(sink, line, a.name) and ok
        if a.name in seen:
            sink.error(
                line,
                f"argument {a.name!r} appears twice in the schema",
                "give each argument its own name",
            )
            ok = False
        seen.add(a.name)
        type_text = normalize_type(str(a.type))
        if type_text not in SUPPORTED_ARG_TYPES:
            sink.error(
                line,
                f"argument {a.name!r} has unsupported type {type_text}",
                f"supported: {', '.join(sorted(SUPPORTED_ARG_TYPES))}",
            )
            ok = False
        if a.annotation is not None and not a.annotation.is_write:
            sink.error(
                line,
                f"argument {a.name!r} has a read-only alias annotation",
                "custom ops cannot return views; remove the annotation",
            )
            ok = False
        if a.annotation is not None and a.annotation.is_write and a.name not in mutates:
            sink.error(
                line,
                f"argument {a.name!r} is annotated as mutated but is not in `mutates`",
                f'add it: mutates = ["{a.name}"], or remove the (a!) annotation',
            )
            ok = False
        if a.default is not None and type_text in SUPPORTED_ARG_TYPES:
            problem = default_problem(type_text, a.default)
            if problem:
                hint = _default_hint(type_text, a.name)
                if a.default == "None":
                    hint = f"make the type optional ({type_text}? {a.name}=None) or give a {type_text} default"
                sink.error(line, f"argument {a.name!r}: {problem}", hint)
                ok = False
        if a.name not in positional and type_text.startswith("Tensor"):
            sink.error(
                line,
                f"tensor argument {a.name!r} is keyword-only",
                "custom ops take tensors as positional arguments: move it before the `*`",
            )
            ok = False
        args.append(
            Arg(a.name, str(a.type), a.default, a.name not in positional, a.name in mutates)
        )
    rets: list[Ret] = []
    for r in schema.returns:
        if r.annotation is not None:
            sink.error(
                line,
                "returns cannot carry alias annotations",
                "return a new tensor, or return () and mutate an argument",
            )
            ok = False
        if str(r.type) not in SUPPORTED_RETURN_TYPES:
            sink.error(
                line,
                f"return type {r.type} is not supported",
                "return Tensor, Tensor[] or a tuple of Tensors; pass other values back as tensors",
            )
            ok = False
        if r.name is not None and not _arg_name_ok(sink, line, r.name):
            ok = False
        rets.append(Ret(r.name, str(r.type)))
    # A bad `mutates` entry is recorded but does not stop the checks of the
    # formulas, fake rule and samples, which depend only on the schema.
    for name in mutates:
        arg = next((a for a in args if a.name == name), None)
        if arg is None:
            sink.error(
                doc.line("mutates"),
                f"mutated argument {name!r} is not in the schema",
                f"arguments: {', '.join(a.name for a in args) or 'none'}",
            )
        elif not (arg.is_tensor or arg.is_tensor_list):
            sink.error(
                doc.line("mutates"),
                f"mutated argument {name!r} has type {arg.type}, not Tensor",
                f"only tensors can be mutated: remove {name!r} from mutates",
            )
    return (tuple(args), tuple(rets)) if ok else None
