"""C++ names and types for an op, per target ABI (stable or classic).

Note [C++ type mapping]
Each schema type maps to the C++ parameter type a kernel is registered with.
The tables below were checked by compiling and calling one op that takes every
type (see tests/test_cpp_types.py) against torch 2.13:

- stable ABI (`STABLE_TORCH_LIBRARY` + `TORCH_BOX`): the boxed calling
  convention converts `StableIValue`s with `torch::stable::detail::to<T>`, which
  knows std::vector<T> (not HeaderOnlyArrayRef) for lists, std::string for str,
  std::optional<T>, ScalarType, Device and plain 64-bit values. It has no Scalar
  and no tuple arguments (a schema with either is rejected with a hint to use
  the classic target); it returns every type of `_STABLE_RETURNS`.
- classic ABI (`TORCH_LIBRARY` + unboxed functors): the dispatcher infers the
  schema from the C++ signature and insists on exact matches, e.g. c10::SymInt
  for SymInt (int64_t is refused at load time), c10::string_view for str,
  c10::List<bool> for bool[] and std::tuple for tuple arguments.

Note [SymInt in C++ kernels]
Backend kernels (CPU, CUDA) always receive concrete sizes: symbolic values
only flow through the fake kernel, which opgen writes in Python. So opgen
recommends SymInt in schemas for size-like ints (torch.compile(dynamic=True)
then does not recompile per value) and maps it to:
- stable: int64_t (the stable ABI has no SymInt; the shim hands over the
  concrete value),
- classic: c10::SymInt / c10::SymIntArrayRef (the dispatcher requires it);
  read it with `.expect_int()` or `C10_AS_INTARRAYREF_SLOW(...)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec.dialect.types import SchemaType, TypeKind
from ..spec.model import OpSpec, Ret
from .names import cpp_parameter_names

__all__ = [
    "CppType",
    "arg_type",
    "return_type",
    "parameters",
    "kernel_name",
    "cpp_string",
    "target_version_hex",
    "STABLE_TYPES",
    "CLASSIC_TYPES",
]

_STABLE_TENSOR = "torch::stable::Tensor"
_CLASSIC_TENSOR = "at::Tensor"

# schema type (SchemaType.family) -> parameter type
STABLE_TYPES: dict[str, str] = {
    "Tensor": f"const {_STABLE_TENSOR}&",
    "Tensor?": f"const std::optional<{_STABLE_TENSOR}>&",
    "Tensor[]": f"const std::vector<{_STABLE_TENSOR}>&",
    "Tensor?[]": f"const std::vector<std::optional<{_STABLE_TENSOR}>>&",
    "Tensor[]?": f"const std::optional<std::vector<{_STABLE_TENSOR}>>&",
    "int": "int64_t",
    "SymInt": "int64_t",
    "float": "double",
    "bool": "bool",
    "str": "std::string",
    "ScalarType": "torch::headeronly::ScalarType",
    "Layout": "torch::headeronly::Layout",
    "MemoryFormat": "torch::headeronly::MemoryFormat",
    "Device": "torch::stable::Device",
    "int[]": "std::vector<int64_t>",
    "SymInt[]": "std::vector<int64_t>",
    "float[]": "std::vector<double>",
    "bool[]": "std::vector<bool>",
}

CLASSIC_TYPES: dict[str, str] = {
    "Tensor": f"const {_CLASSIC_TENSOR}&",
    "Tensor?": f"const std::optional<{_CLASSIC_TENSOR}>&",
    "Tensor[]": "at::TensorList",
    "Tensor?[]": f"const c10::List<std::optional<{_CLASSIC_TENSOR}>>&",
    "Tensor[]?": "std::optional<at::TensorList>",
    "int": "int64_t",
    "SymInt": "c10::SymInt",
    "float": "double",
    "bool": "bool",
    "str": "c10::string_view",
    "Scalar": "const at::Scalar&",
    "ScalarType": "at::ScalarType",
    "Layout": "at::Layout",
    "MemoryFormat": "at::MemoryFormat",
    "Device": "at::Device",
    "int[]": "at::IntArrayRef",
    "SymInt[]": "c10::SymIntArrayRef",
    "float[]": "at::ArrayRef<double>",
    "bool[]": "const c10::List<bool>&",
}

# Optionals whose C++ type is not std::optional<base>.
_CLASSIC_OPTIONAL = {
    "int[]?": "at::OptionalIntArrayRef",
    "SymInt[]?": "at::OptionalSymIntArrayRef",
    "float[]?": "std::optional<at::ArrayRef<double>>",
    "bool[]?": "const std::optional<c10::List<bool>>&",
    "Scalar?": "const std::optional<at::Scalar>&",
    "str?": "std::optional<c10::string_view>",
}

# what a kernel returns, per target
_STABLE_RETURNS = {
    "Tensor": _STABLE_TENSOR,
    "Tensor?": f"std::optional<{_STABLE_TENSOR}>",
    "Tensor[]": f"std::vector<{_STABLE_TENSOR}>",
    "int": "int64_t",
    "SymInt": "int64_t",
    "float": "double",
    "bool": "bool",
    "str": "std::string",
    "str[]": "std::vector<std::string>",
    "int[]": "std::vector<int64_t>",
    "SymInt[]": "std::vector<int64_t>",
    "float[]": "std::vector<double>",
    "bool[]": "std::vector<bool>",  # refused on the stable target (project/checks.py)
    "ScalarType": "torch::headeronly::ScalarType",
}
_CLASSIC_RETURNS = {
    **_STABLE_RETURNS,
    "Tensor": _CLASSIC_TENSOR,
    "Tensor?": f"std::optional<{_CLASSIC_TENSOR}>",
    "Tensor[]": f"std::vector<{_CLASSIC_TENSOR}>",
    "SymInt": "c10::SymInt",
    "SymInt[]": "std::vector<c10::SymInt>",
    "bool[]": "c10::List<bool>",  # the dispatcher takes no std::vector<bool>
    "ScalarType": "at::ScalarType",
}
# members of tuple arguments (classic only: the stable ABI has no tuple arguments). torch's
# schema parser keeps a tuple's members as their plain types (`(int, SymInt)` registers as
# `(int, int)`), so a SymInt member is an int64_t: c10::SymInt fails the schema check at load.
_CLASSIC_TUPLE_MEMBERS = {
    "int": "int64_t",
    "SymInt": "int64_t",
    "float": "double",
    "bool": "bool",
}


@dataclass(frozen=True)
class CppType:
    """What one target needs: tensor type, parameter types, check macro, includes."""

    target: str

    @property
    def tensor(self) -> str:
        return _STABLE_TENSOR if self.target == "stable" else _CLASSIC_TENSOR

    @property
    def check(self) -> str:
        return "STD_TORCH_CHECK" if self.target == "stable" else "TORCH_CHECK"

    @property
    def table(self) -> dict[str, str]:
        return STABLE_TYPES if self.target == "stable" else CLASSIC_TYPES


def _strip_const_ref(text: str) -> str:
    if text.startswith("const ") and text.endswith("&"):
        return text[len("const ") : -1]
    return text


def _tuple_type(kind: SchemaType, target: str) -> str | None:
    inner = kind.unwrapped
    if target != "classic" or inner.kind is not TypeKind.TUPLE:
        return None
    members = [_CLASSIC_TUPLE_MEMBERS.get(m.name) for m in inner.items]
    if any(m is None for m in members):
        return None
    text = f"std::tuple<{', '.join(m for m in members if m)}>"
    return f"std::optional<{text}>" if kind.is_optional else text


def arg_type(kind: SchemaType, target: str) -> str:
    """The C++ parameter type of a schema type; ValueError if the target cannot carry it."""
    family = kind.family
    table = CppType(target).table
    if family in table:
        return table[family]
    if target == "classic" and family in _CLASSIC_OPTIONAL:
        return _CLASSIC_OPTIONAL[family]
    if kind.is_optional and kind.items[0].family in table:
        return f"std::optional<{_strip_const_ref(table[kind.items[0].family])}>"
    tuple_type = _tuple_type(kind, target)
    if tuple_type is not None:
        return tuple_type
    raise ValueError(f"the {target} C++ target cannot carry schema type {kind.spelling}")


def return_type(rets: tuple[Ret, ...], target: str) -> str:
    table = _STABLE_RETURNS if target == "stable" else _CLASSIC_RETURNS
    parts = [table[r.family] for r in rets]
    if not parts:
        return "void"
    if len(parts) == 1:
        return parts[0]
    return f"std::tuple<{', '.join(parts)}>"


def parameters(op: OpSpec, target: str | None = None) -> str:
    """The kernels' C++ parameters, under their C++ names (Note [Generated names])."""
    target = target or op.cpp_target
    names = cpp_parameter_names(op)
    return ", ".join(f"{arg_type(a.type, target)} {names[a.name]}" for a in op.args)


def kernel_name(op: OpSpec, device: str) -> str:
    return f"{op.module}_{device}"


def cpp_string(text: str) -> str:
    """A C++ string literal for `text` (schemas, messages, paths)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def target_version_hex(version: str) -> str:
    """`TORCH_TARGET_VERSION` for "2.10": major in byte 7, minor in byte 6."""
    major, minor = (int(p) for p in version.split("."))
    return f"0x{major:02x}{minor:02x}000000000000"
