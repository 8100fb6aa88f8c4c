"""Turn a loaded op spec into an `OpSpec`, reporting every problem at its line."""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import DiagnosticSink
from .expr import SAFE_BUILTINS, ExprProblem, check_expression
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
    Sample,
    TensorSample,
    TestSpec,
)
from .names import identifier_problem
from .types import DTYPES, SUPPORTED_ARG_TYPES, SUPPORTED_RETURN_TYPES, default_problem, normalize_type

__all__ = ["build_op_spec", "SPEC_KEYS"]

SPEC_KEYS = (
    "name schema doc devices backend mutates grad fake test per_device double_backward "
    "cpp_target registration pybind".split()
)
_TEST_KEYS = ("samples", "reference", "dtypes", "atol", "rtol")
_FAKE_KEYS = ("like", "expr", "checks")
_TENSOR_SAMPLE_KEYS = ("shape", "dtype", "noncontiguous", "low", "high", "requires_grad")
_RESERVED_ARG_NAMES = frozenset({"grad", "grads", "result", "torch", "math", "F", "ctx", "keyword_only_inputs"})
_EXPR_GLOBALS = ("torch", "math", "F", *SAFE_BUILTINS)
_SCHEMA_PLACEHOLDER = "opgen_op"


def _closest(word: str, choices: tuple[str, ...] | list[str]) -> str:
    import difflib

    match = difflib.get_close_matches(word, choices, n=1)
    return f"did you mean {match[0]!r}?" if match else f"known keys: {', '.join(choices)}"


def _check_keys(sink: DiagnosticSink, doc: LoadedToml, table: dict, allowed, prefix: tuple) -> None:
    for key in table:
        if key not in allowed:
            where = ".".join(str(p) for p in prefix + (key,))
            sink.error(doc.line(*prefix, key), f"unknown key {where!r}", _closest(key, list(allowed)))


def _typed(sink, doc, value, kind, *path) -> bool:
    if isinstance(value, kind) and not (kind is not bool and isinstance(value, bool) and kind is int):
        return True
    names = {str: "a string", bool: "true or false", list: "a list", dict: "a table", int: "an integer"}
    sink.error(doc.line(*path), f"{'.'.join(map(str, path))} must be {names.get(kind, kind)}", f"got {value!r}")
    return False


