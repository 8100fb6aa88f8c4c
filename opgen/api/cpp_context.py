"""The `cpp` variables of the C++ templates, computed from the spec model.

Every string the C++ templates print is computed here or in `opgen.api.cpp`;
see Note [C++ type mapping] for the types. Where files are is not known here:
`opgen.targets.cpp` passes the paths in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..spec.dialect.types import TypeKind
from ..spec.fences import CHECKS, fence_lines
from ..spec.model import OpSpec, ProjectConfig
from . import cpp
from .arg_checks import cpp_boundary_checks, op_variable
from .build_settings import setup_settings
from .decisions import decisions
from .devices import CPP_DEVICE_CHECKS, DISPATCH_KEYS
from .names import Namer, cpp_parameter_names, cpp_safe

__all__ = [
    "CppFiles",
    "cpp_op_context",
    "cpp_project_context",
    "guard_dtypes",
    "local_names",
    "stub_names",
    "StubNames",
    "SCALAR_TYPES",
]


@dataclass(frozen=True)
class CppFiles:
    """Where an op's C++ files are: its header as the kernels include it, each device's kernel file, its spec."""

    header: str
    kernels: Mapping[str, str]
    spec: str  # project-relative, as generated files name it


SCALAR_TYPES = {
    "float32": "Float",
    "float64": "Double",
    "float16": "Half",
    "bfloat16": "BFloat16",
    "int8": "Char",
    "int16": "Short",
    "int32": "Int",
    "int64": "Long",
    "uint8": "Byte",
    "bool": "Bool",
    "complex64": "ComplexFloat",
    "complex128": "ComplexDouble",
}


def _scalar_type(target: str, dtype: str) -> str:
    prefix = "torch::headeronly::ScalarType" if target == "stable" else "at::ScalarType"
    return f"{prefix}::{SCALAR_TYPES[dtype]}"


def _explicit_dtypes(op: OpSpec) -> set[str]:
    """Tensors whose samples fix their own dtype (e.g. int64 indices) get no dtype check."""
    names: set[str] = set()
    for sample in op.test.samples:
        for name, value in sample.values:
            if getattr(value, "dtype", None):
                names.add(name)
    return names


_LOCALS = ("guard", "stream", "stream_ptr", "n", "threads", "blocks", "error", "t")


@dataclass(frozen=True)
class StubNames:
    """C++ names in an op's kernel stubs (Note [Generated names]): parameters, contiguous copies, locals."""

    params: dict[str, str]
    contiguous: dict[str, str]  # read-only tensor argument -> its contiguous copy (`x_c`)
    locals: dict[str, str]
    cuda_kernel: str  # the CUDA stub's __global__ function (a parameter must not hide it)


def stub_names(op: OpSpec) -> StubNames:
    params = cpp_parameter_names(op)
    namer = Namer(set(params.values()))
    contiguous = {
        a.name: namer(cpp_safe(f"{a.name}_c"))
        for a in op.args
        if a.family == "Tensor" and not a.mutated
    }
    local = {name: namer(name) for name in _LOCALS}
    return StubNames(params, contiguous, local, namer(f"{op.module}_kernel"))


def local_names(op: OpSpec, wanted: Sequence[str] = _LOCALS) -> dict[str, str]:
    """Names of local variables in the stubs' bodies: the stubs' own locals keep their names (a
    starter body shares them), the others differ from every parameter, copy and local."""
    names = stub_names(op)
    namer = Namer(
        {*names.params.values(), *names.contiguous.values(), *names.locals.values()}
        | {names.cuda_kernel}
    )
    return {w: names.locals[w] if w in names.locals else namer(w) for w in wanted}


def guard_dtypes(op: OpSpec) -> list[str]:
    """The dtypes a stub's dtype check accepts: the spec's test dtypes, and gradcheck's (float64
    unless the spec's `gradcheck_dtype` says float32)."""
    wanted = list(op.test.dtypes) + ([op.test.gradcheck_dtype] if op.grads else [])
    return [d for d in dict.fromkeys(wanted) if d in SCALAR_TYPES]


