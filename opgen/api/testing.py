"""What the generated tests of an op check, and what torch is documented to do where it cannot.

Note [What the generated tests expect]
torch 2.13 cannot compile or fully check some schemas; the generated tests
assert its documented behaviour for them instead of skipping:
- an op whose return aliases an argument and that earns no tag (a view
  `-> Tensor(a)`, mixed returns `-> (Tensor(a!), Tensor)`): opcheck's
  test_aot_dispatch_dynamic and torch.compile raise "Found a custom (non-ATen)
  operator whose output has alias annotations" (Note [Tags of aliasing ops]);
- one non-tensor return (`-> int`, `-> bool`, `-> str`, `-> str[]`,
  `-> ScalarType`, and `-> SymInt` unless the fake makes a data-dependent size
  with `torch.library.get_ctx().new_dynamic_size()`): torch.compile(fullgraph=True)
  raises `torch._dynamo.exc.Unsupported` ("torch.* op returned non-Tensor");
- `-> str` and `-> str[]`: opcheck's aot test cannot compare strings and fails.
A lone `-> float` compiles but bakes the fake's value into the graph: its
compile test compares with eager, so a fake that returns a placeholder fails
there (and in opcheck's aot test) with a message saying so.
"""

from __future__ import annotations

from typing import Any

from ..spec.model import OpSpec
from . import python as py
from .decisions import decisions
from .layout import LINE_LENGTH
from .literals import literal, string
from .pyexpr import expression

__all__ = [
    "test_context",
    "compile_expectation",
    "schema_assignment",
    "ALIAS_ERROR",
]

ALIAS_ERROR = "Found a custom \\(non-ATen\\) operator whose output has alias annotations"
_UNSUPPORTED_ALONE = ("int", "bool", "str", "str[]", "ScalarType")
_AOT_ERRORS = {
    "str": "No comparison pair was able to handle inputs of type <class 'str'>",
    "str[]": "Expected code to be unreachable",
}


def _aliasing_tag(op: OpSpec) -> bool:
    """Whether the op carries the tag its aliasing returns earn (Note [Tags of aliasing ops])."""
    return "inplace" in op.tags or "out" in op.tags


def tolerance(value: float | tuple[tuple[str, float], ...] | None) -> Any:
    """A spec's atol/rtol as the generated tests read it: a number, None, or a dict of
    dtype name to bound (Note [Test tolerances] in opgen/testing/_compare.py)."""
    return dict(value) if isinstance(value, tuple) else value


def compile_expectation(op: OpSpec) -> str:
    """`alias_error`, `unsupported` or `run` (Note [What the generated tests expect])."""
    if op.aliased_returns and not _aliasing_tag(op):
        return "alias_error"
    if len(op.returns) == 1:
        family = op.returns[0].family
        if family in _UNSUPPORTED_ALONE or (family == "SymInt" and not op.fake.data_dependent):
            return "unsupported"
    return "run"


def _aot_error(op: OpSpec) -> str | None:
    if op.aliased_returns and not _aliasing_tag(op):
        return ALIAS_ERROR
    if len(op.returns) == 1:
        return _AOT_ERRORS.get(op.returns[0].family)
    return None


def _aliases(op: OpSpec) -> list[tuple[int, str, bool]]:
    """(return index, argument, written) for each return annotated with an argument's set."""
    out = []
    for index, ret in enumerate(op.returns):
        alias = ret.type.annotation
        if alias is None:
            continue
        for arg in op.args:
            own = arg.type.annotation
            if own is not None and set(own.before) & set(alias.before):
                out.append((index, arg.name, alias.is_write))
                break
    return out


def _written(op: OpSpec) -> tuple[str, ...]:
    """Arguments an op that returns values writes without returning them: the reference check
    compares them too (opgen.testing.check_reference)."""
    if not op.returns:
        return ()
    returned = {name for _, name, _ in _aliases(op)}
    return tuple(a.name for a in op.mutated if a.name not in returned)


def _grad_inputs(op: OpSpec) -> tuple[str, ...]:
    """Inputs opcheck also runs with requires_grad: the differentiable ones, or for a C++ op that
    runs below autograd every tensor it does not write (its outputs must not require grad).
    A Python op that writes and returns is a custom_op, whose backward raises without formulas;
    so does the Autograd kernel of a classic op that writes (Note [Written arguments]): opcheck's
    aot test, which differentiates their outputs, cannot pass for them."""
    differentiable = decisions(op).formula_inputs
    if differentiable:
        return differentiable
    if decisions(op).writes_below_autograd:
        return tuple(
            a.name for a in op.args if a.differentiable and not a.mutated and not a.kwarg_only
        )
    return ()


_EXAMPLE_VALUES = {
    "Tensor": "{shape = [3, 4]}",
    "Tensor[]": "[{shape = [3, 4]}, {shape = [3, 4]}]",
    "Tensor?[]": "[{shape = [3, 4]}]",
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
}


