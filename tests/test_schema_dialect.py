"""opgen reads PyTorch's schema dialect as torch does, and registers schemas with the same meaning.

Every schema of tests/data/real_schemas.toml (138 real operators, verbatim) and
of the edge-case table below is parsed by opgen and by `torch._C.parse_schema`
and compared argument by argument: name, type (by `kind()`: `str()` prints
SymInt as int), list size, default value and its type, keyword-only, and the
alias annotation (`is_write` and the number of sets; the set names too, except
for a bare `!`, which torch names `$0` and opgen registers as a named set).
The schema opgen registers (what goes into `Library.define` and C++ `m.def`)
is compared the same way, and defined in a scratch namespace.
"""

from __future__ import annotations

import math
import tomllib
import warnings
from pathlib import Path
from typing import Any

import pytest

from opgen.errors import OpgenError
from opgen.spec.dialect.parser import SchemaError, parse
from opgen.spec.dialect.printer import format_schema
from opgen.spec.dialect.rules import schema_problems
from opgen.spec.dialect.types import Param, TypeKind

from _specs import op_from_toml

torch = pytest.importorskip("torch")

CORPUS = tomllib.loads((Path(__file__).parent / "data" / "real_schemas.toml").read_text())["schema"]
# real schemas opgen refuses on purpose, and why
CORPUS_REFUSED = {
    "_C::merge_attn_states": "int carries the alias annotation !; torch.compile and opcheck's aot test then fail",
    "_C::convert_vertical_slash_indexes": "arguments 5 and 6 are both named 'q_seqlens'",
}


def _torch_type(kind: Any) -> str:
    """A torch JIT type spelled as the schema writes it (`kind()` tells SymInt from int)."""
    name = kind.kind()
    if name == "OptionalType":
        return _torch_type(kind.getElementType()) + "?"
    if name == "ListType":
        return _torch_type(kind.getElementType()) + "[]"
    if name == "TupleType":
        return "(" + ", ".join(_torch_type(e) for e in kind.elements()) + ")"
    return {
        "SymIntType": "SymInt",
        "SymBoolType": "SymBool",
        "NumberType": "Scalar",
        "TensorType": "Tensor",
        "DeviceObjType": "Device",
        "ComplexType": "complex",
        "GeneratorType": "Generator",
    }.get(name, str(kind))


