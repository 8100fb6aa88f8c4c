"""Turn a loaded op spec into an `OpSpec`, reporting every problem at its line."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeVar

from ..errors import DiagnosticSink, OpgenError
from .backends import backend_traits
from .bench import build_bench
from .build_settings import build_settings
from .fields import check_keys, shown, typed
from .formulas import EXPR_GLOBALS, build_fake, build_grads
from .load import LoadedToml
from .model import (
    DEVICES,
    TRITON_CPU_CHOICES,
    Arg,
    Backend,
    BuildSettings,
    CppTarget,
    OpSpec,
    ProjectConfig,
    Registration,
    Ret,
    TritonCpu,
    VmapRule,
)
from .names import PACKAGE_MODULES, RESERVED_NAMESPACES, RESERVED_OP_NAMES, identifier_problem
from .registration import custom_op_refusal, derived_tags, triton_op_refusal
from .samples import build_test
from .schema import parse_schema
from .sharding import build_sharding
from .transforms import build_autocast, build_jvp, build_tags, build_vmap

__all__ = ["build_op_spec", "SPEC_KEYS"]

SPEC_KEYS = (
    "name schema doc devices backend mutates grad fake test per_device double_backward "
    "cpp_target registration pybind bench jvp vmap vmap_leading autocast tags sharding build "
    "strided_writes triton".split()
)
_NAME_HINT = "use a short snake_case identifier"
_Choice = TypeVar("_Choice", bound=StrEnum)


def _choice(
    sink: DiagnosticSink,
    doc: LoadedToml,
    data: dict[str, Any],
    key: str,
    choices: type[_Choice],
    default: _Choice,
) -> _Choice:
    """The member of `choices` (Note [Choice enums]) the spec names at `key`, else `default`."""
    value = data.get(key, default)
    allowed = tuple(c.value for c in choices)
    if not isinstance(value, str) or value not in allowed:
        sink.error(
            doc.line(key), f"{key} is {shown(value)}", f"use one of {', '.join(map(repr, allowed))}"
        )
        return default
    return choices(value)


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
    if ok and op in PACKAGE_MODULES:
        sink.error(
            line,
            f"op name {op!r} is taken: the package has a module {config.package}.{op}",
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
) -> tuple[list[str] | None, dict[str, Any]]:
    """Everything outside [grad], [fake] and [test]; problems go to `sink`."""
    mutates = data.get("mutates")
    if mutates is not None and (
        not isinstance(mutates, list) or not all(isinstance(m, str) for m in mutates)
    ):
        sink.error(
            doc.line("mutates"),
            f"mutates must be a list of argument names, not {shown(mutates)}",
            'e.g. mutates = ["out"], or leave it out: opgen reads it from the schema\'s annotations',
        )
        mutates = None
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
        "backend": _choice(sink, doc, data, "backend", Backend, config.backend),
        "cpp_target": _choice(sink, doc, data, "cpp_target", CppTarget, config.cpp_target),
        "registration": _choice(sink, doc, data, "registration", Registration, config.registration),
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


def _registration(
    sink: DiagnosticSink,
    doc: LoadedToml,
    data: dict[str, Any],
    values: dict[str, Any],
    args: tuple[Arg, ...],
    rets: tuple[Ret, ...],
    name: tuple[str, str, str] | None,
) -> Registration:
    """How a Python op registers: `custom_op` unless its schema needs `Library`.

    A schema custom_op cannot register switches the op to `library` unless the
    spec itself asks for custom_op (then it is an error saying why).
    """
    why = custom_op_refusal(args, rets, name[2] if name is not None else "")
    registration: Registration = values["registration"]
    if why is None or registration == Registration.LIBRARY:
        return registration
    if data.get("registration") == "custom_op":
        sink.error(
            doc.line("registration"),
            f"custom_op cannot register this op: {why}",
            'set registration = "library" (or remove the line: opgen then picks library itself)',
        )
    return Registration.LIBRARY


def _factory_devices(sink: DiagnosticSink, doc: LoadedToml, values: dict[str, Any]) -> None:
    """An op with no tensor argument has one kernel for every device: torch has no tensor to
    pick a device's kernel by, so it is registered for CompositeExplicitAutograd."""
    where = "a C++ op's kernel file" if backend_traits(values["backend"]).compiles_cpp else None
    if values["per_device"]:
        sink.error(
            doc.line("per_device"),
            "per_device needs a tensor argument to dispatch on: this op takes none",
            "remove per_device: one kernel serves every device (place the outputs by a Device"
            " argument)",
        )
    elif where and values["devices"] != ("cpu",):
        sink.error(
            doc.line("devices"),
            "this op takes no tensor, so one kernel serves every device (registered for"
            " CompositeExplicitAutograd): its C++ kernel is the one in csrc/cpu/",
            'set devices = ["cpu"] and create the outputs on the device its Device argument names',
        )


