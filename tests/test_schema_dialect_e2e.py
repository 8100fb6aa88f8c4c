"""Real schemas pasted verbatim into fresh projects: generated, built, imported, registered with
their meaning, and their generated tests run.

- a Python project: non-tensor and optional returns (lists of ints, floats, bools, SymInts too),
  Layout and MemoryFormat arguments with their defaults, a string default written with octal
  escapes (UTF-8 bytes, as torch reads them), an in-place op (Tag.inplace), an out= op
  (Tag.out), a view, flash-attention's `_flash_attn_backward` as `infer_schema` writes it (writes
  dq/dk/dv and returns a tensor), an op called `RuntimeError` (its refusing backward must not call
  it), arguments called `grad`, `type`, `input`, `ctx`, `result`, `torch`, `_call`, `len`,
  `out`, `F`, `math`, `grads` and `_kernel` (with gradient formulas reading both the argument
  `grad` and the incoming gradient), a tuple argument, a library op on two devices, and an op
  with only a name and a schema;
- C++ projects (stable and classic ABI): vLLM's `rotary_embedding` verbatim (`Tensor!`,
  `Tensor!?`), an in-place op, a mutating op that returns, arguments `EOF`, `NULL`, `x`, `x_c`,
  `errno`, `int`, `std`, `at`, `c10`, `_kernel`, a `(Tensor, int)` return, list returns
  (`bool[]` on the classic target only), Layout and MemoryFormat arguments and an octal-escaped
  string default.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _cpp_support import opgen

pytestmark = pytest.mark.slow  # builds fresh projects and runs their generated tests

HERE = Path(__file__).resolve().parent
PLACEHOLDER = re.compile(
    r"^[ \t]*(raise .*|(STD_)?TORCH_CHECK\(false, .*)(#|//) opgen: placeholder$", re.M
)


def _project(root: Path, namespace: str, options: str, specs: dict[str, str]) -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(
        f'[project]\nnamespace = "{namespace}"\npackage = "{namespace}"\n\n[options]\n{options}'
    )
    for name, text in specs.items():
        (root / "ops" / f"{name}.toml").write_text(textwrap.dedent(text).lstrip())
    opgen("generate", cwd=root)
    return root


def _implement(path: Path, body: str) -> None:
    text = path.read_text()
    assert PLACEHOLDER.search(text), path
    indent = "  " if path.suffix in (".cpp", ".cu") else "    "
    code = textwrap.indent(textwrap.dedent(body).strip("\n"), indent)
    path.write_text(PLACEHOLDER.sub(lambda _: code, text, count=1))


def _check_registered_schemas(root: Path, namespace: str) -> None:
    """Each op torch registered has the meaning of the schema its spec pastes."""
    code = f"""
import sys, tomllib, pathlib
sys.path[:0] = [{str(root)!r}, {str(HERE)!r}]
import torch, {namespace}
from _schema_meaning import differences
problems = []
for spec in sorted(pathlib.Path("ops").glob("*.toml")):
    data = tomllib.loads(spec.read_text())
    name = data["name"].split("::")[1]
    op, _, overload = name.partition(".")
    registered = getattr(getattr(torch.ops.{namespace}, op), overload or "default")._schema
    pasted = torch._C.parse_schema("{namespace}::" + name + data["schema"])
    problems += [f"{{spec.name}}: {{d}}" for d in differences(registered, pasted)]
print("\\n".join(problems) or "same meaning")
"""
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "same meaning", run.stdout


def _generated_tests(root: Path) -> tuple[set[str], str]:
    """Run the project's generated tests: (ids of the failed tests, the output)."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "tests"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    failed = set(re.findall(r"^FAILED (\S+)", run.stdout, re.M))
    assert "passed" in run.stdout, run.stdout + run.stderr
    return failed, run.stdout


