"""What `opgen new` writes: the text of a first spec for an op, and of `opgen.toml` for a new project.

Nothing here writes: `opgen.new` hands the texts to generate's writer, which
validates them with the project and writes them with the generated files.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import Diagnostic, OpgenError
from .project import OPS_DIR, find_root
from .spec.config import CONFIG_FILE
from .spec.names import RESERVED_NAMESPACES, identifier_problem, package_problem
from .targets.cpp import kernel_path as cpp_kernel_path
from .targets.python import kernel_path as python_kernel_path

__all__ = ["DEFAULT_SCHEMA", "NewOp", "compose_new_op"]

DEFAULT_SCHEMA = "(Tensor x) -> Tensor"

_PROJECT_TEMPLATE = """\
# opgen project: one spec per op under ops/, generated code in {package}/ and tests/.
[project]
namespace = "{namespace}"
package = "{package}"

[options]
backend = "{backend}"        # default backend of new ops: "python" or "cpp"
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

[grad]
x = "grad * x.cos()"

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
TODO: describe {qualname}.
\"\"\"
devices = {devices}
backend = "{backend}"

# [grad]
# x = "grad * ..."        # one formula per differentiable input

{fake}
[test]
# reference = "..."       # the PyTorch expression the op must match

{sample}
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
    "Device": '"cpu"',
    "int[]": "[1, 2]",
    "SymInt[]": "[1, 2]",
    "float[]": "[0.5, 1.5]",
    "bool[]": "[true, false]",
}


def _custom_spec(qualname: str, schema: str, devices: list[str], backend: str) -> str:
    from .spec.dialect.parser import SchemaError, parse

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
    tensors = [a.name for a in args if a.type.family == "Tensor"]
    written = {a.name for a in args if a.type.is_write}
    sample = "\n".join(
        f"{a.name} = {_SAMPLE_VALUES[a.type.family]}"
        for a in args
        if a.default is None and not a.type.is_optional and a.type.family in _SAMPLE_VALUES
    )
    fake = ""
    plain = all(
        r.type.family in ("Tensor", "Tensor[]") and not r.type.annotation for r in parsed.returns
    )
    if parsed.returns and plain:
        source = next((t for t in tensors if t not in written), tensors[0] if tensors else None)
        rule = f"{source}.new_empty({source}.shape)" if source else "torch.empty(0)"
        rules = [f"[{rule}]" if r.type.family == "Tensor[]" else rule for r in parsed.returns]
        value = (
            f'"{rules[0]}"' if len(rules) == 1 else "[" + ", ".join(f'"{r}"' for r in rules) + "]"
        )
        fake = f"[fake]\nexpr = {value}   # the output rule torch.compile uses: edit to match the kernel\n"
    return _CUSTOM_SPEC.format(
        qualname=qualname,
        schema=schema.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\t", "\\t"),
        devices=_toml_list(devices),
        backend=backend,
        fake=fake,
        sample=(
            f"[[test.samples]]\n{sample}"
            if sample
            else "# [[test.samples]]\n# name = value  # one entry per argument"
        ),
    )


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


def compose_new_op(
    cwd: Path, qualname: str, schema: str | None, backend: str | None, devices: Sequence[str]
) -> NewOp:
    """The spec of a new op (and opgen.toml when `cwd` is in no project); raises OpgenError for bad arguments."""
    namespace, name = _split_name(qualname)
    root = find_root(cwd)
    created_project = root is None
    root = root or cwd
    if created_project:
        backend = backend or "python"
    elif backend is None:
        from .spec.config import build_config
        from .spec.load import load_toml

        backend = build_config(load_toml(root / CONFIG_FILE)).backend
    if backend not in ("python", "cpp"):
        raise OpgenError(
            Diagnostic(None, None, f"--backend must be 'python' or 'cpp', not {backend!r}", "")
        )
    devices = list(devices)
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
        if backend == "cpp"
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
    return NewOp(root, spec, backend, sources)


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"
