"""Fuzz the spec loader and validators: whatever the input, the only failure is OpgenError.

Bounded so the suite stays fast: a few hundred examples per property, no deadline.
"""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opgen.errors import OpgenError
from opgen.spec.config import build_config
from opgen.spec.load import load_toml
from opgen.spec.model import ProjectConfig
from opgen.spec.validate import SPEC_KEYS, build_op_spec

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
CONFIG = ProjectConfig(root=Path("/nonexistent"), path=Path("/nonexistent/opgen.toml"), namespace="mylib", package="mylib")


def _validate_text(path: Path, text: str | bytes) -> None:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        doc = load_toml(path)
        build_op_spec(doc, CONFIG, frozenset({"foo", "bar"}))
    except OpgenError as exc:
        assert exc.diagnostics, "an OpgenError must carry at least one diagnostic"
        for diagnostic in exc.diagnostics:
            assert diagnostic.message and "\n" not in diagnostic.message
            diagnostic.format(path.parent)


# -- TOML-ish text -------------------------------------------------------------------------

_TOKENS = st.sampled_from(
    [
        "name", "schema", "mutates", "grad", "fake", "test", "samples", "like", "expr", "x", "y",
        "=", " = ", "\n", "[", "]", "[[", "]]", "{", "}", ",", '"', "'", '"""', ".", "::", "->",
        "(", ")", "Tensor", "int", "float", "str", "!", "a!", "?", "None", "1", "-1", "1.5", "inf",
        "nan", "true", "false", "#", "\\", "\\u0000", "mylib::foo", "(Tensor x) -> Tensor",
        "grad * x.cos()", "shape", "[3, 4]", "__import__", "lambda", "\t", " ", "é", "\x00",
    ]
)


@FUZZ
@given(st.lists(_TOKENS, max_size=40).map("".join))
def test_tomlish_text_gives_only_diagnostics(tmp_path_factory, text: str) -> None:
    _validate_text(tmp_path_factory.mktemp("t") / "op.toml", text)


@FUZZ
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_arbitrary_text_gives_only_diagnostics(tmp_path_factory, text) -> None:
    _validate_text(tmp_path_factory.mktemp("a") / "op.toml", text)


# -- structured specs ---------------------------------------------------------------------

def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 32 or ord(char) == 127:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


_WORDS = st.sampled_from(["x", "y", "out", "alpha", "n", "mode", "grad", "shape", "dtype", "float32", "cpu", "cuda", "foo", "like", "expr"])
_SCALARS = st.one_of(
    st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=20), _WORDS,
    st.sampled_from([
        "mylib::foo", "mylib::foo.out", "aten::add", "(Tensor x) -> Tensor", "(Tensor(a!) x) -> ()",
        "(Tensor x, int n=1, str mode='a', float? e=None) -> (Tensor, Tensor)", "(Tensor[] xs) -> Tensor[]",
        "grad * x.cos()", "x.new_empty(x.shape)", "torch.sin(x)", "x.__class__", "import os", "(",
    ]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.one_of(_WORDS, st.text(max_size=8)), inner, max_size=4)),
    max_leaves=12,
)
_SAMPLE = st.dictionaries(_WORDS, st.one_of(_VALUES, st.fixed_dictionaries({"shape": st.lists(st.integers(-2, 5), max_size=3)}, optional={"dtype": _WORDS, "low": _SCALARS, "noncontiguous": _SCALARS})), max_size=3)
_TABLE = {
    "name": st.one_of(_SCALARS, st.just("mylib::foo")),
    "schema": st.one_of(_SCALARS, st.sampled_from(["(Tensor x) -> Tensor", "(Tensor x, Tensor y) -> Tensor", "(Tensor(a!) x) -> ()"])),
    "mutates": _VALUES,
    "grad": st.one_of(_VALUES, st.dictionaries(_WORDS, _SCALARS, max_size=3), st.dictionaries(_WORDS, st.sampled_from(["grad * x", "grad", "x * result", "grads[0] + y", "foo(x)", "x.shape", "len(x.shape)"]), max_size=3)),
    "fake": st.one_of(_VALUES, st.fixed_dictionaries({}, optional={"like": _VALUES, "expr": _VALUES, "checks": _VALUES})),
    "test": st.one_of(_VALUES, st.fixed_dictionaries({"samples": st.lists(st.one_of(_SAMPLE, st.just({"x": {"shape": [3]}, "y": {"shape": [3]}, "n": 2, "xs": [{"shape": [2]}], "mode": "b"})), max_size=3)}, optional={"reference": _SCALARS, "dtypes": _VALUES, "atol": _SCALARS})),
}


_GOOD_SCHEMAS = st.sampled_from([
    "(Tensor x) -> Tensor", "(Tensor x, Tensor y) -> Tensor", "(Tensor(a!) x) -> ()", "(Tensor x, int n=2) -> Tensor",
    "(Tensor x, float alpha=1.0, *, bool flag=False) -> (Tensor, Tensor)", "(Tensor[] xs, str mode='a') -> Tensor[]",
])


@st.composite
def _specs(draw) -> dict:
    """Mostly a valid name and schema, so the deeper tables get exercised too."""
    spec = {
        "name": draw(st.one_of(st.just("mylib::foo"), st.just("mylib::foo"), st.just("mylib::foo.out"), _TABLE["name"])),
        "schema": draw(st.one_of(_GOOD_SCHEMAS, _GOOD_SCHEMAS, _TABLE["schema"])),
    }
    for key in draw(st.lists(st.sampled_from(SPEC_KEYS + ["bogus"]), unique=True, max_size=len(SPEC_KEYS))):
        spec[key] = draw(_TABLE.get(key, _VALUES))
    return spec


@FUZZ
@given(_specs())
def test_structured_specs_give_only_diagnostics(tmp_path_factory, spec: dict) -> None:
    text = "".join(f"{_toml_string(k)} = {_toml_value(v)}\n" for k, v in spec.items())
    _validate_text(tmp_path_factory.mktemp("s") / "op.toml", text)


@FUZZ
@given(st.dictionaries(st.sampled_from(["project", "options", "tool"]), st.one_of(_VALUES, st.fixed_dictionaries({}, optional={
    "namespace": _SCALARS, "package": _SCALARS, "templates": _SCALARS, "backend": _SCALARS, "pybind": _SCALARS, "torch_target_version": _SCALARS,
})), max_size=3))
def test_project_files_give_only_diagnostics(tmp_path_factory, data: dict) -> None:
    root = tmp_path_factory.mktemp("p")
    path = root / "opgen.toml"
    path.write_text("".join(f"{_toml_string(k)} = {_toml_value(v)}\n" for k, v in data.items()), encoding="utf-8", errors="surrogatepass")
    try:
        build_config(load_toml(path))
    except OpgenError as exc:
        assert exc.diagnostics