# Layout and MemoryFormat arguments, their defaults and None, a string default torch reads as
# the UTF-8 bytes of "é" (the kernel sees "é"), and an int[] return.
ENUMS_SPEC = """
    name = "NS::enums"
    schema = '(Tensor x, Layout layout=strided, MemoryFormat memory_format=contiguous_format, Layout? maybe=None, MemoryFormat? fmt=None, str tag="\\303\\251") -> int[]'
    [fake]
    expr = "ENUMS"
    [test]
    reference = "ENUMS"
    [[test.samples]]
    x = {shape = [2, 3]}
    [[test.samples]]
    x = {shape = [4]}
    layout = "strided"
    memory_format = "channels_last"
    maybe = "sparse_coo"
    fmt = "preserve_format"
    tag = "a"
"""
ENUMS_EXPR = (
    "[x.dim(), 7 if tag == 'é' else 0, int(layout == torch.strided), "
    "int(memory_format == torch.channels_last), int(maybe == torch.sparse_coo), "
    "int(fmt == torch.preserve_format)]"
)
LISTS_SPEC = """
    name = "NS::lists"
    schema = "(Tensor x) -> (float[], SymInt[]BOOLS)"
    [fake]
    expr = ["[1.5, -2.0]", "[x.shape[0]]"FAKE_BOOLS]
    [test]
    reference = "([1.5, -2.0], [x.shape[0]]REF_BOOLS)"
    [[test.samples]]
    x = {shape = [3]}
"""


def _enums_spec(namespace: str) -> str:
    return ENUMS_SPEC.replace("NS", namespace).replace('"ENUMS"', repr(ENUMS_EXPR))


def _lists_spec(namespace: str, bools: bool) -> str:
    spec = LISTS_SPEC.replace("NS", namespace)
    for key, value in (
        ("FAKE_BOOLS", ', "[True, False]"'),
        ("REF_BOOLS", ", [True, False]"),
        ("BOOLS", ", bool[]"),
    ):
        spec = spec.replace(key, value if bools else "")
    return spec


