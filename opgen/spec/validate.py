"""Turn a loaded op spec into an `OpSpec`, reporting every problem at its line."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from typing import Any

from ..errors import DiagnosticSink, OpgenError
from .bench import build_bench
from .expr import SAFE_BUILTINS, ExprProblem, check_expression
from .fields import check_keys, shown, string_list, typed
from .load import LoadedToml
from .model import (
    BACKENDS,
    CPP_TARGETS,
    DEVICES,
    REGISTRATIONS,
    Arg,
    FakeRule,
    GradFormula,
    OpSpec,
    ProjectConfig,
    Ret,
)
from .names import RESERVED_NAMESPACES, RESERVED_OP_NAMES, identifier_problem
from .samples import build_test
from .types import SUPPORTED_ARG_TYPES, SUPPORTED_RETURN_TYPES, default_problem, normalize_type

__all__ = ["build_op_spec", "SPEC_KEYS"]

SPEC_KEYS = (
    "name schema doc devices backend mutates grad fake test per_device double_backward "
    "cpp_target registration pybind bench".split()
)
_FAKE_KEYS = ("like", "expr", "checks")
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
_EXPR_GLOBALS = ("torch", "math", "F", *SAFE_BUILTINS)
_SCHEMA_PLACEHOLDER = "opgen_op"
_SCHEMA_HINT = (
    'write it in PyTorch\'s schema language, e.g. "(Tensor x, float alpha=1.0) -> Tensor"'
)
_NAME_HINT = "use a short snake_case identifier"


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


def _parse_schema(
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


@functools.lru_cache(maxsize=4)
def _callable_ops(op_names: frozenset[str]) -> frozenset[str]:
    """The project's ops a formula may call by name (computed once per project, not per op)."""
    return frozenset(n for n in op_names if identifier_problem(n, "op name") is None)


def _formula_names(
    args: tuple[Arg, ...], rets: tuple[Ret, ...], op_names: frozenset[str]
) -> set[str]:
    names = {a.name for a in args} | set(_EXPR_GLOBALS) | _callable_ops(op_names) | {"grads"}
    if len(rets) == 1:
        names |= {"grad", "result"}
    names |= {f"result{i}" for i in range(len(rets))}
    return names


def _build_grads(
    sink: DiagnosticSink,
    doc: LoadedToml,
    table: dict[str, Any],
    args: tuple[Arg, ...],
    rets: tuple[Ret, ...],
    op_names: frozenset[str],
) -> tuple[GradFormula, ...]:
    formulas: list[GradFormula] = []
    if table and not rets:
        sink.error(
            doc.line("grad"),
            "this op returns nothing, so it has no gradients",
            "remove the [grad] table",
        )
        return ()
    if table and any(a.mutated for a in args):
        # torch registers autograd only for functional ops.
        sink.error(
            doc.line("grad"),
            "this op mutates an argument, and PyTorch has no autograd for mutating custom ops",
            "remove the [grad] table, or make the op functional (return a new tensor, no `mutates`)",
        )
        return ()
    allowed = _formula_names(args, rets, op_names)
    inputs = {a.name for a in args}
    taken: set[str] = set()
    by_name = {a.name: a for a in args}
    for key, expr in table.items():
        line = doc.line("grad", key)
        targets = tuple(t.strip() for t in key.split(","))
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
                    f"input {target!r} is a {arg.type}, not a tensor: it has no gradient",
                    "remove this formula",
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
        if not isinstance(expr, str):
            sink.error(
                line,
                f"gradient formula for {key!r} must be a string, not {shown(expr)}",
                f'e.g. {targets[0] or "x"} = "grad * x.cos()"',
            )
            continue
        try:
            tree = check_expression(expr, allowed, f"gradient formula for {key!r}")
        except ExprProblem as exc:
            sink.error(line, exc.message, exc.hint)
            continue
        uncalled = _uncalled_ops(tree, _callable_ops(op_names) - inputs)
        if uncalled:
            sink.error(
                line,
                f"gradient formula for {key!r} names the op {uncalled!r} without calling it",
                f"call it, e.g. {uncalled}(grad, ...)",
            )
            continue
        formulas.append(GradFormula(targets, expr.strip(), line))
    return tuple(formulas)


