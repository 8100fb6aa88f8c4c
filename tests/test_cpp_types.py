"""Note [C++ type mapping]: the tables, and a compiled op taking every type on both targets."""

from __future__ import annotations

import pytest

from opgen.api import cpp
from opgen.build.run import foreign_symbols
from opgen.spec.dialect.parser import parse
from opgen.spec.dialect.types import SchemaType

from _cpp_support import CALL_ALL_TYPES, opgen, python, types_project

STABLE = {
    "Tensor": "const torch::stable::Tensor&",
    "Tensor?": "const std::optional<torch::stable::Tensor>&",
    "Tensor[]": "const std::vector<torch::stable::Tensor>&",
    "int": "int64_t",
    "SymInt": "int64_t",
    "float": "double",
    "bool": "bool",
    "str": "std::string",
    "ScalarType": "torch::headeronly::ScalarType",
    "Layout": "torch::headeronly::Layout",
    "MemoryFormat": "torch::headeronly::MemoryFormat",
    "Layout?": "std::optional<torch::headeronly::Layout>",
    "MemoryFormat?": "std::optional<torch::headeronly::MemoryFormat>",
    "Device": "torch::stable::Device",
    "int[]": "std::vector<int64_t>",
    "int[2]": "std::vector<int64_t>",
    "SymInt[]": "std::vector<int64_t>",
    "float[]": "std::vector<double>",
    "bool[]": "std::vector<bool>",
    "int?": "std::optional<int64_t>",
    "float?": "std::optional<double>",
    "str?": "std::optional<std::string>",
    "int[]?": "std::optional<std::vector<int64_t>>",
    "ScalarType?": "std::optional<torch::headeronly::ScalarType>",
    "Tensor?[]": "const std::vector<std::optional<torch::stable::Tensor>>&",
    "Tensor[]?": "const std::optional<std::vector<torch::stable::Tensor>>&",
}

CLASSIC = {
    "Tensor": "const at::Tensor&",
    "Tensor?": "const std::optional<at::Tensor>&",
    "Tensor[]": "at::TensorList",
    "int": "int64_t",
    "SymInt": "c10::SymInt",
    "float": "double",
    "bool": "bool",
    "str": "c10::string_view",
    "Scalar": "const at::Scalar&",
    "ScalarType": "at::ScalarType",
    "Layout": "at::Layout",
    "MemoryFormat": "at::MemoryFormat",
    "Layout?": "std::optional<at::Layout>",
    "MemoryFormat?": "std::optional<at::MemoryFormat>",
    "Device": "at::Device",
    "int[]": "at::IntArrayRef",
    "SymInt[]": "c10::SymIntArrayRef",
    "float[]": "at::ArrayRef<double>",
    "bool[]": "const c10::List<bool>&",
    "int?": "std::optional<int64_t>",
    "SymInt?": "std::optional<c10::SymInt>",
    "str?": "std::optional<c10::string_view>",
    "int[]?": "at::OptionalIntArrayRef",
    "SymInt[]?": "at::OptionalSymIntArrayRef",
    "Scalar?": "const std::optional<at::Scalar>&",
    "Tensor?[]": "const c10::List<std::optional<at::Tensor>>&",
    "Tensor[]?": "std::optional<at::TensorList>",
    "(int, int)?": "std::optional<std::tuple<int64_t, int64_t>>",
    "(int, SymInt, float, bool)": "std::tuple<int64_t, int64_t, double, bool>",
}


def _type(text: str) -> SchemaType:
    return parse(f"({text} a) -> ()").args[0].type


@pytest.mark.parametrize("schema_type, expected", sorted(STABLE.items()))
def test_stable_arg_types(schema_type, expected):
    assert cpp.arg_type(_type(schema_type), "stable") == expected


@pytest.mark.parametrize("schema_type, expected", sorted(CLASSIC.items()))
def test_classic_arg_types(schema_type, expected):
    assert cpp.arg_type(_type(schema_type), "classic") == expected


@pytest.mark.parametrize(
    "schema_type", ["Scalar", "Scalar?", "Scalar[]", "(int, int)?", "(int, int)"]
)
def test_stable_rejects_scalar_and_tuples(schema_type):
    with pytest.raises(ValueError, match="stable C.. target cannot carry"):
        cpp.arg_type(_type(schema_type), "stable")


