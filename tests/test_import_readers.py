"""`opgen import`'s readers: the C++ tokenizer and registration reader, the Python `ast` reader."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from opgen.adopt.cpp_reader import read_cpp
from opgen.adopt.cpp_tokens import TokenizeError, tokenize
from opgen.adopt.found import Found
from opgen.adopt.py_reader import SchemaInferenceError, infer_schema, read_python
from opgen.adopt.read import read_sources
from opgen.errors import Diagnostic


def _cpp(source: str, name: str = "ext.cpp") -> tuple[Found, list[Diagnostic]]:
    found, problems = Found(), []
    read_cpp(Path(name), textwrap.dedent(source), found, problems)
    return found, problems


def _py(source: str) -> tuple[Found, list[Diagnostic]]:
    found, problems = Found(), []
    read_python(Path("mod.py"), textwrap.dedent(source), found, problems)
    return found, problems


def test_string_literals_escapes_raw_and_comments():
    source = r"""
    // m.def("not me")
    /* m.def("nor me") */ "a\"b\x41\n" u8"c" R"delim(x)" y)delim" '"'
    #define X "in a macro" \
       "continued"
    """
    strings = [t.text for t in tokenize(source) if t.kind == "string"]
    assert strings == ['a"bA\n', "c", 'x)" y']


def test_unterminated_literal_names_its_line():
    with pytest.raises(TokenizeError) as exc:
        tokenize('\n\nm.def("oops);\n')
    assert exc.value.line == 3


def test_defs_split_concatenated_and_raw_with_any_variable_name():
    found, problems = _cpp("""
        TORCH_LIBRARY(mylib, ops) {
          ops.def("a(Tensor x) "
                  "-> Tensor");
          ops.def(R"(b(Tensor! x, Tensor!? y, SymInt n) -> ())");
          m.def("not_the_library_variable(Tensor x) -> Tensor");
        }
        """)
    assert problems == []
    assert [(o.qualname, o.schema, o.line) for o in found.ops] == [
        ("mylib::a", "(Tensor x) -> Tensor", 3),
        ("mylib::b", "(Tensor! x, Tensor!? y, SymInt n) -> ()", 5),
    ]


def test_impl_blocks_and_impl_forms_give_devices():
    found, _ = _cpp("""
        TORCH_LIBRARY_FRAGMENT(mylib, m) {
          m.def("f(Tensor x) -> Tensor", &f_composite);
          m.impl("g", torch::kCPU, &g_cpu);
          m.impl("h", torch::dispatch(c10::DispatchKey::CUDA, TORCH_FN(h_cuda)));
        }
        STABLE_TORCH_LIBRARY_IMPL(mylib, CPU, m) {
          m.impl("k", TORCH_BOX(&ns::k_cpu));
        }
        TORCH_LIBRARY_IMPL(mylib, CompositeExplicitAutograd, m) { m.impl("e", e_any); }
        """)
    kernels = {(o.name, k.function, k.device) for o in found.ops for k in o.kernels}
    assert kernels == {
        ("f", "f_composite", "cpu"),
        ("f", "f_composite", "cuda"),
        ("g", "g_cpu", "cpu"),
        ("h", "h_cuda", "cuda"),
        ("k", "ns::k_cpu", "cpu"),
        ("e", "e_any", "cpu"),
        ("e", "e_any", "cuda"),
    }
    assert any("CompositeImplicitAutograd" in n for o in found.ops for n in o.notes)


def test_unreadable_def_is_reported_at_its_line_and_skipped():
    found, problems = _cpp("""
        TORCH_LIBRARY(mylib, m) {
          m.def(kSchema);
          m.def("ok(Tensor x) -> Tensor");
        }
        """)
    assert [o.name for o in found.ops] == ["ok"]
    assert [(p.line, p.level) for p in problems] == [(3, "error")]
    assert "not a string literal" in problems[0].format()


def test_function_definitions_keep_their_declaration_and_linkage():
    found, _ = _cpp("""
        namespace outer { namespace inner {
        at::Tensor k(const at::Tensor& a, /* why */ double c) {
          return a;
        }
        static void s(at::Tensor& a) {}
        }}
        namespace { void hidden() {} }
        template <typename T> void t(T x) {}
        """)
    by_name = {f.name: f for f in found.functions}
    assert set(by_name) == {"k", "s", "hidden"}
    assert by_name["k"].qualname == "outer::inner::k"
    assert by_name["k"].declaration == "at::Tensor k(const at::Tensor& a, /* why */ double c)"
    assert by_name["k"].linkable and not by_name["s"].linkable and not by_name["hidden"].linkable


def test_target_follows_the_api_the_code_uses():
    assert (
        _cpp("#include <torch/all.h>\nat::Tensor f(const at::Tensor& x) { return x; }")[0].target
        == "classic"
    )
    assert (
        _cpp("torch::stable::Tensor f(torch::stable::Tensor x) { return x; }")[0].target == "stable"
    )


def test_impls_in_other_files_join_their_defs(tmp_path):
    (tmp_path / "defs.cpp").write_text(
        'TORCH_LIBRARY(mylib, m) { m.def("f(Tensor x) -> Tensor"); }'
    )
    (tmp_path / "impls.cpp").write_text(
        'TORCH_LIBRARY_IMPL(mylib, CPU, m) { m.impl("f", &f_cpu); m.impl("nope", &n); }'
    )
    problems: list[Diagnostic] = []
    found = read_sources(sorted(tmp_path.iterdir()), problems)
    assert [(o.qualname, [k.function for k in o.kernels]) for o in found.ops] == [
        ("mylib::f", ["f_cpu"])
    ]
    assert [p.level for p in problems] == ["warning"]  # the impl of an op no file defines


PY_MODULE = """
import numpy as np
import torch
from torch import Tensor
from typing import Optional, Sequence


