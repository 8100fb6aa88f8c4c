"""What `opgen new` writes: the text of a first spec for an op, and of `opgen.toml` for a new project.

Nothing here writes: `opgen.scaffold.new_op` hands the texts to generate's writer, which
validates them with the project and writes them with the generated files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..api.copy_plan import Param, copy_plan
from ..errors import Diagnostic, OpgenError
from ..project.load import OPS_DIR, find_root
from ..spec.backends import DEFAULT_BACKEND, backend_traits
from ..spec.config import CONFIG_FILE
from ..spec.model import BACKENDS
from ..spec.names import RESERVED_NAMESPACES, identifier_problem, package_problem
from ..targets.cpp import kernel_path as cpp_kernel_path
from ..targets.python import kernel_path as python_kernel_path

__all__ = ["DEFAULT_SCHEMA", "NewOp", "compose_new_op"]

DEFAULT_SCHEMA = "(Tensor x) -> Tensor"

_PROJECT_TEMPLATE = """\
# opgen project: one spec per op under ops/, generated code in {package}/ and tests/.
[project]
namespace = "{namespace}"
package = "{package}"

[options]
backend = "{backend}"        # default backend of new ops: "python", "cpp" or "triton"
cpp_target = "stable"        # "stable" (LibTorch stable ABI) or "classic" (full ATen)
torch_target_version = "2.10"
registration = "custom_op"   # python ops: "custom_op" (safest) or "library" (lower call overhead)
compile_backend = "inductor"  # backend of the generated torch.compile tests ("aot_eager" skips codegen)
"""

_SINE_SPEC = """\
name = "{qualname}"
schema = "{schema}"
doc = \"\"\"
Elementwise sine: a working starting point. Change the schema, the kernel in
{kernel} and the formulas below, then run `opgen generate`.
\"\"\"
devices = {devices}
backend = "{backend}"
vmap = "elementwise"     # torch.vmap: one call on the whole batch

[grad]
x = "grad * x.cos()"

[jvp]
auto_element_wise = true  # forward mode: the [grad] formula with grad -> x_t

[fake]
like = "x"

[test]
reference = "torch.sin(x)"
dtypes = ["float32", "float64"]

[[test.samples]]
x = {{shape = [8, 16]}}

[[test.samples]]
x = {{shape = [4, 6], noncontiguous = true}}

[[test.samples]]
x = {{shape = [0, 3]}}
"""

_CUSTOM_SPEC = """\
name = "{qualname}"
schema = "{schema}"
doc = \"\"\"
{doc}
\"\"\"
devices = {devices}
backend = "{backend}"
{notes}{vmap}
# [grad]
# x = "grad * ..."        # one formula per differentiable input

# [jvp]
# result = "x_t * ..."    # forward mode (torch.func.jvp), with x_t the tangent of x

{fake}
[test]
{reference}
# dtypes = ["float32", "float64"]  # the dtypes the tests run (and the kernels' checks accept)