def _op_build(
    sink: DiagnosticSink, doc: LoadedToml, table: Any, config: ProjectConfig, backend: str
) -> BuildSettings:
    """An op's `[build]` table: C++ ops only (Note [Build settings])."""
    traits = backend_traits(backend)
    if not traits.compiles_cpp:
        sink.error(
            doc.line("build"),
            f"[build] adds to the compile of C++ ops, and this op is a {traits.label} op",
            'remove [build], or set backend = "cpp"',
        )
        return BuildSettings()
    return build_settings(sink, doc, table, config.root, per_op=True)


def _strided_writes(
    sink: DiagnosticSink,
    doc: LoadedToml,
    value: Any,
    args: tuple[Arg, ...],
    values: dict[str, Any],
) -> tuple[str, ...]:
    """`strided_writes`: the written tensors whose C++ kernels handle any strides.

    The fenced checks of a C++ kernel stub refuse a written `Tensor` that is not
    contiguous (a kernel indexing it as a flat array would write the wrong
    elements); a kernel that walks its strides, or writes through a copy, names
    it here and the check is left out of the fence. `true` names them all.
    """
    line = doc.line("strided_writes")
    written = [a.name for a in args if a.mutated and a.family == "Tensor"]
    traits = backend_traits(values["backend"])
    if not traits.compiles_cpp:
        sink.error(
            line,
            "strided_writes drops a check of the C++ kernel stubs, "
            f"and this op is a {traits.label} op",
            f"remove strided_writes (a {traits.label} kernel gets no such check)",
        )
        return ()
    if value is True:
        return tuple(written)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        sink.error(
            line,
            f"strided_writes must be true or a list of written arguments, not {shown(value)}",
            f"e.g. strided_writes = {list(written[:1]) or ['out']!r}".replace("'", '"'),
        )
        return ()
    for name in value:
        if name not in written:
            sink.error(
                line,
                f"strided_writes names {name!r}, which is not a Tensor the op writes",
                f"written tensors: {', '.join(written) or 'none'}",
            )
    return tuple(dict.fromkeys(value))


def _triton(
    sink: DiagnosticSink,
    doc: LoadedToml,
    data: dict[str, Any],
    args: tuple[Arg, ...],
    rets: tuple[Ret, ...],
    name: tuple[str, str, str] | None,
) -> TritonCpu:
    """A Triton op's checks: a schema triton_op registers exactly (Note [Schemas of Triton
    ops]), no `registration`, and `[triton] cpu`; returns the `cpu` choice."""
    why = triton_op_refusal(args, rets, name[2] if name is not None else "")
    if why is not None:
        sink.error(
            doc.line("schema"),
            f"torch.library.triton_op cannot register this schema: {why}",
            'change the schema, or set backend = "python" and launch the Triton kernel from '
            "the Python kernel (a custom_op registers any schema)",
        )
    for key, why in (
        ("registration", "a Triton op is registered by torch.library.triton_op"),
        ("per_device", "a Triton op has one launcher, which the kernel's device runs"),
    ):
        if key in data:
            sink.error(doc.line(key), f"{why}; {key} does not apply", f"remove {key}")
    table = data.get("triton", {})
    if not isinstance(table, dict):
        sink.error(
            doc.line("triton"),
            f"triton must be a table, not {shown(table)}",
            'write [triton] on its own line and cpu = "error" or cpu = "reference" below it',
        )
        return TritonCpu.ERROR
    check_keys(sink, doc, table, ("cpu",), ("triton",))
    cpu = table.get("cpu", "error")
    if not isinstance(cpu, str) or cpu not in TRITON_CPU_CHOICES:
        sink.error(
            doc.line("triton", "cpu"),
            f"[triton] cpu is {shown(cpu)}",
            'use "error" (CPU tensors raise unless Triton\'s interpreter runs) or "reference" '
            "(CPU tensors run the spec's [test] reference)",
        )
        return TritonCpu.ERROR
    test = data.get("test", {})
    if cpu == "reference" and not (
        isinstance(test, dict) and isinstance(test.get("reference"), str)
    ):
        sink.error(
            doc.line("triton", "cpu"),
            '[triton] cpu = "reference" runs the [test] reference expression on CPU, '
            "and this spec has none",
            'add [test] reference = "<PyTorch expression>", or set cpu = "error"',
        )
        return TritonCpu.ERROR
    return TritonCpu(cpu)


