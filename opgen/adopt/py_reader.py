"""Read `torch.library` registrations out of Python modules with `ast`: never imported, never run.

Note [Reading Python registrations]
`opgen import` parses the user's modules; it never imports them (importing
runs their registrations, and code opgen was not asked to run). It reads
`@torch.library.custom_op` (its name, `mutates_args`, `device_types` and
`schema=`), `Library(ns, "DEF" | "FRAGMENT")` objects and their `.define` /
`.impl` calls, `torch.library.define` / `impl`, `register_fake`,
`register_autograd` and `@op.register_kernel`; `@torch.library.triton_op` as a
custom_op that infers its schema. An op registered by triton_op, or a custom_op
without `schema=` (its schema is then one triton_op infers too) whose function
launches a `@triton.jit` kernel of its module (through `torch.library.wrap_triton`
or `kernel[grid](...)`), becomes a Triton op (language "triton"). A `custom_op` without
`schema=` has its schema inferred from the annotations with the rules of
`torch.library.infer_schema` (opgen's test suite checks the two agree), so
that no torch import is needed. Functions are kept as source text: the
kernels are moved into the generated kernel files (Note [Keeping kernels]).
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from ..errors import Diagnostic
from .found import Found, FoundOp, PyFunction

__all__ = ["read_python", "infer_schema"]

_SCALARS = {
    "Tensor": "Tensor",
    "int": "SymInt",
    "float": "float",
    "bool": "bool",
    "str": "str",
    "Number": "Scalar",
    "dtype": "ScalarType",
    "device": "Device",
}
_LISTS = {"Tensor": "Tensor[]", "int": "SymInt[]", "float": "float[]", "bool": "bool[]"}


# decorators that make a module-level function a Triton kernel
_TRITON_DECORATORS = {"jit", "autotune", "heuristics"}


def _is_triton_decorator(node: ast.expr) -> bool:
    """`@triton.jit`, `@triton.autotune(...)`, `@triton.heuristics(...)`."""
    func = node.func if isinstance(node, ast.Call) else node
    return (
        isinstance(func, ast.Attribute)
        and func.attr in _TRITON_DECORATORS
        and _last(func.value) == "triton"
    )


class SchemaInferenceError(Exception):
    pass


def _last(node: ast.expr) -> str:
    """`torch.library.custom_op` -> "custom_op"; `Tensor` -> "Tensor"."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value  # a string annotation
    return ""


def _optional_of(node: ast.expr) -> ast.expr | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        for a, b in ((node.left, node.right), (node.right, node.left)):
            if isinstance(b, ast.Constant) and b.value is None:
                return a
    if isinstance(node, ast.Subscript) and _last(node.value) == "Optional":
        return node.slice
    return None


def _type(node: ast.expr | None) -> str:
    """The schema type of an annotation, as infer_schema spells it."""
    if node is None:
        raise SchemaInferenceError("a parameter has no type annotation")
    inner = _optional_of(node)
    if inner is not None:
        return _type(inner) + "?"
    if isinstance(node, ast.Subscript) and _last(node.value) in ("list", "List", "Sequence"):
        element = node.slice
        optional = _optional_of(element)
        if optional is not None and _last(optional) == "Tensor":
            return "Tensor?[]"
        if _last(element) in _LISTS:
            return _LISTS[_last(element)]
    name = _last(node)
    if name in _SCALARS:
        return _SCALARS[name]
    raise SchemaInferenceError(f"opgen cannot infer a schema type from {ast.unparse(node)!r}")


def _returns(node: ast.expr | None) -> str:
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return "()"
    if isinstance(node, ast.Subscript) and _last(node.value) in ("tuple", "Tuple"):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return "(" + ", ".join(_type(i) for i in items) + ")"
    return _type(node)