def _default(param: Param) -> Any:
    """opgen's default as torch stores it (dtype names as their code, devices as torch.device)."""
    assert param.default is not None
    value = param.default.value
    if param.type.element == "ScalarType" and isinstance(value, str):
        return _dtype_code(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _dtype_code(name: str) -> int:
    return torch._C.parse_schema(f"ns::op(ScalarType d={name}) -> ()").arguments[0].default_value


def _same_value(ours: Any, theirs: Any) -> bool:
    if isinstance(theirs, torch.device):
        return torch.device(ours) == theirs
    if isinstance(ours, float) and isinstance(theirs, float) and math.isnan(ours):
        return math.isnan(theirs)
    if isinstance(ours, list):
        return ours == theirs and [type(v) for v in ours] == [type(v) for v in theirs]
    return ours == theirs and type(ours) is type(theirs)


def _differences(params: tuple[Any, ...], torch_params: list[Any], arguments: bool) -> list[str]:
    if len(params) != len(torch_params):
        return [f"{len(params)} != {len(torch_params)} parameters"]
    out = []
    for ours, theirs in zip(params, torch_params, strict=True):
        where = ours.name or "return"
        out += _type_differences(where, ours, theirs)
        out += _alias_differences(where, ours.type.annotation, theirs.alias_info)
        if arguments:
            out += _argument_differences(where, ours, theirs)
    return out


def _type_differences(where: str, ours: Any, theirs: Any) -> list[str]:
    """The name, type and list size of one parameter, opgen's against torch's."""
    out = []
    if (ours.name or "") != theirs.name:
        out.append(f"{where}: name {theirs.name!r}")
    if ours.type.family != _torch_type(theirs.real_type):
        out.append(f"{where}: type {ours.type.family} != {_torch_type(theirs.real_type)}")
    inner = ours.type.unwrapped
    size = inner.size if inner.kind is TypeKind.LIST else None
    if size != theirs.N:
        out.append(f"{where}: size {size} != {theirs.N}")
    return out


def _alias_differences(where: str, mine: Any, info: Any) -> list[str]:
    """One parameter's alias annotation, opgen's against torch's (fresh `!` sets by count)."""
    if (mine is None) != (info is None):
        return [f"{where}: alias {mine} != {info}"]
    if mine is None:
        return []
    if mine.is_write != info.is_write or len(mine.before) != len(info.before_set):
        return [f"{where}: alias {mine} != {info}"]
    if mine.fresh is None and not any(str(n).startswith("$") for n in info.before_set):
        if set(mine.before) != set(info.before_set):
            return [f"{where}: alias sets {mine.before} != {info.before_set}"]
    return []


def _argument_differences(where: str, ours: Any, theirs: Any) -> list[str]:
    """An argument's keyword-only flag and default, opgen's against torch's."""
    out = []
    if ours.kwarg_only != theirs.kwarg_only:
        out.append(f"{where}: kwarg_only")
    if (ours.default is not None) != theirs.has_default_value():
        out.append(f"{where}: default presence")
    elif ours.default is not None and not _same_value(_default(ours), theirs.default_value):
        out.append(f"{where}: default {_default(ours)!r} != {theirs.default_value!r}")
    return out


def _compare(text: str) -> list[str]:
    ours, theirs = parse(text), torch._C.parse_schema("ns::op" + text)
    return _differences(ours.args, theirs.arguments, True) + _differences(
        ours.returns, theirs.returns, False
    )


def _registered(name: str, text: str) -> str:
    """The schema opgen registers for `text` (a Python op with only name and schema)."""
    spec = f'name = "mylib::{name}"\nschema = """{text}"""\n'
    return op_from_toml(spec).schema


@pytest.fixture(scope="module")
def scratch() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield torch.library.Library("opgen_dialect_test", "FRAGMENT")


@pytest.mark.parametrize("entry", CORPUS, ids=[f"{e['name']}" for e in CORPUS])
def test_real_schema_parses_and_registers_as_torch_reads_it(
    entry: dict[str, str], scratch: Any
) -> None:
    text = entry["schema"]
    assert _compare(text) == []
    name = entry["name"].split("::")[1].split(".")[0]
    if entry["name"] in CORPUS_REFUSED:
        with pytest.raises(OpgenError, match=CORPUS_REFUSED[entry["name"]].replace("(", "\\(")):
            _registered(name, text)
        return
    registered = _registered(name, text)
    ours = parse(text)
    theirs = torch._C.parse_schema("ns::op" + registered)
    assert _differences(ours.args, theirs.arguments, True) == []
    assert _differences(ours.returns, theirs.returns, False) == []
    index = CORPUS.index(entry)
    scratch.define(f"op{index}{registered}")
    defined = getattr(torch.ops.opgen_dialect_test, f"op{index}").default._schema
    assert _differences(ours.args, defined.arguments, True) == []


def test_the_corpus_is_the_real_one() -> None:
    assert len(CORPUS) == 138
    projects = {e["project"] for e in CORPUS}
    assert {"vllm-project/vllm", "pytorch/vision", "Dao-AILab/flash-attention"} <= projects


# (schema, expectation): "same" = opgen and torch read the same; otherwise the
# start of opgen's message. `torch` says whether torch's parser accepts it.
EDGE_CASES = [
    ("(Tensor! x) -> ()", "same", True),
    ("(Tensor!? x) -> ()", "same", True),
    ("(Tensor(a6!)? x) -> ()", "same", True),
    ("(Tensor(a1) x) -> ()", "same", True),
    ("(Tensor(a) x) -> Tensor(a)", "same", True),
    ("(Tensor(a!) x) -> Tensor(a!)", "same", True),
    ("(Tensor x, Tensor(out!)? out=None) -> (Tensor(out!), Tensor)", "same", True),
    ("(Tensor(a!) x, Tensor(a!) y) -> ()", "same", True),
    ("(Tensor[](a!) xs) -> ()", "same", True),
    ("(Tensor[](a!)? xs) -> ()", "same", True),
    ("(Tensor(a!)[] xs) -> ()", "same", True),
    ("(Tensor[](a) xs) -> Tensor[](a)", "same", True),
    ("(Tensor x, float padding_value = 0) -> Tensor", "same", True),
    ("(Tensor x, Tensor? y = None) -> Tensor", "same", True),
    ("(    Tensor x,   int?    n) -> Tensor", "same", True),
    ("(Tensor x,Tensor y) -> Tensor", "same", True),
    ("(Tensor x,\n    Tensor y) -> Tensor", "same", True),
    ("(Tensor\tx) -> Tensor", "same", True),
    ("(Tensor x, (int, int)? group_shape=None) -> Tensor", "same", True),
    ("(Tensor x, (int, int) shape) -> Tensor", "same", True),
    ("(Tensor x) -> int", "same", True),
    ("(Tensor x) -> SymInt", "same", True),
    ("(Tensor x) -> str[]", "same", True),
    ("(Tensor x) -> (Tensor, Tensor, int, int)", "same", True),
    ("(Tensor x) -> (Tensor, Tensor?)", "same", True),
    ("() -> (int, int, int)", "same", True),
    ("(Tensor x) -> (Tensor values, Tensor indices)", "same", True),
    ("(Tensor x) -> Tensor out", "same", True),
    ("(Tensor x) -> (Tensor, Tensor[])", "same", True),
    ("(Tensor?[] xs) -> Tensor", "same", True),
    ("(Tensor x, int[2] k) -> Tensor", "same", True),
    ("(Tensor x, SymInt[]? s=None) -> Tensor", "same", True),
    ("(Tensor x, Scalar s=1) -> Tensor", "same", True),
    ('(Tensor x, Device d="cpu") -> Tensor', "same", True),
    ("(Tensor x, Device d='cuda:1') -> Tensor", "same", True),
    ("(Tensor x, ScalarType dtype=float32) -> Tensor", "same", True),
    ("(Tensor x, ScalarType dtype=long) -> Tensor", "same", True),
    ("(Tensor x, int reduction=Mean) -> Tensor", "same", True),
    ("(Tensor x, str? reduce=None) -> Tensor", "same", True),
    ("(Tensor x, str s='mean') -> Tensor", "same", True),
    ("(Tensor x, str s='') -> Tensor", "same", True),
    ('(Tensor x, str s="a\\"b") -> Tensor', "same", True),
    ('(Tensor x, str s="a\\\\b") -> Tensor', "same", True),
    ('(Tensor x, str s="a\\tb\\n") -> Tensor', "same", True),
    ('(Tensor x, str s="\\101") -> Tensor', "same", True),
    ('(Tensor x, str s="\\303\\251") -> Tensor', "same", True),  # UTF-8 bytes: é
    ('(Tensor x, str s="\\342\\202\\254 \\0101") -> Tensor', "same", True),  # €, then \010 and 1
    ('(Tensor x, str s="a\\000b") -> Tensor', "same", True),
    ('(Tensor x, str s="é") -> Tensor', "same", True),
    ('(Tensor x, str s="a=b") -> Tensor', "same", True),
    ('(Tensor x, str s="a, b") -> Tensor', "same", True),
    ('(Tensor x, str s=")") -> Tensor', "same", True),
    ('(Tensor x, str s="#") -> Tensor', "same", True),
    ("(Tensor x, str s='it\\'s') -> Tensor", "same", True),
    ("(Tensor x, float f=1e-5) -> Tensor", "same", True),
    ("(Tensor x, float f=2.2250738585072014e-308) -> Tensor", "same", True),
    ("(Tensor x, float f=2.22507385850720138e-308) -> Tensor", "same", True),  # rounds to normal
    ("(Tensor x, float f=0e-400) -> Tensor", "same", True),
    ("(Tensor x, float f=1e-05) -> Tensor", "same", True),
    ("(Tensor x, float f=-1.5) -> Tensor", "same", True),
    ("(Tensor x, float f=.5) -> Tensor", "same", True),
    ("(Tensor x, float f=1.) -> Tensor", "same", True),
    ("(Tensor x, int n=-1) -> Tensor", "same", True),
    ("(Tensor x, int n=-9223372036854775808) -> Tensor", "same", True),
    ("(Tensor x, int[] s=[1, 2]) -> Tensor", "same", True),
    ("(Tensor x, int[] s=[]) -> Tensor", "same", True),
    ("(Tensor x, int[2] s=1) -> Tensor", "same", True),
    ("(Tensor x, int[1] dim=0) -> Tensor", "same", True),
    ("(Tensor x, float[] s=[1.0, 2.5]) -> Tensor", "same", True),
    ("(Tensor x, bool[3] m=[True, False, True]) -> Tensor", "same", True),
    ("(Tensor x, *, int n=1, bool flag=False) -> Tensor", "same", True),
    ("(Tensor x, *, int n) -> Tensor", "same", True),
    ("(Tensor x, *, Tensor? a_scale = None) -> Tensor", "same", True),
    ("(Tensor grad, Tensor x) -> Tensor", "same", True),
    ("(Tensor self, Tensor other) -> Tensor", "same", True),
    ("(Tensor EOF, Tensor NULL) -> Tensor", "same", True),
    ("(Tensor _kernel, Tensor x) -> Tensor", "same", True),
    ("(Tensor x, Tensor x_c) -> Tensor", "same", True),
    ("(Tensor int) -> Tensor", "same", True),
    ("(Tensor Tensor) -> Tensor", "same", True),
    ("() -> ()", "same", True),
    # torch refuses these too
    ('(Tensor x, str s="\\x00") -> Tensor', "string default", False),
    ('(Tensor x, str s="\\x41") -> Tensor', "string default", False),
    ('(Tensor x, str s="\\N{BULLET}") -> Tensor', "string default", False),
    ('(Tensor x, str s="\\u00e9") -> Tensor', "string default", False),
    ('(Tensor x, str s="\\0") -> Tensor', "string default", False),
    ('(Tensor x, str s="\\08") -> Tensor', "string default", False),
    ('(Tensor x, str s="\\400") -> Tensor', "string default", False),
    ("(Tensor x, float f=1e-320) -> Tensor", "the default 1e-320 is below the smallest", False),
    ("(Tensor x, float f=-4.9e-324) -> Tensor", "the default 4.9e-324 is below the smallest", False),
    ("(Tensor x, float f=1e-400) -> Tensor", "the default 1e-400 is below the smallest", False),
    (
        "(Tensor x, float f=2.2250738585072012e-308) -> Tensor",
        "the default 2.2250738585072012e-308 is below the smallest",
        False,
    ),
    ("(Tensor x, float[] f=[1.0, 1e-310]) -> Tensor", "the default 1e-310 is below", False),
    ("(Tensor x, float f=1e309) -> Tensor", "the default 1e309 is out of range", False),
    ("(Tensor x, float f=inf) -> Tensor", "'inf' is not a default torch can read", False),
    ("(Tensor x, float f=-inf) -> Tensor", "expected a number, found 'inf'", False),
    ("(Tensor x, float f=nan) -> Tensor", "'nan' is not a default torch can read", False),
    (
        "(Tensor x, int n=9223372036854775808) -> Tensor",
        "the default 9223372036854775808 does not fit",
        False,
    ),
    ("(Tensor x, bool b=true) -> Tensor", "'true' is not a default torch can read", False),
    ("(Tensor x, int[] s=1) -> Tensor", "argument 's': the default 1 of an unsized list", False),
    (
        "(Tensor x, int[]? s=[1, 2]) -> Tensor",
        "argument 's': an optional list can only default to None",
        False,
    ),
    ("(Tensor x, int a=1, int b) -> Tensor", "argument 'b' has no default but follows 'a'", False),
    ("(Tensor? x=None, Tensor y) -> Tensor", "argument 'y' has no default but follows 'x'", False),
    ("(Tensor x, Dimname d) -> Tensor", "unknown type 'Dimname'", False),
    ("(Tensor x, SymFloat f) -> Tensor", "unknown type 'SymFloat'", False),
    ("(Tensor None) -> Tensor", "'None' cannot be an argument name", False),
    ("(Tensor True) -> Tensor", "'True' cannot be an argument name", False),
    ("(Tensor 1x) -> Tensor", "expected an argument name", False),
    ("(Tensor é) -> Tensor", "the schema has the character 'é'", False),
    ("(Tensor x)", "expected '->' after the arguments", False),
    ("(Tensor x,) -> Tensor", "the argument list ends with a comma", False),
    ("(Tensor?(a!) x) -> ()", "expected an argument name", False),
    ("(Tensor!(a) x) -> ()", "expected an argument name", False),
    # torch reads these, then refuses them at define or call time, or misreads them
    ('(Tensor x, str s="\\377") -> Tensor', "string default", True),  # not UTF-8: no Python value
    ('(Tensor x, str s="\\303") -> Tensor', "string default", True),
    ("(Tensor x, int n=1.5) -> Tensor", "argument 'n': the default 1.5 is not an integer", True),
    ("(Tensor x, int n=1.0) -> Tensor", "argument 'n': the default 1.0 is not an integer", True),
    ("(Tensor x, bool b=1) -> Tensor", "argument 'b': the default 1 is not True or False", True),
    ("(Tensor x, float f=True) -> Tensor", "argument 'f': the default True is not a number", True),
    (
        "(Tensor x, float? f=1) -> Tensor",
        "argument 'f': torch stores the default 1 of a float?",
        True,
    ),
    ("(Tensor x, int n=0x10) -> Tensor", "'0x10' is not a number torch reads correctly", True),
    (
        "(Tensor x, Tensor y=None) -> Tensor",
        "argument 'y': a Tensor defaults to None only when it is optional",
        True,
    ),
    ("(Tensor x, SymInt[2] s=[1]) -> Tensor", "argument 's': the default [1] has 1 items", True),
    ("(Tensor x, Tensor x) -> Tensor", "arguments 1 and 2 are both named 'x'", True),
    ("(Tensor x, int!? n) -> ()", "argument 'n': int carries the alias annotation !", True),
    ("(Tensor x, int! n) -> ()", "argument 'n': int carries the alias annotation !", True),
    ("(Tensor(*) x) -> Tensor(*)", "argument 'x': the alias annotation (*)", True),
    ("(Tensor(a -> *) x) -> Tensor(a)", "argument 'x': the alias annotation (a -> *)", True),
    ("(Tensor(a|b) x) -> Tensor", "argument 'x': the alias annotation (a|b)", True),
    ("(Tensor x, Dict(str, Tensor) d) -> Tensor", "the type Dict is not supported by opgen", True),
    ("(...) -> ...", "torch's varargs '...' are not supported by opgen", True),
    ("(Tensor x, DeviceIndex i) -> Tensor", "the type DeviceIndex is not supported by opgen", True),
]


def _opgen_problem(text: str) -> str | None:
    try:
        problems = schema_problems(parse(text))
    except SchemaError as exc:
        return exc.message
    return problems[0].message if problems else None


@pytest.mark.parametrize("text, expected, torch_reads", EDGE_CASES, ids=[c[0] for c in EDGE_CASES])
def test_edge_case(text: str, expected: str, torch_reads: bool) -> None:
    try:
        torch._C.parse_schema("ns::op" + text)
        reads = True
    except (RuntimeError, IndexError):  # IndexError: torch's stod/stoll overflow
        reads = False
    assert reads == torch_reads, "torch's parser changed its mind: update the table"
    problem = _opgen_problem(text)
    if expected == "same":
        assert problem is None
        assert _compare(text) == []
        registered = torch._C.parse_schema(
            "ns::op" + format_schema(parse(text).args, parse(text).returns)
        )
        ours = parse(text)
        assert _differences(ours.args, registered.arguments, True) == []
        assert _differences(ours.returns, registered.returns, False) == []
    else:
        assert problem is not None and problem.startswith(expected), problem


def test_65_arguments_are_refused_64_accepted() -> None:
    many = "(" + ", ".join(f"Tensor a{i}" for i in range(65)) + ") -> ()"
    assert _opgen_problem(many) == "the schema has 65 arguments; torch registers at most 64"
    assert _opgen_problem(many.replace(", Tensor a64", "")) is None
    with pytest.raises(RuntimeError, match="65 arguments"):
        torch.library.Library("opgen_dialect_65", "FRAGMENT").define("op" + many)


def test_torch_misreads_a_hex_default_as_zero() -> None:
    """Why `int n=0x10` is refused: torch registers it as 0 without a word."""
    assert torch._C.parse_schema("ns::op(int n=0x10) -> ()").arguments[0].default_value == 0


def test_bare_write_annotations_become_named_sets() -> None:
    schema = _registered(
        "rotary", "(Tensor positions, Tensor! query, Tensor!? key, int head_size) -> ()"
    )
    assert schema == "(Tensor positions, Tensor(a!) query, Tensor(b!)? key, int head_size) -> ()"
    explicit = _registered("mixed", "(Tensor(a!) x, Tensor! y, Tensor(a6!)? z) -> ()")
    assert explicit == "(Tensor(a!) x, Tensor(b!) y, Tensor(a6!)? z) -> ()"


def test_opgen_never_imports_torch_to_read_a_schema() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tomllib\n"
        "from opgen.spec.dialect.parser import parse\n"
        "from opgen.spec.dialect.rules import schema_problems\n"
        f"rows = tomllib.load(open({str(Path(__file__).parent / 'data' / 'real_schemas.toml')!r}, 'rb'))['schema']\n"
        "for row in rows: schema_problems(parse(row['schema']))\n"
        "assert 'torch' not in sys.modules and 'torchgen' not in sys.modules, sorted(sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