def _checks(op: OpSpec, device: str, names: StubNames) -> list[str]:
    """Input checks of a kernel stub: device, dtype, same device, contiguous outputs."""
    target = op.cpp_target
    check = cpp.CppType(target).check
    method, what = CPP_DEVICE_CHECKS[device]
    q = op.qualname
    p = names.params
    lines: list[str] = []
    tensors = [a for a in op.args if a.family == "Tensor"]
    for arg in op.args:
        name = p[arg.name]
        if arg.family == "Tensor":
            lines.append(f'{check}({name}.{method}(), "{q}: {arg.name} must be {what}");')
        elif arg.family == "Tensor?":
            lines.append(
                f'{check}(!{name}.has_value() || {name}->{method}(), "{q}: {arg.name} must be {what}");'
            )
        elif arg.family == "Tensor[]":
            t = names.locals["t"]
            lines.append(f"for (const auto& {t} : {name}) {{")
            lines.append(
                f'  {check}({t}.{method}(), "{q}: every tensor of {arg.name} must be {what}");'
            )
            lines.append("}")
    allowed = guard_dtypes(op)
    fixed = _explicit_dtypes(op)
    checked = [a for a in tensors if a.name not in fixed]
    if checked and allowed:
        first, label = p[checked[0].name], checked[0].name
        condition = " || ".join(
            f"{first}.scalar_type() == {_scalar_type(target, d)}" for d in allowed
        )
        lines.append(f'{check}({condition}, "{q}: {label} must be {" or ".join(allowed)}");')
        for arg in checked[1:]:
            lines.append(
                f'{check}({p[arg.name]}.scalar_type() == {first}.scalar_type(), "{q}: {arg.name} must have the dtype of {label}");'
            )
    if device == "cuda" and len(tensors) > 1:
        first, label = p[tensors[0].name], tensors[0].name
        same = "get_device_index()" if target == "stable" else "device()"
        for arg in tensors[1:]:
            lines.append(
                f'{check}({p[arg.name]}.{same} == {first}.{same}, "{q}: {arg.name} must be on the device of {label}");'
            )
    for arg in op.args:  # a kernel that handles any strides names the tensor in strided_writes
        if arg.mutated and arg.family == "Tensor" and arg.name not in op.strided_writes:
            lines.append(
                f'{check}({p[arg.name]}.is_contiguous(), "{q}: {arg.name} must be contiguous");'
            )
    return lines


def _contiguous(op: OpSpec, names: StubNames) -> list[str]:
    """Read-only tensor inputs as contiguous tensors named `<arg>_c` (a no-op when they already are)."""
    tensor = cpp.CppType(op.cpp_target).tensor
    lines = []
    for arg in op.args:
        if arg.name in names.contiguous:
            name = names.params[arg.name]
            value = (
                f"torch::stable::contiguous({name})"
                if op.cpp_target == "stable"
                else f"{name}.contiguous()"
            )
            lines.append(f"const {tensor} {names.contiguous[arg.name]} = {value};")
    return lines


def _header_includes(op: OpSpec) -> list[str]:
    """The op header's includes: torch's for its C++ target and types, then the standard ones."""
    families = [a.family for a in op.args] + [r.family for r in op.returns]
    types = {a.type.element for a in op.args} | {r.type.element for r in op.returns}
    if op.cpp_target == "stable":
        torch = list(_STABLE_HEADERS) + _type_headers(types, _STABLE_TYPE_HEADERS)
    else:
        lists = (
            ["<ATen/core/List.h>"] if {"Tensor[]", "Tensor?[]", "bool[]"} & set(families) else []
        )
        torch = ["<ATen/core/Tensor.h>"] + lists + _type_headers(types, _CLASSIC_TYPE_HEADERS)
    return torch + sorted(_std_includes(op, families, types))


_STABLE_HEADERS = (
    "<torch/csrc/stable/library.h>",
    "<torch/csrc/stable/ops.h>",
    "<torch/csrc/stable/tensor.h>",
    "<torch/headeronly/core/ScalarType.h>",
)
# (schema type, the header that declares its C++ type), in the order they are included
_STABLE_TYPE_HEADERS = (
    ("Device", "<torch/csrc/stable/device.h>"),
    ("Layout", "<torch/headeronly/core/Layout.h>"),
    ("MemoryFormat", "<torch/headeronly/core/MemoryFormat.h>"),
)
_CLASSIC_TYPE_HEADERS = (
    ("Scalar", "<c10/core/Scalar.h>"),
    ("Device", "<c10/core/Device.h>"),
    ("Layout", "<c10/core/Layout.h>"),
    ("MemoryFormat", "<c10/core/MemoryFormat.h>"),
    ("SymInt", "<c10/core/SymInt.h>"),
)


def _type_headers(types: set[str], table: tuple[tuple[str, str], ...]) -> list[str]:
    return [header for type_, header in table if type_ in types]


def _std_includes(op: OpSpec, families: list[str], types: set[str]) -> set[str]:
    """The standard library headers the op's C++ signature needs."""
    std = {"<cstdint>"}
    if any("?" in f for f in families):
        std.add("<optional>")
    if len(op.returns) > 1 or any(a.type.unwrapped.kind is TypeKind.TUPLE for a in op.args):
        std.add("<tuple>")
    if any("[]" in f for f in families):
        std.add("<vector>")
    if "str" in types:
        std.add("<string>")
    return std


def _def_arguments(op: OpSpec) -> list[str]:
    """The arguments of the op's `m.def`: its schema (with its tags), unless Python defines it
    (Note [Defining tagged ops])."""
    return [] if _defined_in_python(op) else [cpp.cpp_string(op.full_schema) + _tags_cpp(op)]