def _uncalled_ops(tree: ast.AST, op_names: frozenset[str]) -> str | None:
    """An op of the library used as a value rather than called (the rewrite to torch.ops needs a call)."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in op_names and id(node) not in called:
            return node.id
    return None


def _check_exprs(
    sink: DiagnosticSink,
    doc: LoadedToml,
    texts: Iterable[str],
    allowed: set[str],
    what: str,
    *path: str,
) -> list[str]:
    good: list[str] = []
    for text in texts:
        try:
            check_expression(text, allowed, what)
        except ExprProblem as exc:
            sink.error(doc.line(*path), exc.message, exc.hint)
            continue
        good.append(text.strip())
    return good


def _build_fake(
    sink: DiagnosticSink,
    doc: LoadedToml,
    table: dict[str, Any],
    args: tuple[Arg, ...],
    rets: tuple[Ret, ...],
    present: bool,
) -> FakeRule:
    check_keys(sink, doc, table, _FAKE_KEYS, ("fake",))
    allowed = {a.name for a in args} | set(_EXPR_GLOBALS)
    checks = string_list(sink, doc, table["checks"], "fake", "checks") if "checks" in table else ()
    checks = tuple(_check_exprs(sink, doc, checks or (), allowed, "fake check", "fake", "checks"))
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
        good = _check_exprs(sink, doc, exprs, allowed, "fake.expr", "fake", "expr")
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


def _choice(
    sink: DiagnosticSink,
    doc: LoadedToml,
    data: dict[str, Any],
    key: str,
    choices: tuple[str, ...],
    default: str,
) -> str:
    value = data.get(key, default)
    if value not in choices:
        sink.error(
            doc.line(key), f"{key} is {shown(value)}", f"use one of {', '.join(map(repr, choices))}"
        )
        return default
    return value


def _name_problem(name: str, config: ProjectConfig) -> str | None:
    """Why `name` is not 'namespace::op[.overload]', before any part is checked."""
    colons = name.count("::")
    if colons == 0:
        return f"op name {shown(name)} has no namespace"
    if colons > 1:
        return f"op name {shown(name)} contains '::' {colons} times"
    if ".." in name or "/" in name or "\\" in name:
        return f"op name {shown(name)} looks like a file path"
    if name.split("::", 1)[1].count(".") > 1:
        return f"op name {shown(name)} has more than one overload ('.')"
    return None


def _parse_name(
    sink: DiagnosticSink, doc: LoadedToml, name: str, config: ProjectConfig
) -> tuple[str, str, str] | None:
    line = doc.line("name")
    example = f'name = "{config.namespace}::my_op" or "{config.namespace}::my_op.overload"'
    problem = _name_problem(name, config)
    if problem:
        sink.error(line, problem, f"write it as namespace::op, e.g. {example}")
        return None
    namespace, rest = name.split("::", 1)
    op, _, overload = rest.partition(".")
    parts = [(namespace, "namespace"), (op, "op name")] + (
        [(overload, "overload name")] if "." in rest else []
    )
    ok = True
    for value, what in parts:
        problem = identifier_problem(value, what)
        if problem:
            sink.error(line, problem, _NAME_HINT)
            ok = False
    if ok and op in RESERVED_OP_NAMES:
        sink.error(
            line,
            f"op name {op!r} is reserved: the generated module uses it",
            "choose another op name",
        )
        ok = False
    if ok and (namespace in RESERVED_NAMESPACES or namespace.startswith("_")):
        sink.error(
            line,
            f"namespace {namespace!r} is reserved by PyTorch",
            f'use this project\'s namespace: name = "{config.namespace}::{op}"',
        )
        ok = False
    elif ok and namespace != config.namespace:
        sink.error(
            line,
            f"namespace {namespace!r} is not this project's namespace {config.namespace!r}",
            f'write name = "{config.namespace}::{rest}" (the namespace is set in opgen.toml)',
        )
        ok = False
    return (namespace, op, overload) if ok else None


def _top_level(
    sink: DiagnosticSink, doc: LoadedToml, data: dict[str, Any], config: ProjectConfig
) -> tuple[list[str], dict[str, Any]]:
    """Everything outside [grad], [fake] and [test]; problems go to `sink`."""
    mutates = data.get("mutates", [])
    if not isinstance(mutates, list) or not all(isinstance(m, str) for m in mutates):
        sink.error(
            doc.line("mutates"),
            f"mutates must be a list of argument names, not {shown(mutates)}",
            'e.g. mutates = ["out"]',
        )
        mutates = []
    devices = data.get("devices", ["cpu"])
    if (
        not isinstance(devices, list)
        or not devices
        or any(d not in DEVICES for d in devices)
        or len(set(map(str, devices))) != len(devices)
    ):
        sink.error(
            doc.line("devices"),
            f"devices must be a non-empty list drawn from 'cpu' and 'cuda', not {shown(devices)}",
            'e.g. devices = ["cpu", "cuda"]',
        )
        devices = ["cpu"]
    values: dict[str, Any] = {
        "devices": tuple(devices),
        "backend": _choice(sink, doc, data, "backend", BACKENDS, config.backend),
        "cpp_target": _choice(sink, doc, data, "cpp_target", CPP_TARGETS, config.cpp_target),
        "registration": _choice(
            sink, doc, data, "registration", REGISTRATIONS, config.registration
        ),
    }
    for key, default in (
        ("per_device", False),
        ("double_backward", True),
        ("pybind", config.pybind),
    ):
        value = data.get(key, default)
        if not isinstance(value, bool):
            sink.error(
                doc.line(key),
                f"{key} must be true or false, not {shown(value)}",
                f"write {key} = {'true' if not default else 'false'}",
            )
            value = default
        values[key] = value
    doc_text = data.get("doc", "")
    if isinstance(doc_text, str):
        doc_text = doc_text.replace("\r\n", "\n")
    control = isinstance(doc_text, str) and any(
        (ord(c) < 32 and c not in "\n\t") or c == "\x7f" for c in doc_text
    )
    if not isinstance(doc_text, str) or control:
        what = (
            "contains a control character"
            if isinstance(doc_text, str)
            else f"must be a string, not {shown(doc_text)}"
        )
        sink.error(
            doc.line("doc"), f"doc {what}", 'write doc = "One line." or doc = """ several lines """'
        )
        doc_text = ""
    values["doc"] = doc_text.strip()
    return mutates, values


def build_op_spec(doc: LoadedToml, config: ProjectConfig, op_names: frozenset[str]) -> OpSpec:
    """Validate one loaded spec; raises OpgenError listing every problem."""
    sink = DiagnosticSink(doc.path)
    data = doc.data
    check_keys(sink, doc, data, SPEC_KEYS, ())
    for required, example in (
        ("name", f'name = "{config.namespace}::my_op"'),
        ("schema", 'schema = "(Tensor x) -> Tensor"'),
    ):
        if required not in data:
            sink.error(1, f"missing required field {required!r}", f"add {example}")
    parsed_name = None
    if "name" in data and typed(sink, doc, data["name"], str, "name"):
        parsed_name = _parse_name(sink, doc, data["name"], config)
    mutates, values = _top_level(sink, doc, data, config)
    parsed = None
    if "schema" in data and typed(sink, doc, data["schema"], str, "schema"):
        parsed = _parse_schema(sink, doc, data["schema"], mutates)
    tables = {}
    for key in ("grad", "fake", "test", "bench"):
        value = data.get(key, {})
        if not isinstance(value, dict):
            sink.error(
                doc.line(key),
                f"{key} must be a table, not {shown(value)}",
                f"write [{key}] on its own line and the entries below it",
            )
            value = {}
        tables[key] = value
    if parsed is None:  # a missing or failed schema always recorded why
        raise OpgenError(sink.items)
    args, rets = parsed
    if rets and "fake" not in data:
        first = next((a.name for a in args if a.is_tensor), "x")
        sink.error(
            1,
            "missing required [fake] table: torch.compile needs the output rule",
            f'add\n[fake]\nlike = "{first}"   # or expr = "{first}.new_empty(...)"',
        )
    grads = _build_grads(sink, doc, tables["grad"], args, rets, op_names)
    fake = _build_fake(sink, doc, tables["fake"], args, rets, "fake" in data)
    test = build_test(sink, doc, tables["test"], args, _EXPR_GLOBALS)
    bench = build_bench(sink, doc, tables["bench"], args, _EXPR_GLOBALS)
    if (
        parsed_name is not None
        and parsed_name[2]
        and values.get("backend") == "python"
        and values.get("registration") == "custom_op"
    ):
        sink.error(
            doc.line("name"),
            "custom_op cannot define an overload",
            'set registration = "library" for this op, or drop the ".overload" from its name',
        )
    if sink.items or parsed_name is None:  # a bad name always recorded why
        raise OpgenError(sink.items)
    namespace, name, overload = parsed_name
    return OpSpec(
        path=doc.path,
        namespace=namespace,
        name=name,
        overload=overload,
        args=args,
        returns=rets,
        grads=grads,
        fake=fake,
        test=test,
        bench=bench,
        lines=dict(doc.lines),
        **values,
    )