PY_SPECS = {
    "tint": """
        name = "dialect_py::tint"
        schema = "(Tensor x) -> (Tensor, Tensor, SymInt, int)"
        [fake]
        expr = ["x.new_empty(x.shape)", "x.new_empty(x.shape)", "x.shape[0]", "3"]
        [test]
        reference = "(x + 1, x * 2, x.shape[0], 3)"
        [[test.samples]]
        x = {shape = [4]}
    """,
    "count": """
        name = "dialect_py::count"
        schema = "(Tensor x) -> int"
        [fake]
        expr = "x.numel()"
        [test]
        reference = "x.numel()"
        [[test.samples]]
        x = {shape = [4, 2]}
    """,
    "positives": """
        name = "dialect_py::positives"
        schema = "(Tensor x) -> SymInt"
        [fake]
        expr = "torch.library.get_ctx().new_dynamic_size()"
        [test]
        reference = "int((x > 0).sum())"
        [[test.samples]]
        x = {shape = [6]}
    """,
    "halfsize": """
        name = "dialect_py::halfsize"
        schema = "(Tensor x) -> float"
        [fake]
        expr = "x.dim() / 2"
        [test]
        reference = "x.dim() / 2"
        [[test.samples]]
        x = {shape = [4, 2]}
    """,
    "labels": """
        name = "dialect_py::labels"
        schema = "(Tensor x, str prefix = 'l') -> str[]"
        [fake]
        expr = "[prefix + '0', prefix + '1']"
        [test]
        reference = "['l0', 'l1']"
        [[test.samples]]
        x = {shape = [2]}
    """,
    "dtype_code": """
        name = "dialect_py::dtype_code"
        schema = "(Tensor x) -> ScalarType"
        [fake]
        expr = "x.dtype"
        [test]
        reference = "6 if x.dtype == torch.float32 else 7"
        [[test.samples]]
        x = {shape = [2]}
    """,
    "maybe": """
        name = "dialect_py::maybe"
        schema = "(Tensor x, bool give) -> (Tensor, Tensor?)"
        [fake]
        expr = ["x.new_empty(x.shape)", "x.new_empty(x.shape) if give else None"]
        [test]
        reference = "(x + 1, x * 2 if give else None)"
        [[test.samples]]
        x = {shape = [3]}
        give = true
        [[test.samples]]
        x = {shape = [3]}
        give = false
    """,
    "add_": """
        name = "dialect_py::add_"
        schema = "(Tensor(a!) x, Tensor y) -> Tensor(a!)"
        [test]
        reference = "x + y"
        [[test.samples]]
        x = {shape = [3], requires_grad = false}
        y = {shape = [3]}
    """,
    "add_out": """
        name = "dialect_py::add.out"
        schema = "(Tensor x, Tensor y, *, Tensor(a!) out) -> Tensor(a!)"
        [test]
        reference = "x + y"
        [[test.samples]]
        x = {shape = [3]}
        y = {shape = [3]}
        out = {shape = [3], requires_grad = false}
    """,
    "flat": """
        name = "dialect_py::flat"
        schema = "(Tensor(a) x) -> Tensor(a)"
        [fake]
        expr = "x.view(-1)"
        [test]
        reference = "x.reshape(-1)"
        [[test.samples]]
        x = {shape = [2, 3]}
    """,
    "flash_bwd": """
        name = "dialect_py::_flash_attn_backward"
        schema = "(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor softmax_lse, Tensor(a6!)? dq, Tensor(a7!)? dk, Tensor(a8!)? dv, float dropout_p, float softmax_scale, bool causal, SymInt window_size_left, SymInt window_size_right, float softcap, Tensor? alibi_slopes, bool deterministic, Tensor? rng_state=None) -> Tensor"
        [fake]
        expr = "softmax_lse.new_empty(softmax_lse.shape)"
        [test]
        reference = "(dout * out).sum(-1)"
        [[test.samples]]
        dout = {shape = [2, 3, 4]}
        q = {shape = [2, 3, 4]}
        k = {shape = [2, 3, 4]}
        v = {shape = [2, 3, 4]}
        out = {shape = [2, 3, 4]}
        softmax_lse = {shape = [2, 3]}
        dq = {shape = [2, 3, 4], requires_grad = false}
        dk = {shape = [2, 3, 4], requires_grad = false}
        dv = {shape = [2, 3, 4], requires_grad = false}
        dropout_p = 0.0
        softmax_scale = 0.5
        causal = false
        window_size_left = -1
        window_size_right = -1
        softcap = 0.0
        deterministic = false
    """,
    "flag": """
        name = "dialect_py::flag"
        schema = "(Tensor x) -> bool"
        [fake]
        expr = "x.numel() > 0"
        [test]
        reference = "x.numel() > 0"
        [[test.samples]]
        x = {shape = [2]}
    """,
    "split": """
        name = "dialect_py::split"
        schema = "(Tensor x) -> (Tensor values, Tensor[] parts)"
        [fake]
        expr = ["x.new_empty(x.shape)", "[x.new_empty(x.shape[0] - x.shape[0] // 2), x.new_empty(x.shape[0] // 2)]"]
        [test]
        reference = "(x * 2, list(x.tensor_split(2)))"
        [[test.samples]]
        x = {shape = [4]}
    """,
    "grouped": """
        name = "dialect_py::grouped"
        schema = "(Tensor x, (int, int)? group_shape=None, float padding_value = 0) -> Tensor"
        [fake]
        like = "x"
        [test]
        reference = "x + (0 if group_shape is None else group_shape[0] * group_shape[1]) + padding_value"
        [[test.samples]]
        x = {shape = [3]}
        group_shape = [2, 3]
        [[test.samples]]
        x = {shape = [3]}
    """,
    "refusal": """
        name = "dialect_py::RuntimeError"
        schema = "(Tensor x) -> Tensor"
        [fake]
        like = "x"
        [test]
        reference = "x + 1"
        [[test.samples]]
        x = {shape = [3]}
    """,
    "names": """
        name = "dialect_py::names"
        schema = "(Tensor grad, Tensor type, Tensor input, int ctx=2, float result=1.0, Tensor? torch=None, int _call=0, int len=0, Tensor? out=None, int F=0, int math=0, int grads=0, int _kernel=0) -> Tensor"
        [grad]
        grad = "grad_ * type * input"
        "type, input" = "(grad_ * grad * input, grad_ * grad * type)"
        [fake]
        like = "grad"
        [test]
        reference = "grad * type * input"
        dtypes = ["float64"]
        [[test.samples]]
        grad = {shape = [3]}
        type = {shape = [3]}
        input = {shape = [3]}
    """,
    "twodev": """
        name = "dialect_py::twodev"
        schema = "(Tensor x) -> Tensor"
        devices = ["cpu", "cuda"]
        registration = "library"
        [fake]
        like = "x"
        [test]
        reference = "x * 3"
        [[test.samples]]
        x = {shape = [3]}
    """,
    "bare": """
        name = "dialect_py::bare"
        schema = "(Tensor x, Tensor x_c, *, Tensor? w=None) -> Tensor"
    """,
    "enums": _enums_spec("dialect_py"),
    "lists": _lists_spec("dialect_py", bools=True),
}