def _no_samples(op: OpSpec, path: str) -> str:
    lines = [
        f"{a.name} = {_EXAMPLE_VALUES.get(a.family, '[1, 2]' if '[]' in a.family else '...')}"
        for a in op.args
        if a.default is None and not a.is_optional
    ]
    example = "\n".join(lines) or "# one value per argument (all have defaults)"
    return f"{path} has no [[test.samples]]: add one, e.g.\n[[test.samples]]\n{example}"


def _sample(op: OpSpec, values: dict[str, Any]) -> list[tuple[str, str]]:
    """A sample's `(name, Python literal)` pairs in schema order. An optional argument without a
    default that the sample leaves out is passed as None: torch requires a value for it."""
    return [
        (a.name, py.sample_literal(values[a.name], a.type) if a.name in values else "None")
        for a in op.args
        if a.name in values or (a.is_optional and a.default is None)
    ]


def _optional_names(op: OpSpec) -> tuple[str, ...]:
    """Arguments of a `?` type: each sample either gives them or passes None (left out is None)."""
    return tuple(a.name for a in op.args if a.is_optional)


def _takes_tensors(op: OpSpec) -> bool:
    """Whether samples can hold tensors of the test's dtype (the dtype coverage check)."""
    return any(a.is_tensor or a.is_tensor_list for a in op.args)


def registered_schema(op: OpSpec) -> str:
    """The schema the op is registered with, its namespace included (what the tests parse)."""
    return f"{op.namespace}::{op.full_schema}"


def schema_assignment(name: str, schema: str, indent: int) -> list[str]:
    """`name = "<schema>"` as black leaves it at `indent`: on one line where it fits, else the
    string in parentheses, split after commas into parts that each fit on a line."""
    one = f"{name} = {string(schema)}"
    if indent + len(one) <= LINE_LENGTH:
        return [one]
    width = LINE_LENGTH - indent - 4
    parts = [""]
    for piece in schema.split(", "):
        joined = f"{parts[-1]}, {piece}" if parts[-1] else piece
        if parts[-1] and len(string(joined + ", ")) > width:
            parts[-1] += ", "
            parts.append(piece)
        else:
            parts[-1] = joined
    return [f"{name} = (", *(f"    {string(part)}" for part in parts), ")"]


def testing_names(op: OpSpec) -> list[str]:
    """The eager and compile checks the op's tests take from `opgen.testing`, sorted
    (TensorSpec first)."""
    names = {"device_params"}
    if op.test.has_samples:
        names |= {"check_compile", "check_opcheck", "dtype_params"}
        if any(
            hasattr(value, "shape")
            or (isinstance(value, tuple) and any(hasattr(v, "shape") for v in value))
            for s in op.test.samples
            for _, value in s.values
        ):
            names.add("TensorSpec")
        if op.test.has_reference:
            names.add("check_reference")
        if decisions(op).formula_inputs:
            names.add("check_gradients")
            if not op.double_backward:
                names.add("check_double_backward_refused")
        if _aliases(op):
            names.add("check_aliases")
        if op.mutated:
            names.add("check_versions")
        if _optional_names(op):
            names.add("check_optional_coverage")
        if _takes_tensors(op):
            names.add("check_dtype_coverage")
    return sorted(names, key=lambda n: (n != "TensorSpec", n))


def test_context(op: OpSpec, path: str) -> dict[str, Any]:
    """The test variables of `op_context` (docs/templates.md)."""
    differentiable = decisions(op).formula_inputs
    samples = [_sample(op, dict(sample.values)) for sample in op.test.samples]
    return {
        "testing_names": testing_names(op),
        "uses_wrapper": op.test.has_samples and (op.test.has_reference or bool(differentiable)),
        "has_samples": op.test.has_samples,
        "schema_lines": schema_assignment("SCHEMA", registered_schema(op), 0),
        "samples": samples,
        "sample_dicts": [py.dict_lines(sample, indent="    ") for sample in samples],
        "samples_from": op.test.samples_from,
        "reference_from": op.test.reference_from,
        "has_reference": op.test.has_reference,
        "no_samples": literal(_no_samples(op, path)),
        "reference": expression(op.test.reference) if op.test.reference else None,
        "test_dtypes": list(op.test.dtypes),
        # float64 leaves the gradient checks' dtype argument out (their default)
        "gradcheck_dtype": (
            None if op.test.gradcheck_dtype == "float64" else f"torch.{op.test.gradcheck_dtype}"
        ),
        "atol": literal(tolerance(op.test.atol)),
        "rtol": literal(tolerance(op.test.rtol)),
        "compile_expectation": compile_expectation(op),
        "aot_error": literal(_aot_error(op)),
        "aliases": literal(tuple(_aliases(op))),
        "written_names": literal(_written(op)),
        "grad_inputs": literal(_grad_inputs(op)),
        "optional_names": literal(_optional_names(op)),
        "takes_tensors": _takes_tensors(op),
    }