def _parse_schema(sink: DiagnosticSink, doc: LoadedToml, text: str, mutates: list[str]):
    line = doc.line("schema")
    if not text.lstrip().startswith("("):
        sink.error(line, "schema must start with the argument list", 'write it as "(Tensor x) -> Tensor" (no op name)')
        return None
    if any(ord(c) < 32 for c in text):
        sink.error(line, "schema contains control characters", "write the schema on one line")
        return None
    from torchgen.model import FunctionSchema

    try:
        schema = FunctionSchema.parse(_SCHEMA_PLACEHOLDER + text.strip())
    except BaseException as exc:  # torchgen reports with assert and RuntimeError alike
        message = str(exc).replace(_SCHEMA_PLACEHOLDER, "").strip() or type(exc).__name__
        sink.error(line, f"invalid schema: {message}", 'see PyTorch\'s schema language, e.g. "(Tensor x, float alpha=1.0) -> Tensor"')
        return None
    args: list[Arg] = []
    ok = True
    positional = {a.name for a in schema.arguments.flat_positional}
    seen: set[str] = set()
    for a in schema.arguments.flat_all:
        problem = identifier_problem(a.name, "argument name")
        if problem:
            sink.error(line, problem, "rename the argument")
            ok = False
        elif a.name.startswith("_"):
            sink.error(line, f"argument name {a.name!r} starts with an underscore, which opgen keeps for generated locals", "rename the argument")
            ok = False
        elif a.name in _RESERVED_ARG_NAMES:
            sink.error(line, f"argument name {a.name!r} is reserved for gradient formulas", "rename the argument")
            ok = False
        if a.name in seen:
            sink.error(line, f"argument {a.name!r} appears twice in the schema", "give each argument its own name")
            ok = False
        seen.add(a.name)
        type_text = normalize_type(str(a.type))
        if type_text not in SUPPORTED_ARG_TYPES:
            sink.error(line, f"argument {a.name!r} has unsupported type {type_text}", f"supported: {', '.join(sorted(SUPPORTED_ARG_TYPES))}")
            ok = False
        annotated_write = a.annotation is not None and a.annotation.is_write
        if a.annotation is not None and not a.annotation.is_write:
            sink.error(line, f"argument {a.name!r} has a read-only alias annotation", "custom ops cannot return views; remove the annotation")
            ok = False
        if annotated_write and a.name not in mutates:
            sink.error(line, f"argument {a.name!r} is annotated as mutated but is not in `mutates`", f'add it: mutates = ["{a.name}"], or remove the (a!) annotation')
            ok = False
        if a.default is not None and type_text in SUPPORTED_ARG_TYPES:
            problem = default_problem(type_text, a.default)
            if problem:
                sink.error(line, f"argument {a.name!r}: {problem}", "fix the default value")
                ok = False
        args.append(Arg(a.name, str(a.type), a.default, a.name not in positional, a.name in mutates))
    rets: list[Ret] = []
    for r in schema.returns:
        if r.annotation is not None:
            sink.error(line, "returns cannot carry alias annotations", "return a new tensor, or return () and mutate an argument")
            ok = False
        if str(r.type) not in SUPPORTED_RETURN_TYPES:
            sink.error(line, f"return type {r.type} is not supported", "return Tensor, Tensor[] or a tuple of Tensors")
            ok = False
        rets.append(Ret(r.name, str(r.type)))
    for name in mutates:
        arg = next((a for a in args if a.name == name), None)
        if arg is None:
            sink.error(doc.line("mutates"), f"mutated argument {name!r} is not in the schema", f"arguments: {', '.join(a.name for a in args) or 'none'}")
            ok = False
        elif not (arg.is_tensor or arg.is_tensor_list):
            sink.error(doc.line("mutates"), f"mutated argument {name!r} is not a tensor", "only tensors can be mutated")
            ok = False
    return (tuple(args), tuple(rets)) if ok else None


def _formula_names(args: tuple[Arg, ...], rets: tuple[Ret, ...], op_names: frozenset[str]) -> set[str]:
    names = {a.name for a in args} | set(_EXPR_GLOBALS) | set(op_names) | {"grads"}
    if len(rets) == 1:
        names |= {"grad", "result"}
    names |= {f"result{i}" for i in range(len(rets))}
    return names


def _build_grads(sink, doc, table, args, rets, op_names) -> tuple[GradFormula, ...]:
    formulas: list[GradFormula] = []
    if table and not rets:
        sink.error(doc.line("grad"), "this op returns nothing, so it has no gradients", "remove the [grad] table")
        return ()
    allowed = _formula_names(args, rets, op_names)
    taken: set[str] = set()
    by_name = {a.name: a for a in args}
    for key, expr in table.items():
        line = doc.line("grad", key)
        targets = tuple(t.strip() for t in key.split(","))
        for target in targets:
            arg = by_name.get(target)
            if arg is None:
                sink.error(line, f"gradient for unknown input {target!r}", f"inputs: {', '.join(by_name)}")
            elif not arg.differentiable:
                sink.error(line, f"input {target!r} is a {arg.type}, not a tensor: it has no gradient", "remove this formula")
            elif arg.mutated:
                sink.error(line, f"input {target!r} is mutated; gradients through mutated inputs are not supported", "remove this formula")
            elif target in taken:
                sink.error(line, f"input {target!r} has two gradient formulas", "keep one")
            taken.add(target)
        if not isinstance(expr, str):
            sink.error(line, f"gradient formula for {key!r} must be a string", 'e.g. x = "grad * x.cos()"')
            continue
        try:
            check_expression(expr, allowed, f"gradient formula for {key!r}")
        except ExprProblem as exc:
            sink.error(line, exc.message, exc.hint)
            continue
        formulas.append(GradFormula(targets, expr.strip(), line))
    return tuple(formulas)