RETURNS = {
    "Tensor": ("torch::stable::Tensor", "at::Tensor"),
    "Tensor?": ("std::optional<torch::stable::Tensor>", "std::optional<at::Tensor>"),
    "Tensor[]": ("std::vector<torch::stable::Tensor>", "std::vector<at::Tensor>"),
    "int": ("int64_t", "int64_t"),
    "SymInt": ("int64_t", "c10::SymInt"),
    "float": ("double", "double"),
    "bool": ("bool", "bool"),
    "str": ("std::string", "std::string"),
    "str[]": ("std::vector<std::string>", "std::vector<std::string>"),
    "int[]": ("std::vector<int64_t>", "std::vector<int64_t>"),
    "SymInt[]": ("std::vector<int64_t>", "std::vector<c10::SymInt>"),
    "float[]": ("std::vector<double>", "std::vector<double>"),
    "bool[]": ("std::vector<bool>", "c10::List<bool>"),  # refused on stable: project_checks
    "ScalarType": ("torch::headeronly::ScalarType", "at::ScalarType"),
}


@pytest.mark.parametrize("schema_type, expected", sorted(RETURNS.items()))
def test_return_types(schema_type, expected):
    from opgen.spec.model import Ret

    rets = (Ret("", parse(f"() -> {schema_type}").returns[0].type),)
    assert (cpp.return_type(rets, "stable"), cpp.return_type(rets, "classic")) == expected


def test_void_and_tuple_returns():
    from opgen.spec.model import Ret

    assert cpp.return_type((), "stable") == "void"
    two = tuple(Ret("", r.type) for r in parse("() -> (Tensor, int)").returns)
    assert cpp.return_type(two, "stable") == "std::tuple<torch::stable::Tensor, int64_t>"


def test_target_version_hex():
    assert cpp.target_version_hex("2.10") == "0x020a000000000000"
    assert cpp.target_version_hex("2.9") == "0x0209000000000000"


@pytest.fixture(scope="module", params=[pytest.param("stable", marks=pytest.mark.slow), pytest.param("classic", marks=pytest.mark.slow)])
def built_types(request, tmp_path_factory):
    root = types_project(tmp_path_factory.mktemp(f"types_{request.param}"), request.param)
    opgen("build", "--check-cuda", cwd=root)
    return request.param, root


@pytest.mark.slow  # built_types runs nvcc
def test_every_type_compiles_and_unboxes(built_types):
    """Every argument unboxes: each kernel returns (a starter) or reaches its "not implemented" check."""
    target, root = built_types
    extra = ", 2.5, None, (1, 2)" if target == "classic" else ""
    result = python(CALL_ALL_TYPES % extra, cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == [
        "unboxed",
        "alltypes",
        "unboxed",
        "listret",
        "unboxed",
        "outop",
        "unboxed",
        "allrets",
    ]


@pytest.mark.slow  # built_types runs nvcc
def test_library_symbols(built_types):
    """Note [Build layout]: a stable build imports only C shim functions; a classic one uses ATen's C++ API."""
    target, root = built_types
    if target == "stable":
        assert foreign_symbols(root / "typ" / "_C.abi3.so") == []
    else:
        assert any(s.startswith(("c10::", "at::")) for s in foreign_symbols(root / "typ" / "_C.so"))


@pytest.mark.slow  # built_types runs nvcc
def test_pybind_module(built_types):
    target, root = built_types
    if target != "classic":
        assert list((root / "typ").glob("_pybind*.so")) == [], "pybind is a classic-target option"
        return
    code = "import torch, typ._pybind as p\nout = p.listret_cpu(torch.randn(2))\nprint(type(out).__name__, all(isinstance(t, torch.Tensor) for t in out))"
    result = python(code, cwd=root)
    assert result.stdout.split() == ["list", "True"], result.stdout + result.stderr


_REFUSAL = """
import torch, typ
from torch._subclasses.fake_tensor import FakeTensorMode

with FakeTensorMode():  # the kernels are stubs: fake tensors go through the autograd kernel to the fake
    x = torch.randn(3, requires_grad=True)
    (out,) = typ.listret(x)
    assert out.requires_grad and not typ.listret(x.detach())[0].requires_grad
    try:
        out.sum().backward()
    except RuntimeError as exc:
        print(str(exc).splitlines()[0])
"""


@pytest.mark.slow  # built_types runs nvcc
def test_backward_refusal(built_types):
    """Note [Backward refusal]: classic registers it in C++, stable in Python; both refuse alike."""
    target, root = built_types
    result = python(_REFUSAL, cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    message = "typ::listret has no gradient formula: add a [grad] table to listret.toml"
    assert result.stdout.splitlines() == [message]
    assert (root / "csrc" / "registration_autograd.cpp").is_file() == (target == "classic")