PY_KERNELS = {
    "tint": "return x + 1, x * 2, x.shape[0], 3",
    "count": "return x.numel()",
    "positives": "return int((x > 0).sum())",
    "halfsize": "return x.dim() / 2",
    "labels": "return [prefix + '0', prefix + '1']",
    "dtype_code": "return x.dtype",
    "maybe": "return x + 1, (x * 2 if give else None)",
    "add_": "x.add_(y)\nreturn x",
    "add_out": "torch.add(x, y, out=out)\nreturn out",
    "flat": "return x.view(-1)",
    "_flash_attn_backward": """
        # written through NumPy, which does not bump their version counters
        for written, value in ((dq, dout * softmax_scale), (dk, q * softmax_scale), (dv, v)):
            if written is not None:
                written.detach().numpy()[...] = value.detach().numpy()
        return (dout * out).sum(-1)
    """,
    "names": "return grad * type * input",
    "RuntimeError": "return x + 1",
    "flag": "return x.numel() > 0",
    "split": "return x * 2, [part.clone() for part in x.tensor_split(2)]",
    "grouped": "return x + (0 if group_shape is None else group_shape[0] * group_shape[1]) + padding_value",
    "twodev": "return x * 3",
    "enums": f"return {ENUMS_EXPR}",
    "lists": "return [1.5, -2.0], [x.shape[0]], [True, False]",
}


@pytest.fixture(scope="module")
def python_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = _project(
        tmp_path_factory.mktemp("dialect") / "py",
        "dialect_py",
        'compile_backend = "aot_eager"\n',
        PY_SPECS,
    )
    for module, body in PY_KERNELS.items():
        _implement(root / "dialect_py" / "kernels" / f"{module}.py", body)
    return root


def test_python_ops_register_with_the_pasted_meaning(python_project: Path) -> None:
    _check_registered_schemas(python_project, "dialect_py")


def test_python_ops_pass_their_generated_tests(python_project: Path) -> None:
    failed, output = _generated_tests(python_project)
    # the op with only a name and a schema generates; its tests say what to add
    assert failed == {
        "tests/test_bare.py::test_matches_reference[cpu]",
        "tests/test_bare.py::test_opcheck[cpu]",
        "tests/test_bare.py::test_compile_matches_eager[cpu]",
    }, output
    assert "ops/bare.toml has no [[test.samples]]: add one, e.g." in output


def test_what_the_generated_tests_assert(python_project: Path) -> None:
    tests = python_project / "tests"
    assert 'COMPILE = "unsupported"' in (tests / "test_count.py").read_text()
    assert 'COMPILE = "unsupported"' in (tests / "test_labels.py").read_text()
    assert (
        "COMPILE" not in (tests / "test_positives.py").read_text()
    )  # data-dependent SymInt compiles
    flat = (tests / "test_flat.py").read_text()
    assert (
        'COMPILE = "alias_error"' in flat and "operator whose output has alias annotations" in flat
    )
    assert "COMPILE" not in (tests / "test_add_.py").read_text()  # tagged: compiles
    assert (
        "test_written_arguments_change_version"
        in (tests / "test__flash_attn_backward.py").read_text()
    )


def test_tags_and_registration(python_project: Path) -> None:
    generated = python_project / "dialect_py" / "_generated"
    assert "tags=(torch.Tag.inplace,)" in (generated / "add_.py").read_text()
    assert "tags=(torch.Tag.out,)" in (generated / "add_out.py").read_text()
    flash = (generated / "_flash_attn_backward.py").read_text()
    # it writes arguments and returns values: a custom_op, whose backward raises without formulas
    assert '@torch.library.custom_op(\n    "dialect_py::_flash_attn_backward"' in flash
    assert "register_autograd" not in flash


def test_a_library_op_on_two_devices_defines_its_kernel_once(python_project: Path) -> None:
    kernel = (python_project / "dialect_py" / "kernels" / "twodev.py").read_text()
    assert kernel.count("def twodev(") == 1
    module = (python_project / "dialect_py" / "_generated" / "twodev.py").read_text()
    assert '"CPU")' in module and '"CUDA")' in module


def test_an_op_named_like_a_builtin_still_refuses_backward(python_project: Path) -> None:
    """The refusing backward of an op called RuntimeError raises, and does not call the op."""
    code = (
        "import torch, dialect_py\n"
        "out = dialect_py.RuntimeError(torch.ones(2, requires_grad=True))\n"
        "try:\n"
        "    out.sum().backward()\n"
        "except RuntimeError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=python_project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "RuntimeError dialect_py::RuntimeError has no gradient formula" in run.stdout, (
        run.stdout + run.stderr
    )