def _string_list(sink, doc, value, *path) -> tuple[str, ...] | None:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    sink.error(doc.line(*path), f"{'.'.join(path)} must be a string or a list of strings", f"got {value!r}")
    return None


def _build_fake(sink, doc, table, args, rets) -> FakeRule:
    _check_keys(sink, doc, table, _FAKE_KEYS, ("fake",))
    allowed = {a.name for a in args} | set(_EXPR_GLOBALS)
    checks = _string_list(sink, doc, table["checks"], "fake", "checks") if "checks" in table else ()
    for check in checks or ():
        try:
            check_expression(check, allowed, "fake check")
        except ExprProblem as exc:
            sink.error(doc.line("fake", "checks"), exc.message, exc.hint)
    if not rets:
        if "like" in table or "expr" in table:
            sink.error(doc.line("fake"), "this op returns nothing; its fake kernel needs no output rule", "remove fake.like / fake.expr")
        return FakeRule((), tuple(checks or ()))
    if ("like" in table) == ("expr" in table):
        sink.error(doc.line("fake"), "the fake kernel needs exactly one of fake.like or fake.expr", 'e.g. [fake] like = "x" (output shaped like x) or expr = "x.new_empty(x.shape[0], w.shape[1])"')
        return FakeRule(())
    outputs: list[str] = []
    if "like" in table:
        names = _string_list(sink, doc, table["like"], "fake", "like") or ()
        tensors = [a.name for a in args if a.is_tensor]
        for name in names:
            if name not in tensors:
                sink.error(doc.line("fake", "like"), f"fake.like names {name!r}, which is not a tensor input", f"tensor inputs: {', '.join(tensors) or 'none'}")
            outputs.append(f"{name}.new_empty({name}.shape)")
    else:
        exprs = _string_list(sink, doc, table["expr"], "fake", "expr") or ()
        for text in exprs:
            try:
                check_expression(text, allowed, "fake.expr")
            except ExprProblem as exc:
                sink.error(doc.line("fake", "expr"), exc.message, exc.hint)
            outputs.append(text.strip())
    if outputs and len(outputs) != len(rets):
        sink.error(doc.line("fake"), f"the fake rule gives {len(outputs)} output(s) but the schema returns {len(rets)}", "give one rule per return, as a list")
    return FakeRule(tuple(outputs), tuple(checks or ()))


def _tensor_sample(sink, doc, value, path) -> TensorSample | None:
    _check_keys(sink, doc, value, _TENSOR_SAMPLE_KEYS, path)
    shape = value.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= 1 << 20 for d in shape):
        sink.error(doc.line(*path, "shape"), "a tensor sample needs shape = [d0, d1, ...] of non-negative integers", "e.g. x = {shape = [3, 4]}")
        return None
    if math.prod(shape) > 1 << 24:
        sink.error(doc.line(*path, "shape"), f"sample shape {shape} is too large for a test", "keep test samples under 16M elements")
        return None
    dtype = value.get("dtype")
    if dtype is not None and dtype not in DTYPES:
        sink.error(doc.line(*path, "dtype"), f"unknown dtype {dtype!r}", f"one of: {', '.join(DTYPES)}")
    for key in ("noncontiguous", "requires_grad"):
        if key in value and not isinstance(value[key], bool):
            sink.error(doc.line(*path, key), f"{key} must be true or false", "")
    for key in ("low", "high"):
        if key in value and (isinstance(value[key], bool) or not isinstance(value[key], (int, float))):
            sink.error(doc.line(*path, key), f"{key} must be a number", "")
    return TensorSample(
        tuple(shape), dtype, bool(value.get("noncontiguous", False)), value.get("low"), value.get("high"), bool(value.get("requires_grad", True))
    )