@torch.library.custom_op("pyfix::scale_", mutates_args={"out"}, device_types=("cpu", "cuda"))
def scale_(x: Tensor, out: Tensor, alpha: float = 2.0, ks: Optional[Sequence[int]] = None,
           n: int = -3, s: str = "a", f: bool = True, w: Optional[Tensor] = None, *, k: float = 0.5) -> None:
    out.copy_(x * alpha)


@torch.library.custom_op("pyfix::pair", mutates_args=())
def pair(xs: list[Tensor], d: torch.dtype) -> tuple[Tensor, Tensor]:
    return xs[0].to(d), xs[1].to(d)


@pair.register_fake
def _(xs, d):
    return torch.empty_like(xs[0]), torch.empty_like(xs[1])


def _backward(ctx, g1, g2):
    return [g1, g2], None


def _setup(ctx, inputs, output):
    pass


pair.register_autograd(_backward, setup_context=_setup)

lib = torch.library.Library("pyfix", "FRAGMENT")
lib.define("twice(Tensor x) -> Tensor")


def twice_cpu(x):
    return x * 2


lib.impl("twice", twice_cpu, "CPU")
"""


def test_python_registrations():
    found, problems = _py(PY_MODULE)
    assert problems == []
    ops = {o.qualname: o for o in found.ops}
    assert set(ops) == {"pyfix::scale_", "pyfix::pair", "pyfix::twice"}
    assert sorted(ops["pyfix::scale_"].python_kernels) == ["cpu", "cuda"]
    assert ops["pyfix::pair"].schema == "(Tensor[] xs, ScalarType d) -> (Tensor, Tensor)"
    assert ops["pyfix::pair"].fake is not None and ops["pyfix::pair"].fake.line == 20
    assert [f.name for f in ops["pyfix::pair"].autograd] == ["_backward", "_setup"]
    assert ops["pyfix::twice"].python_kernels["cpu"].name == "twice_cpu"
    assert ops["pyfix::twice"].schema == "(Tensor x) -> Tensor"


def test_inferred_schemas_match_torch(tmp_path):
    """infer_schema without torch gives what torch.library.infer_schema gives."""
    torch = pytest.importorskip("torch")
    namespace: dict[str, object] = {}
    exec(
        compile(PY_MODULE.split("lib = ")[0], "mod.py", "exec"), namespace
    )  # the fixture, not user code
    found, _ = _py(PY_MODULE)
    for op in found.ops:
        if op.name == "twice":
            continue
        theirs = getattr(torch.ops.pyfix, op.name).default._schema
        ours = torch._C.parse_schema(f"{op.qualname}{op.schema}")
        assert ours == theirs, (str(ours), str(theirs))


def test_schema_inference_refuses_what_torch_refuses():
    fn = ast.parse("def f(x: Tensor, ks: Sequence[int] = ()) -> Tensor: ...").body[0]
    assert isinstance(fn, ast.FunctionDef)
    with pytest.raises(SchemaInferenceError):
        infer_schema(fn, set())
    fn = ast.parse("def f(x: Tensor, n: int) -> Tensor: ...").body[0]
    assert isinstance(fn, ast.FunctionDef)
    with pytest.raises(SchemaInferenceError):
        infer_schema(fn, {"n"})


def test_python_problems_name_their_line():
    _, problems = _py(
        "import torch\n\n@torch.library.custom_op(NAME, mutates_args=())\ndef f(x): ...\n"
    )
    assert [(p.line, p.level) for p in problems] == [(3, "error")]
