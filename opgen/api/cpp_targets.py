"""The artifacts of `backend = "cpp"` ops: C++ sources, Python glue, setup.py.

Called from `opgen.targets` (see Note [Ownership] there). Every string the C++
templates print is computed here or in `opgen.api.cpp`; see
Note [C++ type mapping] for the types.
"""

from __future__ import annotations

from typing import Any, Callable

from ..project import Project
from ..spec.config import CONFIG_FILE
from ..spec.model import OpSpec
from . import cpp
from .context import header
from .fastpath import no_grad_message, refuses_backward_in_cpp

__all__ = ["cpp_op_artifacts", "cpp_project_artifacts", "cpp_op_context", "cpp_project_context", "SCALAR_TYPES"]

_GENERATED = "generated"
_USER = "user"

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

_DEVICE_CHECK = {"cpu": ("is_cpu", "a CPU tensor"), "cuda": ("is_cuda", "a CUDA tensor")}


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


def _locals(op: OpSpec) -> dict[str, str]:
    """Names of the stubs' local variables, renamed (`n_`) where an argument already has the name."""
    taken = {a.name for a in op.args} | {f"{a.name}_c" for a in op.args}
    names = {}
    for name in _LOCALS:
        unique = name
        while unique in taken:
            unique += "_"
        names[name] = unique
    return names


def _checks(op: OpSpec, device: str) -> list[str]:
    """Input checks of a kernel stub: device, dtype, same device, contiguous outputs."""
    target = op.cpp_target
    check = cpp.CppType(target).check
    method, what = _DEVICE_CHECK[device]
    q = op.qualname
    lines: list[str] = []
    tensors = [a for a in op.args if a.type == "Tensor"]
    for arg in op.args:
        if arg.type == "Tensor":
            lines.append(f'{check}({arg.name}.{method}(), "{q}: {arg.name} must be {what}");')
        elif arg.type == "Tensor?":
            lines.append(f'{check}(!{arg.name}.has_value() || {arg.name}->{method}(), "{q}: {arg.name} must be {what}");')
        elif arg.type == "Tensor[]":
            t = _locals(op)["t"]
            lines.append(f"for (const auto& {t} : {arg.name}) {{")
            lines.append(f'  {check}({t}.{method}(), "{q}: every tensor of {arg.name} must be {what}");')
            lines.append("}")
    allowed = [d for d in op.test.dtypes if d in SCALAR_TYPES]
    fixed = _explicit_dtypes(op)
    checked = [a for a in tensors if a.name not in fixed]
    if checked and allowed:
        first = checked[0].name
        condition = " || ".join(f"{first}.scalar_type() == {_scalar_type(target, d)}" for d in allowed)
        lines.append(f'{check}({condition}, "{q}: {first} must be {" or ".join(allowed)}");')
        for arg in checked[1:]:
            lines.append(f'{check}({arg.name}.scalar_type() == {first}.scalar_type(), "{q}: {arg.name} must have the dtype of {first}");')
    if device == "cuda" and len(tensors) > 1:
        first = tensors[0].name
        same = "get_device_index()" if target == "stable" else "device()"
        for arg in tensors[1:]:
            lines.append(f'{check}({arg.name}.{same} == {first}.{same}, "{q}: {arg.name} must be on the device of {first}");')
    for arg in op.args:
        if arg.mutated and arg.type == "Tensor":
            lines.append(f'{check}({arg.name}.is_contiguous(), "{q}: {arg.name} must be contiguous");')
    return lines


def _contiguous(op: OpSpec) -> list[str]:
    """Read-only tensor inputs as contiguous tensors named `<arg>_c` (a no-op when they already are)."""
    tensor = cpp.CppType(op.cpp_target).tensor
    lines = []
    for arg in op.args:
        if arg.type == "Tensor" and not arg.mutated:
            value = f"torch::stable::contiguous({arg.name})" if op.cpp_target == "stable" else f"{arg.name}.contiguous()"
            lines.append(f"const {tensor} {arg.name}_c = {value};")
    return lines


def _header_includes(op: OpSpec) -> list[str]:
    types = {a.type.rstrip("?") for a in op.args}
    std = {"<cstdint>"}
    if any(a.type.endswith("?") for a in op.args):
        std.add("<optional>")
    if len(op.returns) > 1:
        std.add("<tuple>")
    if any(t.endswith("[]") for t in types) or any(r.type == "Tensor[]" for r in op.returns):
        std.add("<vector>")
    if op.cpp_target == "stable":
        torch = ["<torch/csrc/stable/library.h>", "<torch/csrc/stable/ops.h>", "<torch/csrc/stable/tensor.h>", "<torch/headeronly/core/ScalarType.h>"]
        if "Device" in types:
            torch.append("<torch/csrc/stable/device.h>")
        if "str" in types:
            std.add("<string>")
    else:
        torch = ["<ATen/core/Tensor.h>"]
        if "Tensor[]" in types or "bool[]" in types:
            torch.append("<ATen/core/List.h>")
        if "Scalar" in types:
            torch.append("<c10/core/Scalar.h>")
        if "Device" in types:
            torch.append("<c10/core/Device.h>")
        if "SymInt" in types or "SymInt[]" in types:
            torch.append("<c10/core/SymInt.h>")
    return torch + sorted(std)