def _sample_value(sink, doc, arg: Arg, value, path):
    if arg.is_tensor:
        if isinstance(value, dict):
            return _tensor_sample(sink, doc, value, path)
        sink.error(doc.line(*path), f"sample for tensor {arg.name!r} must be a table such as {{shape = [3, 4]}}", "")
        return None
    if arg.is_tensor_list:
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return tuple(_tensor_sample(sink, doc, v, path) for v in value)
        sink.error(doc.line(*path), f"sample for {arg.name!r} must be a list of tensor tables", "")
        return None
    base = normalize_type(arg.type).rstrip("?")
    scalar_ok = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "SymInt": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "Scalar": lambda v: isinstance(v, (int, float)),
        "bool": lambda v: isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "ScalarType": lambda v: v in DTYPES,
        "Device": lambda v: v in ("cpu", "cuda"),
    }
    if base.endswith("[]"):
        check = scalar_ok[base[:-2]]
        good = isinstance(value, list) and all(check(v) for v in value)
    else:
        good = scalar_ok[base](value)
    if not good:
        sink.error(doc.line(*path), f"sample value {value!r} is not a valid {arg.type} for {arg.name!r}", "")
        return None
    return tuple(value) if isinstance(value, list) else value


def _build_test(sink, doc, table, args) -> TestSpec:
    _check_keys(sink, doc, table, _TEST_KEYS, ("test",))
    raw_samples = table.get("samples")
    samples: list[Sample] = []
    if not isinstance(raw_samples, list) or not raw_samples or not all(isinstance(s, dict) for s in raw_samples):
        sink.error(doc.line("test", "samples"), "missing required [[test.samples]]: at least one sample input", "add\n  [[test.samples]]\n  x = {shape = [3, 4]}")
        raw_samples = []
    by_name = {a.name: a for a in args}
    for index, raw in enumerate(raw_samples):
        path = ("test", "samples", index)
        values: list[tuple[str, Any]] = []
        for key in raw:
            if key not in by_name:
                sink.error(doc.line(*path, key), f"sample names unknown argument {key!r}", _closest(key, list(by_name)))
        for arg in args:
            if arg.name in raw:
                values.append((arg.name, _sample_value(sink, doc, arg, raw[arg.name], path + (arg.name,))))
            elif arg.default is None and not arg.type.endswith("?"):
                sink.error(doc.line(*path), f"sample {index + 1} has no value for required argument {arg.name!r}", f"add {arg.name} = ... to this sample")
        samples.append(Sample(tuple(values), doc.line(*path)))
    reference = table.get("reference")
    if reference is not None:
        if _typed(sink, doc, reference, str, "test", "reference"):
            try:
                check_expression(reference, {a.name for a in args} | set(_EXPR_GLOBALS), "test.reference")
            except ExprProblem as exc:
                sink.error(doc.line("test", "reference"), exc.message, exc.hint)
    dtypes = table.get("dtypes", ["float32"])
    if not isinstance(dtypes, list) or not dtypes or any(d not in DTYPES for d in dtypes):
        sink.error(doc.line("test", "dtypes"), f"test.dtypes must be a non-empty list of dtype names", f"one of: {', '.join(DTYPES)}")
        dtypes = ["float32"]
    tolerances = {}
    for key in ("atol", "rtol"):
        value = table.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            sink.error(doc.line("test", key), f"test.{key} must be a non-negative number", "")
            value = None
        tolerances[key] = value
    return TestSpec(tuple(samples), reference, tuple(dtypes), tolerances["atol"], tolerances["rtol"])


def _choice(sink, doc, data, key, choices, default):
    value = data.get(key, default)
    if value not in choices:
        sink.error(doc.line(key), f"{key} must be one of {', '.join(map(repr, choices))}", f"got {value!r}")
        return default
    return value


def _parse_name(sink, doc, name, config: ProjectConfig):
    line = doc.line("name")
    match = re.fullmatch(r"([^:]*)::([^:.]*)(?:\.([^:.]*))?", name)
    if not match:
        sink.error(line, f"op name {name!r} must look like 'namespace::op' or 'namespace::op.overload'", f'e.g. name = "{config.namespace}::my_op"')
        return None
    namespace, op, overload = match.group(1), match.group(2), match.group(3) or ""
    ok = True
    for value, what in ((namespace, "namespace"), (op, "op name")) + (((overload, "overload name"),) if match.group(3) is not None else ()):
        problem = identifier_problem(value, what)
        if problem:
            sink.error(line, problem, "use a short snake_case identifier")
            ok = False
    if ok and namespace != config.namespace:
        sink.error(line, f"namespace {namespace!r} is not this project's namespace {config.namespace!r}", f'write name = "{config.namespace}::{op}" (the namespace is set in opgen.toml)')
        ok = False
    return (namespace, op, overload) if ok else None