def _default(node: ast.expr) -> str:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return '"' + node.value + '"'
        return repr(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return "-" + _default(node.operand)
    raise SchemaInferenceError(f"opgen cannot write default {ast.unparse(node)!r} in a schema")


def infer_schema(fn: ast.FunctionDef, mutates: set[str]) -> str:
    """The schema torch.library.infer_schema gives `fn` (parsed, not imported)."""
    args = fn.args
    params = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(params) - len(args.defaults)) + list(
        args.defaults
    )
    parts: list[str] = []
    every = [(p, d, False) for p, d in zip(params, defaults, strict=True)]
    every += [(p, d, True) for p, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    star_written = False
    for index, (param, default, kwonly) in enumerate(every):
        kind = _type(param.annotation)
        if param.arg in mutates:
            if not kind.startswith("Tensor"):
                raise SchemaInferenceError(f"{param.arg} is in mutates_args but is not a Tensor")
            kind = f"Tensor(a{index}!){kind[len('Tensor'):]}"
        if kwonly and not star_written:
            parts.append("*")
            star_written = True
        text = f"{kind} {param.arg}"
        parts.append(text if default is None else f"{text}={_default(default)}")
    return f"({', '.join(parts)}) -> {_returns(fn.returns)}"


def _string_set(node: ast.expr | None) -> set[str] | None:
    if node is None:
        return set()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        return {v for v in values if isinstance(v, str)}
    return None


def _keyword(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


def _str(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


_DEVICES = {"cpu": "cpu", "cuda": "cuda", "CPU": "cpu", "CUDA": "cuda"}


class _Module:
    def __init__(self, path: Path, source: str, found: Found, problems: list[Diagnostic]) -> None:
        self.path, self.source, self.found, self.problems = path, source, found, problems
        self.ops: dict[str, FoundOp] = {}  # qualname -> op
        self.handles: dict[str, str] = {}  # a Python name bound to an op -> its qualname
        self.libraries: dict[str, str] = {}  # a Library variable -> its namespace
        self.functions: dict[str, PyFunction] = {}
        self.nodes: dict[str, ast.FunctionDef] = {}  # module-level functions by name
        self.jitted: set[str] = set()  # those decorated as Triton kernels

    def problem(self, line: int, message: str, hint: str, level: str = "warning") -> None:
        self.problems.append(Diagnostic(self.path, line, message, hint, level))

    def function(self, node: ast.FunctionDef) -> PyFunction:
        lines = self.source.splitlines()
        text = textwrap.dedent("\n".join(lines[node.lineno - 1 : node.end_lineno]))
        params = tuple(
            a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        )
        used = {
            n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        helpers = tuple(sorted((used & self.defined) - set(params) - {node.name}))
        return PyFunction(
            node.name, params, text + "\n", self.imports, self.path, node.lineno, helpers
        )

    def op(self, qualname: str, schema: str, line: int) -> FoundOp | None:
        namespace, sep, name = qualname.partition("::")
        if not sep:
            self.problem(
                line, f"op name {qualname!r} has no namespace", "name it 'namespace::op'", "error"
            )
            return None
        op = FoundOp(namespace, name, schema, self.path, line, "python")
        self.ops[qualname] = op
        self.found.ops.append(op)
        return op

    def read(self) -> None:
        try:
            tree = ast.parse(self.source, str(self.path))
        except SyntaxError as exc:
            self.problem(
                exc.lineno or 1,
                f"cannot parse this module: {exc.msg}",
                "fix the syntax or leave the file out",
                "error",
            )
            return
        self.imports = tuple(
            ast.get_source_segment(self.source, n) or ""
            for n in tree.body
            if isinstance(n, (ast.Import, ast.ImportFrom))
        )
        self.defined = {
            target.id
            for node in tree.body
            for target in (
                node.targets
                if isinstance(node, ast.Assign)
                else (
                    [ast.Name(node.name)]
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                    else []
                )
            )
            if isinstance(target, ast.Name)
        }
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                self.functions[node.name] = self.function(node)
                self.nodes[node.name] = node
                if any(_is_triton_decorator(d) for d in node.decorator_list):
                    self.jitted.add(node.name)
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                self._library(node)
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    if isinstance(decorator, (ast.Call, ast.Attribute)):
                        self._decorator(decorator, node)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                self._call(node.value)

    def _library(self, node: ast.Assign) -> None:
        call = node.value
        assert isinstance(call, ast.Call)
        if _last(call.func) == "Library" and isinstance(node.targets[0], ast.Name):
            namespace = _str(_keyword(call, "ns", 0))
            if namespace is not None:
                self.libraries[node.targets[0].id] = namespace

    def _qualname(self, node: ast.expr | None) -> str | None:
        """The op a registration names: "ns::name", a custom_op handle, or None."""
        text = _str(node)
        if text is not None:
            return text
        if isinstance(node, ast.Name):
            return self.handles.get(node.id)
        return None

    def _decorator(self, decorator: ast.expr, fn: ast.FunctionDef) -> None:
        call = decorator if isinstance(decorator, ast.Call) else None
        func = call.func if call else decorator
        kind = _last(func)
        target = func.value if isinstance(func, ast.Attribute) else None
        handle = self.handles.get(target.id) if isinstance(target, ast.Name) else None
        if kind in ("custom_op", "triton_op") and call is not None:
            self._custom_op(call, fn, triton=kind == "triton_op")
        elif kind == "register_fake":
            qualname = handle or (self._qualname(call.args[0]) if call and call.args else None)
            self._attach(qualname, "fake", fn, decorator.lineno)
        elif kind == "register_kernel" and call is not None:
            device = _str(call.args[0]) if call.args else None
            self._attach(handle, _DEVICES.get(device or "", ""), fn, decorator.lineno)
        elif kind == "impl" and call is not None and handle is None:
            self._impl(call.args, fn, decorator.lineno, ast.Name(fn.name))

    def _launches_triton(self, fn: ast.FunctionDef) -> bool:
        """Whether `fn` (or a function of this module it calls) launches a Triton kernel."""
        seen: set[str] = set()
        todo = [fn]
        while todo:
            node = todo.pop()
            for inner in ast.walk(node):
                if not isinstance(inner, ast.Call):
                    continue
                if _last(inner.func) == "wrap_triton":
                    return True
                func = inner.func
                if isinstance(func, ast.Subscript) and _last(func.value) in self.jitted:
                    return True
                name = _last(func)
                if name in self.nodes and name not in seen:
                    seen.add(name)
                    todo.append(self.nodes[name])
        return False

    def _custom_op(self, call: ast.Call, fn: ast.FunctionDef, triton: bool = False) -> None:
        qualname = _str(_keyword(call, "name", 0))
        mutates = _string_set(_keyword(call, "mutates_args", 1))
        if qualname is None or mutates is None:
            self.problem(
                call.lineno,
                "cannot read this custom_op: its name and mutates_args must be literals",
                "write them as string literals; this op was skipped",
                "error",
            )
            return
        schema = _str(_keyword(call, "schema"))
        inferred = schema is None
        if schema is None:
            try:
                schema = infer_schema(fn, mutates)
            except SchemaInferenceError as exc:
                self.problem(
                    fn.lineno,
                    f"cannot infer the schema of {qualname}: {exc}",
                    'pass schema="(...) -> ..." to custom_op; this op was skipped',
                    "error",
                )
                return
        op = self.op(qualname, schema, call.lineno)
        if op is None:
            return
        if triton or (inferred and self._launches_triton(fn)):
            op.language = "triton"
        self.handles[fn.name] = qualname
        devices = _string_set(_keyword(call, "device_types"))
        kernel = self.functions[fn.name]
        for device in sorted({_DEVICES.get(d, d) for d in devices or ()} or {"cpu"}):
            op.python_kernels[device] = kernel

    def _op(self, qualname: str | None) -> FoundOp | None:
        """The op `qualname` names: this module's, or one an earlier file defined."""
        if qualname in self.ops:
            return self.ops[qualname]
        return next((o for o in self.found.ops if o.qualname == qualname and o.schema), None)

    def _attach(self, qualname: str | None, role: str, fn: ast.FunctionDef, line: int) -> None:
        op = self._op(qualname)
        if op is None:
            self.problem(
                line,
                "this registration names an op that no file read defines",
                "pass the file that defines it too",
                "warning",
            )
            return
        function = self.function(fn)  # by node: several functions may be named `_`
        if role == "fake":
            op.fake = function
        elif role in ("cpu", "cuda"):
            op.python_kernels[role] = function
        else:
            self.problem(
                line,
                f"kernels for device {role!r} are not imported",
                "opgen imports cpu and cuda kernels",
                "warning",
            )

    def _call(self, call: ast.Call) -> None:
        kind = _last(call.func)
        target = call.func.value if isinstance(call.func, ast.Attribute) else None
        library = self.libraries.get(target.id) if isinstance(target, ast.Name) else None
        handle = self.handles.get(target.id) if isinstance(target, ast.Name) else None
        if kind == "define" and library is not None:
            schema = _str(call.args[0]) if call.args else None
            if schema is None or "(" not in schema:
                self.problem(
                    call.lineno,
                    "cannot read this define's schema: it is not a string literal",
                    "write the schema as a string literal; this op was skipped",
                    "error",
                )
                return
            name, paren, rest = schema.partition("(")
            self.op(f"{library}::{name.strip()}", paren + rest, call.lineno)
        elif kind == "define" and _last(call.func) == "define" and len(call.args) >= 2:
            qualname, schema = _str(call.args[0]), _str(call.args[1])
            if qualname and schema:
                self.op(qualname, schema, call.lineno)
        elif kind == "impl" and library is not None and len(call.args) >= 2:
            impl_name = _str(call.args[0])
            self._impl(
                [ast.Constant(f"{library}::{impl_name}"), *call.args[2:]],
                None,
                call.lineno,
                call.args[1],
            )
        elif kind == "register_autograd":
            qualname = handle or (self._qualname(call.args[0]) if call.args else None)
            functions = [a for a in call.args if isinstance(a, ast.Name)] + [
                k.value for k in call.keywords if isinstance(k.value, ast.Name)
            ]
            op = self._op(qualname)
            if op is not None:
                op.autograd.extend(
                    self.functions[f.id] for f in functions if f.id in self.functions
                )
        elif kind == "register_fake" and call.args:
            qualname = self._qualname(call.args[0])
            fake = call.args[1] if len(call.args) > 1 else None
            if isinstance(fake, ast.Name) and fake.id in self.functions:
                op = self._op(qualname)
                if op is not None:
                    op.fake = self.functions[fake.id]

    def _impl(
        self, args: list[ast.expr], fn: ast.FunctionDef | None, line: int, kernel: ast.expr
    ) -> None:
        qualname = _str(args[0]) if args else None
        device = _str(args[-1]) if len(args) > 1 else "CompositeExplicitAutograd"
        if qualname is not None and "::" not in qualname and args and isinstance(args[0], ast.Name):
            qualname = f"{self.libraries.get(args[0].id, '')}::{qualname}"
        if len(args) >= 3 and isinstance(args[0], ast.Name):  # impl(lib, "name", "CPU")
            qualname = f"{self.libraries.get(args[0].id, '')}::{_str(args[1])}"
        op = self._op(qualname)
        name = kernel.id if isinstance(kernel, ast.Name) else None
        if op is None or name not in self.functions:
            self.problem(
                line,
                "cannot tell which op or function this impl registers",
                "register a named function for an op defined in the same module",
                "warning",
            )
            return
        devices = {"CPU": ["cpu"], "cpu": ["cpu"], "CUDA": ["cuda"], "cuda": ["cuda"]}.get(
            device or "", ["cpu", "cuda"]
        )
        for d in devices:
            op.python_kernels[d] = self.functions[name]


def read_python(path: Path, source: str, found: Found, problems: list[Diagnostic]) -> None:
    """Add the ops `source` (the text of module `path`) registers to `found`."""
    _Module(path, source, found, problems).read()