{samples}
"""

_SAMPLE_VALUES = {
    "Tensor": "{shape = [4, 3]}",
    "Tensor[]": "[{shape = [4, 3]}, {shape = [2]}]",
    "Tensor?[]": "[{shape = [4, 3]}, {shape = [2]}]",
    "int": "1",
    "SymInt": "1",
    "float": "0.5",
    "bool": "true",
    "str": '"a"',
    "Scalar": "1.0",
    "ScalarType": '"float32"',
    "Layout": '"strided"',
    "MemoryFormat": '"contiguous_format"',
    "Device": '"cpu"',
    "int[]": "[1, 2]",
    "SymInt[]": "[1, 2]",
    "float[]": "[0.5, 1.5]",
    "bool[]": "[true, false]",
}
# Tensors of the second and third starter samples: another shape, read through strides; empty.
_MORE_TENSORS = (
    (
        "{shape = [5, 7], noncontiguous = true}",
        "{shape = [5, 7]}",
        "[{shape = [5, 7]}, {shape = [3]}]",
    ),
    ("{shape = [0, 3]}", "{shape = [0, 3]}", "[{shape = [0, 3]}]"),
)


def _samples(args: list[tuple[str, str, bool]], copies: bool) -> str:
    """`[[test.samples]]` tables: one, or three (shapes, strides, empty) for a copy-through starter.

    `args`: (name, normalized type, mutated) of each argument the samples give.
    """
    first = [f"{name} = {_SAMPLE_VALUES[kind]}" for name, kind, _ in args]
    tables = [first]
    if copies:
        for read, written, listed in _MORE_TENSORS:
            values = {"Tensor": read, "Tensor[]": listed}
            tables.append(
                [
                    f"{name} = {written if mutated else values.get(kind, _SAMPLE_VALUES[kind])}"
                    for name, kind, mutated in args
                ]
            )
    body = "\n\n".join("[[test.samples]]\n" + "\n".join(t) for t in tables if t)
    return body or "# [[test.samples]]\n# name = value  # one entry per argument"


def _toml_strings(values: tuple[str, ...] | list[str]) -> str:
    quoted = [json.dumps(v) for v in values]
    return quoted[0] if len(quoted) == 1 else "[" + ", ".join(quoted) + "]"


def _int_arguments(schema: str) -> tuple[str, ...]:
    """The `int`/`int[]` arguments of a schema `_custom_spec` accepted."""
    from ..spec.dialect.parser import parse
    from ..spec.warnings import SIZE_INT_TYPES

    return tuple(a.name for a in parse(schema).args if a.type.family in SIZE_INT_TYPES)


def _custom_spec(
    qualname: str,
    schema: str,
    devices: list[str],
    backend: str,
    doc: str | None = None,
    notes: Sequence[str] = (),
) -> str:
    """A spec for `schema`; `doc` and `notes` (comment lines) make it an imported op's, whose
    kernels are the user's: then the reference is left for the user to write, not a placeholder."""
    from ..spec.dialect.parser import SchemaError, parse

    try:
        parsed = parse(schema)
    except SchemaError as exc:
        near = schema[exc.offset :][:30] or "the end"
        raise OpgenError(
            Diagnostic(
                None,
                None,
                f"--schema is not a valid schema: {exc.message} (at {near!r})",
                exc.hint or 'e.g. --schema "(Tensor x, float alpha=1.0) -> Tensor"',
            )
        ) from None
    args = parsed.args
    params = [Param(a.name, a.type.family, a.type.is_write) for a in args]
    # a return aliasing an argument keeps its annotation: no copy-through writes one
    returns = [r.type.spelling if r.type.annotation else r.type.family for r in parsed.returns]
    plan = copy_plan(params, returns)
    # every argument without a default (an optional one too: the schema asks for a value)
    given = [
        (p.name, p.type.rstrip("?"), p.mutated)
        for p, a in zip(params, args, strict=True)
        if a.default is None and p.type.rstrip("?") in _SAMPLE_VALUES
    ]
    reference = '# reference = "..."       # the PyTorch expression the op must match'
    if plan is not None and doc is None:
        reference = (
            f"reference = {json.dumps(plan.reference)}"
            f"  # placeholder: the starter kernels copy {plan.source_expr}; write what {qualname} must compute"
        )
    if plan is not None:
        fake = "[fake]\n"
        if plan.returns:  # the outputs' rule; an op that only writes its arguments has none
            kind, rules = plan.fake()
            fake += f"{kind} = {_toml_strings(rules)}   # the output rule torch.compile uses: edit to match the kernel\n"
        if plan.mutated:
            checks = [f"{m}.numel() == {plan.source_expr}.numel()" for m in plan.mutated]
            fake += f"checks = [{', '.join(map(json.dumps, checks))}]\n"
    else:
        fake = _new_empty_fake(params, returns)
    return _CUSTOM_SPEC.format(
        qualname=qualname,
        schema=schema.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\t", "\\t"),
        devices=_toml_list(devices),
        backend=backend,
        doc=doc or f"TODO: describe {qualname}.",
        notes="".join(f"# {n}\n" for n in notes),
        vmap=(
            ""
            if any(p.mutated for p in params) or not parsed.returns
            else '# vmap = "elementwise"   # the torch.vmap rule: elementwise, leading, custom or loop (the default)\n'
        ),
        fake=fake,
        reference=reference,
        samples=_samples(given, plan is not None),
    )