def cpp_op_context(op: OpSpec, config) -> dict[str, Any]:
    """The `cpp` variables of an op's C++ templates (see docs/templates.md)."""
    target = op.cpp_target
    module = op.module
    kind = cpp.CppType(target)
    ret = cpp.return_type(op.returns, target)
    tensors = [a.name for a in op.args if a.type == "Tensor"]
    return {
        "target": target,
        "tensor": kind.tensor,
        "check": kind.check,
        "namespace": op.namespace,
        "parameters": cpp.parameters(op),
        "return_type": ret,
        "returns_void": ret == "void",
        "kernels": [{"device": d, "function": cpp.kernel_name(op, d)} for d in op.devices],
        "impl_name": cpp.cpp_string(op.name + (f".{op.overload}" if op.overload else "")),
        "def_schema": cpp.cpp_string(op.full_schema),
        "header": f"{module}.h",
        "header_includes": _header_includes(op),
        "checks": {d: _checks(op, d) for d in op.devices},
        "contiguous": _contiguous(op),
        "first_tensor": tensors[0] if tensors else None,
        "cpu_file": f"csrc/cpu/{module}.cpp",
        "cuda_file": f"csrc/cuda/{module}.cu",
        "not_implemented": {
            d: cpp.cpp_string(f"{op.qualname} is not implemented on {d.upper()}: edit csrc/{d}/{module}.{'cpp' if d == 'cpu' else 'cu'}")
            for d in op.devices
        },
        "cuda_kernel": f"{module}_kernel",
        "local": _locals(op),
        "pybind": op.pybind,
    }


def cpp_op_artifacts(project: Project, op: OpSpec, base: dict[str, Any], add: Callable[..., None]) -> list:
    """Add the op's header, kernel stubs and Python module through `add`; returns nothing new."""
    module = op.module
    pkg = project.config.package
    base["op"]["cpp"] = cpp_op_context(op, project.config)
    add(f"csrc/{module}.h", "cpp/op.h.j2", _GENERATED, comment="//")
    if "cpu" in op.devices:
        add(f"csrc/cpu/{module}.cpp", "cpp/kernel_cpu.cpp.j2", _USER, comment="//")
    if "cuda" in op.devices:
        add(f"csrc/cuda/{module}.cu", "cpp/kernel_cuda.cu.j2", _USER, comment="//")
    add(f"{pkg}/_generated/{module}.py", "python/cpp_op.py.j2", _GENERATED)
    return []


def cpp_project_context(project: Project) -> dict[str, Any]:
    config = project.config
    ops = [op for op in project.ops if op.backend == "cpp"]
    contexts = [(op, cpp_op_context(op, config)) for op in ops]
    devices = sorted({d for op in ops for d in op.devices})
    stable = config.cpp_target == "stable"
    return {
        "target": config.cpp_target,
        "target_version": config.torch_target_version,
        "target_version_hex": cpp.target_version_hex(config.torch_target_version),
        "library_file": "_C.abi3.so" if stable else "_C.so",
        "devices": devices,
        "dispatch_keys": {"cpu": "CPU", "cuda": "CUDA"},
        "defs": [c["def_schema"] for _, c in contexts],
        "impls": {
            d: [{"name": c["impl_name"], "function": f"{op.namespace}::{cpp.kernel_name(op, d)}"} for op, c in contexts if d in op.devices]
            for d in devices
        },
        "headers": {d: [c["header"] for op, c in contexts if d in op.devices] for d in devices},
        "backward_refusals": [
            {"name": c["impl_name"], "message": cpp.cpp_string(no_grad_message(op) or "")}
            for op, c in contexts
            if refuses_backward_in_cpp(op)
        ],
        "pybind_ops": [
            {"name": op.module, "functions": [{"device": d, "function": f"{op.namespace}::{cpp.kernel_name(op, d)}"} for d in op.devices], "header": c["header"], "doc": cpp.cpp_string(op.doc.strip() or op.qualname)}
            for op, c in contexts
            if op.pybind
        ],
    }


def cpp_project_artifacts(project: Project, context: dict[str, Any]) -> list:
    from ..targets import Artifact

    pkg = project.config.package
    ctx = {**context, "cpp": cpp_project_context(project)}
    items = [
        ("csrc/registration.cpp", "cpp/registration.cpp.j2", _GENERATED, "//", {}),
        (f"{pkg}/_library.py", "package/_library.py.j2", _GENERATED, "#", {}),
        ("setup.py", "package/setup.py.j2", _USER, "#", {}),
    ]
    for device in ctx["cpp"]["devices"]:
        items.append((f"csrc/registration_{device}.cpp", "cpp/registration_device.cpp.j2", _GENERATED, "//", {"device": device}))
    if ctx["cpp"]["backward_refusals"]:
        items.append(("csrc/registration_autograd.cpp", "cpp/registration_autograd.cpp.j2", _GENERATED, "//", {}))
    if ctx["cpp"]["pybind_ops"]:
        items.append(("csrc/pybind.cpp", "cpp/pybind.cpp.j2", _GENERATED, "//", {}))
    return [
        Artifact(path, template, owner, CONFIG_FILE, {**ctx, "header": header(CONFIG_FILE, comment), **extra})
        for path, template, owner, comment, extra in items
    ]