def cpp_op_context(op: OpSpec, files: CppFiles) -> dict[str, Any]:
    """The `op.cpp` variables of an op's C++ templates (see docs/templates.md)."""
    target = op.cpp_target
    kind = cpp.CppType(target)
    ret = cpp.return_type(op.returns, target)
    names = stub_names(op)
    tensors = [a.name for a in op.args if a.family == "Tensor"]
    return {
        "target": target,
        "tensor": kind.tensor,
        "check": kind.check,
        "parameters": cpp.parameters(op),
        "return_type": ret,
        "returns_void": ret == "void",
        "kernels": [{"device": d, "function": cpp.kernel_name(op, d)} for d in op.devices],
        "impl_name": cpp.cpp_string(op.overload_name),
        "def_schema": cpp.cpp_string(op.full_schema),
        "def_arguments": _def_arguments(op),
        "header": files.header,
        "header_includes": _header_includes(op),
        "checks": {d: _checks(op, d, names) for d in op.devices},
        "checks_fence": dict(zip(("begin", "end"), fence_lines(CHECKS, files.spec), strict=True)),
        "contiguous": _contiguous(op, names),
        "first_tensor": names.params[tensors[0]] if tensors else None,
        "cpu_file": files.kernels["cpu"],
        "cuda_file": files.kernels["cuda"],
        "not_implemented": {
            d: cpp.cpp_string(
                f"{op.qualname} is not implemented on {d.upper()}: edit {files.kernels[d]}"
            )
            for d in op.devices
        },
        "cuda_kernel": names.cuda_kernel,
        "local": names.locals,
        "pybind": op.pybind,
    }


def _tags_cpp(op: OpSpec) -> str:
    return ", {" + ", ".join(f"at::Tag::{t}" for t in op.tags) + "}" if op.tags else ""


def _defined_in_python(op: OpSpec) -> bool:
    """Note [Defining tagged ops]
    A tag must reach torch with the op's definition (Note [Tags of aliasing
    ops]). The classic library passes it to `m.def(schema, {at::Tag::inplace})`.
    The stable ABI's `def(schema, tags)` compiles but aborts the process when
    the library loads in torch 2.13 ("Not yet supported Tag"), so on the stable
    target a tagged op is defined from Python, with its tag, by `_library.py`
    before it loads the compiled library; the library only implements it.
    """
    return op.cpp_target == "stable" and bool(op.tags)


def _factory(op: OpSpec) -> bool:
    return not any(a.differentiable for a in op.args)


def cpp_project_context(
    config: ProjectConfig, ops: Sequence[tuple[OpSpec, Mapping[str, Any]]], library_file: str
) -> dict[str, Any]:
    """The `cpp` variables of the project-wide C++ templates, from each C++ op and its `op.cpp` context."""
    devices = sorted({d for op, _ in ops for d in op.devices})
    return {
        "build_settings": setup_settings(config, [op for op, _ in ops]),
        "target_version_hex": cpp.target_version_hex(config.torch_target_version),
        "library_file": library_file,
        "devices": devices,
        "dispatch_keys": dict(DISPATCH_KEYS),
        "defs": [arguments for _, c in ops for arguments in c["def_arguments"]],
        "python_defs": [
            {
                "schema": repr(op.full_schema),
                "tags": "(" + ", ".join(f"torch.Tag.{t}" for t in op.tags) + ",)",
            }
            for op, _ in ops
            if _defined_in_python(op)
        ],
        "impls": {
            d: [
                {
                    "name": c["impl_name"],
                    "function": f"{op.namespace}::{cpp.kernel_name(op, d)}",
                    # Note [Argument checks]: the kernel registered is this checking wrapper
                    "checked": f"{cpp.kernel_name(op, d)}_checked",
                    "return_type": c["return_type"],
                    "parameters": c["parameters"],
                    "arguments": ", ".join(cpp_parameter_names(op)[a.name] for a in op.args),
                    "checks": cpp_boundary_checks(op, d),
                    "op_variable": op_variable(op),
                }
                for op, c in ops
                if d in op.devices and not _factory(op)
            ]
            for d in devices
        },
        # ops with no tensor to dispatch on: the CPU file's kernel serves every device
        "composite_impls": [
            {"name": c["impl_name"], "function": f"{op.namespace}::{cpp.kernel_name(op, 'cpu')}"}
            for op, c in ops
            if _factory(op)
        ],
        "headers": {d: [c["header"] for op, c in ops if d in op.devices] for d in devices},
        # Note [Written arguments] in api/decisions.py
        "mutation_fallbacks": [
            c["impl_name"] for op, c in ops if decisions(op).cpp_mutation_fallbacks
        ],
        # torch's autogradNotImplementedFallback reaches ADInplaceOrView only for an op that
        # returns a written argument: an op returning new tensors gets the library's own
        "returning_mutations": [
            c["impl_name"]
            for op, c in ops
            if decisions(op).cpp_mutation_fallbacks and any(r.aliased for r in op.returns)
        ],
        "fresh_returning_mutations": [
            c["impl_name"]
            for op, c in ops
            if decisions(op).cpp_mutation_fallbacks
            and op.returns
            and not any(r.aliased for r in op.returns)
        ],
        "pybind_ops": [
            {
                "name": op.module,
                "functions": [
                    {"device": d, "function": f"{op.namespace}::{cpp.kernel_name(op, d)}"}
                    for d in op.devices
                ],
                "header": c["header"],
                "doc": cpp.cpp_string(op.doc.strip() or op.qualname),
            }
            for op, c in ops
            if op.pybind
        ],
    }