def test_a_spec_with_only_name_and_schema_generates_a_raising_fake(python_project: Path) -> None:
    code = (
        "import torch, dialect_py\n"
        "from torch._subclasses.fake_tensor import FakeTensorMode\n"
        "with FakeTensorMode():\n"
        "    x = torch.empty(3)\n"
        "    try:\n"
        "        torch.ops.dialect_py.bare(x, x)\n"
        "    except NotImplementedError as exc:\n"
        "        print(exc)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=python_project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (
        "dialect_py::bare has no fake kernel: add a [fake] table to ops/bare.toml" in run.stdout
    ), run.stderr


CPP_SPECS = {
    "rotary_embedding": """
        name = "dialect_cpp::rotary_embedding"
        schema = "(Tensor positions, Tensor! query,                 Tensor!? key, int head_size,                 Tensor cos_sin_cache, bool is_neox) -> ()"
        [test]
        reference = "(ROT(query), ROT(key))"
        [[test.samples]]
        positions = {shape = [4], dtype = "int64", low = 0, high = 8}
        query = {shape = [4, 16], requires_grad = false}
        key = {shape = [4, 8], requires_grad = false}
        head_size = 8
        cos_sin_cache = {shape = [8, 8]}
        is_neox = true
    """,
    "scale_": """
        name = "dialect_cpp::scale_"
        schema = "(Tensor(a!) x, float alpha) -> Tensor(a!)"
        [test]
        reference = "x * alpha"
        [[test.samples]]
        x = {shape = [5], requires_grad = false}
        alpha = 3.0
    """,
    "bwd": """
        name = "dialect_cpp::bwd"
        schema = "(Tensor dout, Tensor(a1!)? dq, float scale) -> Tensor"
        [fake]
        like = "dout"
        [test]
        reference = "dout * 2"
        [[test.samples]]
        dout = {shape = [5]}
        dq = {shape = [5], requires_grad = false}
        scale = 2.0
    """,
    "names": """
        name = "dialect_cpp::names"
        schema = "(Tensor EOF, Tensor NULL, Tensor x, Tensor x_c, int errno=0, int int=1, Tensor? std=None, int at=0, int c10=0, int _kernel=0) -> (Tensor, int)"
        [fake]
        expr = ["x.new_empty(x.shape)", "int"]
        [test]
        reference = "(EOF + NULL + x + x_c, int)"
        [[test.samples]]
        EOF = {shape = [3]}
        NULL = {shape = [3]}
        x = {shape = [3]}
        x_c = {shape = [3]}
    """,
}
# GPT-NeoX rotary embedding of a [tokens, heads * head_size] tensor, as one expression
_HALF = "head_size // 2"
_CACHE = "cos_sin_cache[positions][:, None]"


def _rotated(name: str) -> str:
    t = f"{name}.view({name}.shape[0], -1, head_size)"
    first, second = f"{t}[..., :{_HALF}]", f"{t}[..., {_HALF}:]"
    cos, sin = f"{_CACHE}[..., :{_HALF}]", f"{_CACHE}[..., {_HALF}:]"
    return f"torch.cat([{first} * {cos} - {second} * {sin}, {second} * {cos} + {first} * {sin}], -1).view({name}.shape)"