def build_op_spec(doc: LoadedToml, config: ProjectConfig, op_names: frozenset[str]) -> OpSpec:
    """Validate one loaded spec; raises OpgenError listing every problem."""
    sink = DiagnosticSink(doc.path)
    data = doc.data
    _check_keys(sink, doc, data, SPEC_KEYS, ())
    for required in ("name", "schema"):
        if required not in data:
            sink.error(1, f"missing required field {required!r}", 'add e.g. name = "ns::op" and schema = "(Tensor x) -> Tensor"')
    parsed_name = None
    if "name" in data and _typed(sink, doc, data["name"], str, "name"):
        parsed_name = _parse_name(sink, doc, data["name"], config)
    mutates = data.get("mutates", [])
    if not isinstance(mutates, list) or not all(isinstance(m, str) for m in mutates):
        sink.error(doc.line("mutates"), "mutates must be a list of argument names", 'e.g. mutates = ["out"]')
        mutates = []
    parsed = None
    if "schema" in data and _typed(sink, doc, data["schema"], str, "schema"):
        parsed = _parse_schema(sink, doc, data["schema"], mutates)
    devices = data.get("devices", ["cpu"])
    if not isinstance(devices, list) or not devices or any(d not in DEVICES for d in devices) or len(set(devices)) != len(devices):
        sink.error(doc.line("devices"), "devices must be a non-empty list drawn from 'cpu' and 'cuda'", f"got {devices!r}")
        devices = ["cpu"]
    backend = _choice(sink, doc, data, "backend", BACKENDS, config.backend)
    cpp_target = _choice(sink, doc, data, "cpp_target", CPP_TARGETS, config.cpp_target)
    registration = _choice(sink, doc, data, "registration", REGISTRATIONS, config.registration)
    flags = {}
    for key, default in (("per_device", False), ("double_backward", True), ("pybind", config.pybind)):
        value = data.get(key, default)
        if not isinstance(value, bool):
            sink.error(doc.line(key), f"{key} must be true or false", f"got {value!r}")
            value = default
        flags[key] = value
    doc_text = data.get("doc", "")
    if not isinstance(doc_text, str) or "\x00" in doc_text:
        sink.error(doc.line("doc"), "doc must be a string", "")
        doc_text = ""
    tables = {}
    for key in ("grad", "fake", "test"):
        value = data.get(key, {})
        if not isinstance(value, dict):
            sink.error(doc.line(key), f"{key} must be a table ([{key}])", "")
            value = {}
        tables[key] = value
    if parsed is None or parsed_name is None:
        sink.raise_if_any()  # a failed name or schema always recorded why
    args, rets = parsed
    if rets and "fake" not in data:
        sink.error(1, "missing required [fake] table: torch.compile needs the output rule", '[fake]\nlike = "x"   # or expr = "x.new_empty(...)"')
    grads = _build_grads(sink, doc, tables["grad"], args, rets, op_names)
    fake = _build_fake(sink, doc, tables["fake"], args, rets)
    test = _build_test(sink, doc, tables["test"], args)
    sink.raise_if_any()
    namespace, name, overload = parsed_name
    return OpSpec(
        path=doc.path,
        namespace=namespace,
        name=name,
        overload=overload,
        args=args,
        returns=rets,
        devices=tuple(devices),
        backend=backend,
        doc=doc_text.strip(),
        grads=grads,
        fake=fake,
        test=test,
        per_device=flags["per_device"],
        double_backward=flags["double_backward"],
        cpp_target=cpp_target,
        registration=registration,
        pybind=flags["pybind"],
        lines=dict(doc.lines),
    )