def build_op_spec(doc: LoadedToml, config: ProjectConfig, op_names: frozenset[str]) -> OpSpec:
    """Validate one loaded spec; raises OpgenError listing every problem."""
    sink = DiagnosticSink(doc.path)
    data = doc.data
    check_keys(sink, doc, data, SPEC_KEYS, ())
    _required_fields(sink, data, config)
    parsed_name = None
    if "name" in data and typed(sink, doc, data["name"], str, "name"):
        parsed_name = _parse_name(sink, doc, data["name"], config)
    mutates, values = _top_level(sink, doc, data, config)
    parsed = None
    if "schema" in data and typed(sink, doc, data["schema"], str, "schema"):
        parsed = parse_schema(sink, doc, data["schema"], mutates)
    tables = _tables(sink, doc)
    if parsed is None:  # a missing or failed schema always recorded why
        raise OpgenError(sink.items)
    args, rets = parsed
    grads = build_grads(sink, doc, tables["grad"], args, rets, op_names)
    fake = build_fake(sink, doc, tables["fake"], args, rets, "fake" in data)
    test = build_test(sink, doc, tables["test"], args, EXPR_GLOBALS, config.max_sample_elements)
    if test.cuda_graph and fake.data_dependent:
        sink.error(
            doc.line("test", "cuda_graph"),
            "test.cuda_graph = true, but an output's size depends on the values "
            "([fake] calls new_dynamic_size()): a CUDA graph replays fixed sizes",
            "remove test.cuda_graph (such ops are not captured)",
        )
    bench = build_bench(sink, doc, tables["bench"], args, EXPR_GLOBALS)
    jvp = build_jvp(sink, doc, tables["jvp"], args, rets, grads, op_names)
    vmap, vmap_leading = build_vmap(sink, doc, data, args, rets, fake)
    autocast = build_autocast(sink, doc, data.get("autocast"), args, values["devices"], test.dtypes)
    tags = build_tags(sink, doc, data.get("tags"))
    sharding = build_sharding(sink, doc, tables["sharding"], args, rets, "sharding" in data)
    _implementation_values(sink, doc, config, values, args, rets, parsed_name)
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
        jvp=jvp,
        vmap=VmapRule(vmap),  # build_vmap returns a valid rule, or its default
        vmap_leading=vmap_leading,
        autocast=autocast,
        tags=(*tags, *derived_tags(args, rets)),
        sharding=sharding,
        lines=dict(doc.lines),
        **values,
    )


def _required_fields(sink: DiagnosticSink, data: dict[str, Any], config: ProjectConfig) -> None:
    """A spec without a name or a schema is reported, with an example of each."""
    for required, example in (
        ("name", f'name = "{config.namespace}::my_op"'),
        ("schema", 'schema = "(Tensor x) -> Tensor"'),
    ):
        if required not in data:
            sink.error(1, f"missing required field {required!r}", f"add {example}")


def _tables(sink: DiagnosticSink, doc: LoadedToml) -> dict[str, dict[str, Any]]:
    """The spec's tables read by their own builders; one that is not a table reads as empty."""
    tables = {}
    for key in ("grad", "fake", "test", "bench", "jvp", "sharding"):
        value = doc.data.get(key, {})
        if not isinstance(value, dict):
            sink.error(
                doc.line(key),
                f"{key} must be a table, not {shown(value)}",
                f"write [{key}] on its own line and the entries below it",
            )
            value = {}
        tables[key] = value
    return tables


def _implementation_values(
    sink: DiagnosticSink,
    doc: LoadedToml,
    config: ProjectConfig,
    values: dict[str, Any],
    args: tuple[Arg, ...],
    rets: tuple[Ret, ...],
    parsed_name: tuple[str, str, str] | None,
) -> None:
    """How the op is implemented, into `values`: its registration (where the backend has a choice), the devices of a
    factory op, [triton] (Triton ops only), [build] and strided_writes."""
    data = doc.data
    traits = backend_traits(values["backend"])
    if traits.chooses_registration:
        values["registration"] = _registration(sink, doc, data, values, args, rets, parsed_name)
    if not any(a.differentiable for a in args):
        _factory_devices(sink, doc, values)
    if traits.uses_triton:
        values["triton_cpu"] = _triton(sink, doc, data, args, rets, parsed_name)
    elif "triton" in data:
        sink.error(
            doc.line("triton"),
            f"[triton] configures Triton ops, and this op is a {traits.label} op",
            'remove [triton], or set backend = "triton"',
        )
    if "build" in data:
        values["build"] = _op_build(sink, doc, data["build"], config, values["backend"])
    if "strided_writes" in data:
        values["strided_writes"] = _strided_writes(sink, doc, data["strided_writes"], args, values)