def _new_empty_fake(params: list[Param], returns: list[str]) -> str:
    """A fake rule for a schema opgen has no starter for: an empty output shaped like a tensor input."""
    if not returns or any(r not in ("Tensor", "Tensor[]") for r in returns):
        return ""  # the generated fake raises, naming [fake] (non-tensor or aliasing returns)
    tensors = [p.name for p in params if p.type == "Tensor"]
    source = next((p.name for p in params if p.type == "Tensor" and not p.mutated), None)
    source = source or (tensors[0] if tensors else None)
    rule = f"{source}.new_empty({source}.shape)" if source else "torch.empty(0)"
    rules = [f"[{rule}]" if r == "Tensor[]" else rule for r in returns]
    return f"[fake]\nexpr = {_toml_strings(rules)}   # the output rule torch.compile uses: edit to match the kernel\n"


def _split_name(qualname: str) -> tuple[str, str]:
    match = re.fullmatch(r"([^:]+)::([^:]+)", qualname)
    if not match:
        raise OpgenError(
            Diagnostic(
                None,
                None,
                f"op name {qualname!r} must look like 'namespace::op'",
                "e.g. opgen new mylib::foo",
            )
        )
    namespace, name = match.groups()
    for value, what in ((namespace, "namespace"), (name, "op name")):
        problem = identifier_problem(value, what)
        if problem:
            raise OpgenError(Diagnostic(None, None, problem, "use a short snake_case identifier"))
    if namespace in RESERVED_NAMESPACES or namespace.startswith("_"):
        raise OpgenError(
            Diagnostic(
                None,
                None,
                f"namespace {namespace!r} is reserved by PyTorch",
                "choose your own library name, e.g. 'mylib'",
            )
        )
    return namespace, name


@dataclass(frozen=True)
class NewOp:
    """A new op's files, not yet written: `sources` maps project-relative paths to text."""

    root: Path
    spec: str  # the spec's path, project-relative
    backend: str
    sources: dict[str, str]
    int_arguments: tuple[str, ...] = ()  # `int` and `int[]` arguments of a given schema


def compose_new_op(
    cwd: Path, qualname: str, schema: str | None, backend: str | None, devices: Sequence[str]
) -> NewOp:
    """The spec of a new op (and opgen.toml when `cwd` is in no project); raises OpgenError for bad arguments."""
    namespace, name = _split_name(qualname)
    root = find_root(cwd)
    created_project = root is None
    root = root or cwd
    if created_project:
        backend = backend or DEFAULT_BACKEND
    elif backend is None:
        from ..spec.config import build_config
        from ..spec.load import load_toml

        backend = build_config(load_toml(root / CONFIG_FILE)).backend
    if backend not in BACKENDS:
        choices = ", ".join(repr(b) for b in BACKENDS)
        raise OpgenError(
            Diagnostic(None, None, f"--backend must be one of {choices}, not {backend!r}", "")
        )
    # a Triton op's tests run on CUDA and, under Triton's interpreter, on CPU
    devices = list(devices) or list(backend_traits(backend).default_devices)
    bad = [d for d in devices if d not in ("cpu", "cuda")]
    if bad or not devices:
        raise OpgenError(
            Diagnostic(
                None,
                None,
                f"--devices takes cpu and/or cuda, not {', '.join(bad) or 'nothing'}",
                "e.g. --devices cpu,cuda",
            )
        )
    spec = f"{OPS_DIR}/{name}.toml"
    if (root / spec).exists():
        raise OpgenError(
            Diagnostic(
                root / spec,
                None,
                f"{qualname} already has a spec",
                "edit it and run `opgen generate`",
            )
        )
    # The package takes the namespace's name unless that would shadow a module generated code imports.
    package = namespace if package_problem(namespace) is None else f"{namespace}_ops"
    kernel = (
        cpp_kernel_path(name, "cpu")
        if backend_traits(backend).compiles_cpp
        else python_kernel_path(package if created_project else "the package", name)
    )
    if schema is None or schema.strip() == DEFAULT_SCHEMA:
        text = _SINE_SPEC.format(
            qualname=qualname,
            schema=DEFAULT_SCHEMA,
            kernel=kernel,
            devices=_toml_list(devices),
            backend=backend,
        )
    else:
        text = _custom_spec(qualname, schema.strip(), devices, backend)
    sources = {spec: text}
    if created_project:
        sources[CONFIG_FILE] = _PROJECT_TEMPLATE.format(
            namespace=namespace, package=package, backend=backend
        )
    ints = _int_arguments(schema.strip()) if schema and schema.strip() != DEFAULT_SCHEMA else ()
    return NewOp(root, spec, backend, sources, ints)


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"