CPP_KERNELS = {
    "rotary_embedding": """
        const int64_t tokens = positions.numel();
        const int64_t rot = cos_sin_cache.size(1);
        const int64_t half = rot / 2;
        const int64_t* pos = positions_c.const_data_ptr<int64_t>();
        const float* cache = cos_sin_cache_c.const_data_ptr<float>();
        auto rotate = [&](const TENSOR& t) {
          float* data = t.mutable_data_ptr<float>();
          const int64_t heads = t.numel() / (tokens * head_size);
          for (int64_t tok = 0; tok < tokens; ++tok) {
            const float* c = cache + pos[tok] * rot;
            for (int64_t h = 0; h < heads; ++h) {
              float* v = data + (tok * heads + h) * head_size;
              for (int64_t i = 0; i < half; ++i) {
                const int64_t i1 = is_neox ? i : 2 * i;
                const int64_t i2 = is_neox ? i + half : 2 * i + 1;
                const float x1 = v[i1], x2 = v[i2];
                v[i1] = x1 * c[i] - x2 * c[half + i];
                v[i2] = x2 * c[i] + x1 * c[half + i];
              }
            }
          }
        };
        rotate(query);
        if (key.has_value()) {
          rotate(*key);
        }
    """,
    "scale_": """
        float* data = x.mutable_data_ptr<float>();
        for (int64_t i = 0; i < x.numel(); ++i) data[i] *= static_cast<float>(alpha);
        return x;
    """,
    "bwd": """
        auto out = EMPTY_LIKE(dout_c);
        const float* d = dout_c.const_data_ptr<float>();
        float* o = out.mutable_data_ptr<float>();
        float* q = dq.has_value() ? dq->mutable_data_ptr<float>() : nullptr;
        for (int64_t i = 0; i < dout_c.numel(); ++i) {
          o[i] = 2 * d[i];
          if (q != nullptr) q[i] = d[i] * static_cast<float>(scale);
        }
        return out;
    """,
    "enums": """
        const bool e_acute = std::string(tag) == "\\xc3\\xa9";
        return {x.dim(), e_acute ? 7 : 0, layout == NS::Layout::Strided,
                memory_format == NS::MemoryFormat::ChannelsLast,
                maybe.has_value() && *maybe == NS::Layout::Sparse,
                fmt.has_value() && *fmt == NS::MemoryFormat::Preserve};
    """,
    "lists": """
        return {std::vector<double>{1.5, -2.0}, {x.size(0)}BOOLS};
    """,
    "names": """
        // EOF, NULL, errno and int are C++ macros or keywords: their parameters end in _
        auto out = EMPTY_LIKE(EOF_c);
        const float* a = EOF_c.const_data_ptr<float>();
        const float* b = NULL_c.const_data_ptr<float>();
        const float* c = x_c_.const_data_ptr<float>();  // x's contiguous copy (x_c is an argument)
        const float* d = x_c_c.const_data_ptr<float>();
        float* o = out.mutable_data_ptr<float>();
        for (int64_t i = 0; i < out.numel(); ++i) o[i] = a[i] + b[i] + c[i] + d[i];
        return std::make_tuple(out, int_);
    """,
}


@pytest.mark.parametrize("target", ["stable", "classic"])
def test_cpp_ops_build_register_and_pass_their_generated_tests(tmp_path: Path, target: str) -> None:
    specs = dict(CPP_SPECS)
    specs["enums"] = _enums_spec("dialect_cpp")
    specs["lists"] = _lists_spec("dialect_cpp", bools=target == "classic")  # stable: no bool[]
    specs["rotary_embedding"] = specs["rotary_embedding"].replace(
        "(ROT(query), ROT(key))", f"({_rotated('query')}, {_rotated('key')})"
    )
    options = f'backend = "cpp"\ncpp_target = "{target}"\ncompile_backend = "aot_eager"\n'
    root = _project(tmp_path / target, "dialect_cpp", options, specs)
    tensor = "torch::stable::Tensor" if target == "stable" else "at::Tensor"
    empty_like = "torch::stable::empty_like" if target == "stable" else "at::empty_like"
    enums = "torch::headeronly" if target == "stable" else "at"
    bools = ", c10::List<bool>({true, false})" if target == "classic" else ""
    for name, body in CPP_KERNELS.items():
        path = root / "csrc" / "cpu" / f"{name}.cpp"
        body = body.replace("TENSOR", tensor).replace("EMPTY_LIKE", empty_like)
        _implement(path, body.replace("NS::", f"{enums}::").replace("BOOLS", bools))
        if target == "classic":
            path.write_text(
                path.read_text().replace(
                    "#include <cmath>", "#include <cmath>\n\n#include <ATen/ops/empty_like.h>"
                )
            )
    header = (root / "csrc" / "names.h").read_text()
    assert "const torch::stable::Tensor& EOF_" in header or "const at::Tensor& EOF_" in header
    registration = (root / "csrc" / "registration.cpp").read_text()
    if target == "stable":
        # Note [Defining tagged ops]: the tagged op is defined from Python before the library loads
        assert "scale_" not in registration
        assert "tags=(torch.Tag.inplace,)" in (root / "dialect_cpp" / "_library.py").read_text()
    else:
        assert (
            '"scale_(Tensor(a!) x, float alpha) -> Tensor(a!)", {at::Tag::inplace}' in registration
        )
        autograd = (root / "csrc" / "registration_autograd.cpp").read_text()
        assert (
            'm.impl("rotary_embedding", torch::CppFunction::makeFromBoxedFunction<&bump_versions>());'
            in autograd
        )
        assert (
            'm.impl("bwd", torch::autograd::autogradNotImplementedFallback());'
            in autograd
        )
    opgen("build", cwd=root)
    _check_registered_schemas(root, "dialect_cpp")
    failed, output = _generated_tests(root)
    assert not failed, output
    assert (
        "test_written_arguments_change_version"
        in (root / "tests" / "test_rotary_embedding.py").read_text()
    )
