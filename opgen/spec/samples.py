"""The [test] table of a spec: sample inputs, the reference and tolerances."""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable
from typing import Any, TypeGuard

from ..errors import DiagnosticSink
from .dialect.types import TypeKind
from .dialect.values import ENUMS
from .expr import ExprProblem, check_expression
from .fields import check_keys, shown, suggest, typed
from .load import LoadedToml
from .model import MAX_SAMPLE_ELEMENTS, NONE_SAMPLE, Arg, Sample, TensorSample, TestSpec
from .types import DTYPES

# The keys and list indices that lead to a value in the spec file, as LoadedToml.line takes them
_KeyPath = tuple[str | int, ...]

__all__ = ["build_test", "helper_name", "TEST_KEYS"]

TEST_KEYS = (
    "samples",
    "samples_from",
    "reference",
    "reference_from",
    "dtypes",
    "atol",
    "rtol",
    "cuda_graph",
    "gradcheck_dtype",
)
# the dtypes gradients are checked in: float64 (finite differences need its precision), or
# float32 for kernels without a float64 path (looser tolerances: Note [Test tolerances])
GRADCHECK_DTYPES = ("float64", "float32")
_TENSOR_SAMPLE_KEYS = (
    "shape",
    "values",
    "dtype",
    "noncontiguous",
    "low",
    "high",
    "requires_grad",
    "offsets",
    "sorted",
    "none",
)
# Note [Sample bounds]
# The generated tests run every check (reference, opcheck, gradcheck, compile, ...) on every
# sample in every dtype, so a spec's samples bound what `opgen test` does: one sample holds at
# most 2**24 elements (64 MiB of float32), and all of a spec's samples together at most
# `[options] max_sample_elements` of opgen.toml (2**28 by default: sixteen of the largest).
# Without the total, 20,000 samples of [4096, 4096] fit in a 1 MiB spec, generate, and give
# tests that never finish. Samples a `samples_from` function draws are not counted: they are
# made when the tests run.
_MAX_DIM = 1 << 20
_MAX_ELEMENTS = 1 << 24


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> TypeGuard[int | float]:
    """A finite int or float: generated code writes it back as a Python literal."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _one_of(names: tuple[str, ...]) -> Callable[[Any], bool]:
    return lambda value: value in names


_SCALAR_CHECKS = {
    "int": (_is_int, "an integer, e.g. 2"),
    "SymInt": (_is_int, "an integer, e.g. 2"),
    "float": (_is_number, "a finite number, e.g. 0.5"),
    "Scalar": (lambda v: isinstance(v, bool) or _is_number(v), "a finite number or true/false"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "str": (lambda v: isinstance(v, str), 'a quoted string, e.g. "mean"'),
    "ScalarType": (lambda v: v in DTYPES, f"a dtype name: {', '.join(DTYPES)}"),
    "Device": (lambda v: v in ("cpu", "cuda"), '"cpu" or "cuda"'),
    **{kind: (_one_of(names), ", ".join(f'"{n}"' for n in names)) for kind, names in ENUMS.items()},
}


def _nested(value: Any) -> tuple[tuple[int, ...], Any] | None:
    """(shape, nested tuples) of a rectangular nested list of finite numbers, else None."""
    if _is_number(value):
        return (), value
    if not isinstance(value, list):
        return None
    items = [_nested(v) for v in value]
    if any(i is None for i in items) or len({i[0] for i in items}) > 1:  # type: ignore[index]
        return None
    inner = items[0][0] if items else ()  # type: ignore[index]
    return (len(items), *inner), tuple(i[1] for i in items)  # type: ignore[index]


def _tensor_shape(
    sink: DiagnosticSink, doc: LoadedToml, value: dict[str, Any], path: _KeyPath, name: str
) -> tuple[tuple[int, ...], Any] | None:
    """The sample's shape and, for `values = [...]`, its contents."""
    shape = value.get("shape")
    contents = None
    if "values" in value:
        nested = _nested(value["values"])
        if nested is None or isinstance(value["values"], (int, float)):
            sink.error(
                doc.line(*path, "values"),
                f"values of {name!r} must be a (nested) list of finite numbers with rows of equal "
                f"length, not {shown(value['values'])}",
                f"e.g. {name} = {{values = [[0, 0, 10, 10], [1, 1, 11, 11]]}}",
            )
            return None
        if shape is not None and list(nested[0]) != shape:
            sink.error(
                doc.line(*path, "shape"),
                f"shape {shown(shape)} of {name!r} does not match its values (shape "
                f"{list(nested[0])})",
                "leave shape out: values give it",
            )
            return None
        shape, contents = list(nested[0]), nested[1]
    if not isinstance(shape, list) or not all(_is_int(d) and 0 <= d <= _MAX_DIM for d in shape):
        sink.error(
            doc.line(*path, "shape"),
            f"the sample for {name!r} needs shape = [d0, d1, ...] of non-negative integers, not {shown(shape)}",
            f"e.g. {name} = {{shape = [3, 4]}} or {{values = [1.0, 2.0]}}",
        )
        return None
    if math.prod(shape) > _MAX_ELEMENTS:
        sink.error(
            doc.line(*path, "shape"),
            f"sample shape {shown(shape)} is too large for a test",
            "keep test samples under 16M elements",
        )
        return None
    return tuple(shape), contents


def _check_offsets(
    sink: DiagnosticSink,
    doc: LoadedToml,
    value: dict[str, Any],
    path: _KeyPath,
    name: str,
    shape: tuple[int, ...],
) -> None:
    """`offsets = true` draws lengths and writes 0 and their running sums: an integer vector."""
    hint = f'e.g. {name} = {{shape = [5], dtype = "int64", offsets = true, low = 0, high = 4}}'
    if value.get("dtype") not in ("int32", "int64"):
        sink.error(
            doc.line(*path, "offsets"),
            f'offsets of {name!r} need dtype = "int64" or "int32"',
            hint,
        )
    elif len(shape) != 1 or shape[0] < 1:
        sink.error(
            doc.line(*path, "offsets"),
            f"offsets of {name!r} need a shape [batch + 1] of one dimension, not {list(shape)}",
            hint,
        )
    elif "values" in value:
        sink.error(
            doc.line(*path, "offsets"),
            f"{name!r} gives both values and offsets = true",
            "write the offsets as values = [0, ...], or draw them with offsets = true",
        )
    elif value.get("low", 0) < 0:
        sink.error(
            doc.line(*path, "low"),
            f"offsets of {name!r} are running sums of lengths in [low, high): low must be >= 0",
            hint,
        )


def _tensor_sample(
    sink: DiagnosticSink, doc: LoadedToml, value: dict[str, Any], path: _KeyPath, name: str
) -> TensorSample | None:
    check_keys(sink, doc, value, _TENSOR_SAMPLE_KEYS, path)
    if "none" in value:
        sink.error(
            doc.line(*path, "none"),
            f"none = true stands alone: {name!r} is either None or a tensor",
            f"write {name} = {{none = true}}, or remove none",
        )
        return None
    found = _tensor_shape(sink, doc, value, path, name)
    if found is None:
        return None
    shape, contents = found
    dtype = value.get("dtype")
    if dtype is not None and dtype not in DTYPES:
        sink.error(
            doc.line(*path, "dtype"),
            f"unknown dtype {shown(dtype)}",
            suggest(str(dtype), DTYPES, "one of"),
        )
    for key in ("noncontiguous", "requires_grad", "offsets", "sorted"):
        if key in value and not isinstance(value[key], bool):
            sink.error(
                doc.line(*path, key),
                f"{key} must be true or false, not {shown(value[key])}",
                f"write {key} = true",
            )
    for key in ("low", "high"):
        if key in value and not _is_number(value[key]):
            sink.error(
                doc.line(*path, key),
                f"{key} must be a finite number, not {shown(value[key])}",
                f"write {key} = -1.0",
            )
        elif key in value and contents is not None:
            sink.error(
                doc.line(*path, key),
                f"{key} draws random values, but {name!r} gives its values",
                f"remove {key}",
            )
    if value.get("offsets") is True:
        _check_offsets(sink, doc, value, path, name, shape)
    return TensorSample(
        shape,
        dtype,
        bool(value.get("noncontiguous", False)),
        value.get("low"),
        value.get("high"),
        bool(value.get("requires_grad", True)),
        contents,
        value.get("offsets") is True,
        value.get("sorted") is True,
    )


def _none_sample(
    sink: DiagnosticSink, doc: LoadedToml, arg: Arg, value: Any, path: _KeyPath
) -> Any:
    """`{none = true}`: the argument is passed as None (TOML has no null)."""
    if value != {"none": True}:
        sink.error(
            doc.line(*path),
            f"{shown(value)} for {arg.name!r}: none = true stands alone in its table",
            f"write {arg.name} = {{none = true}}",
        )
        return None
    if not arg.is_optional:
        sink.error(
            doc.line(*path),
            f"{arg.name!r} is a {arg.type.spelling}, not optional: it cannot be None",
            f"give {arg.name} a value, or make its type optional ({arg.type.spelling}?)",
        )
        return None
    return NONE_SAMPLE


def _tensor_list_item(
    sink: DiagnosticSink, doc: LoadedToml, arg: Arg, value: dict[str, Any], path: _KeyPath
) -> Any:
    """An item of a Tensor[] sample; `Tensor?[]` items may be `{none = true}`."""
    if "none" in value and arg.family == "Tensor?[]":
        if value == {"none": True}:
            return NONE_SAMPLE
        sink.error(
            doc.line(*path),
            f"{shown(value)} in {arg.name!r}: none = true stands alone in its table",
            "write {none = true} for an item that is None",
        )
        return None
    return _tensor_sample(sink, doc, value, path, arg.name)


def _sample_value(
    sink: DiagnosticSink, doc: LoadedToml, arg: Arg, value: Any, path: _KeyPath
) -> Any:
    if isinstance(value, dict) and "none" in value:
        return _none_sample(sink, doc, arg, value, path)
    if arg.is_tensor:
        if isinstance(value, dict):
            return _tensor_sample(sink, doc, value, path, arg.name)
        sink.error(
            doc.line(*path),
            f"the sample for tensor {arg.name!r} must be a table, not {shown(value)}",
            f"e.g. {arg.name} = {{shape = [3, 4]}}",
        )
        return None
    if arg.is_tensor_list:
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return tuple(
                _tensor_list_item(sink, doc, arg, v, path + (index,))
                for index, v in enumerate(value)
            )
        sink.error(
            doc.line(*path),
            f"the sample for {arg.name!r} must be a list of tensor tables, not {shown(value)}",
            f"e.g. {arg.name} = [{{shape = [3]}}, {{shape = [3]}}]",
        )
        return None
    inner = arg.type.unwrapped
    if inner.kind is TypeKind.TUPLE:
        checks = [_SCALAR_CHECKS[m.name] for m in inner.items]
        good = (
            isinstance(value, list)
            and len(value) == len(checks)
            and all(check(v) for (check, _), v in zip(checks, value, strict=True))
        )
        wanted = "a list of " + ", ".join(w for _, w in checks)
    else:
        check, wanted = _SCALAR_CHECKS[inner.element]
        if inner.kind is TypeKind.LIST:
            good = isinstance(value, list) and all(check(v) for v in value)
            wanted = f"a list of {wanted}"
        else:
            good = check(value)
    if not good:
        sink.error(
            doc.line(*path),
            f"sample value {shown(value)} is not a valid {arg.type.spelling} for {arg.name!r}",
            f"write {wanted}",
        )
        return None
    return tuple(value) if isinstance(value, list) else value


def _elements(value: Any) -> int:
    """The tensor elements of one argument's sample (a tensor, or a list of them)."""
    if isinstance(value, TensorSample):
        return math.prod(value.shape)
    if isinstance(value, tuple):
        return sum(_elements(item) for item in value if isinstance(item, TensorSample))
    return 0


def _check_total(
    sink: DiagnosticSink, doc: LoadedToml, samples: list[Sample], max_elements: int
) -> None:
    """All samples together hold at most `max_elements` tensor elements (Note [Sample bounds])."""
    total = 0
    for index, sample in enumerate(samples):
        total += sum(_elements(value) for _, value in sample.values)
        if total > max_elements:
            sink.error(
                sample.line,
                f"samples 1 to {index + 1} (of {len(samples)}) hold {total} tensor elements "
                f"together, more than the {max_elements} a spec's samples may hold "
                "(max_sample_elements): the generated tests run every check on every sample",
                "use fewer or smaller samples (a few small ones test an op well), or raise "
                "max_sample_elements under [options] in opgen.toml",
            )
            return


def _samples(
    sink: DiagnosticSink,
    doc: LoadedToml,
    raw_samples: Any,
    args: tuple[Arg, ...],
    max_elements: int,
) -> list[Sample]:
    if raw_samples is None:
        return []  # the generated tests say what to add (generation is never blocked by tests)
    if (
        not isinstance(raw_samples, list)
        or not raw_samples
        or not all(isinstance(s, dict) for s in raw_samples)
    ):
        first = next((a.name for a in args if a.is_tensor), "x")
        sink.error(
            doc.line("test", "samples"),
            f"test.samples must be one or more [[test.samples]] tables, not {shown(raw_samples)}",
            f"write\n[[test.samples]]\n{first} = {{shape = [3, 4]}}",
        )
        return []
    by_name = {a.name: a for a in args}
    samples: list[Sample] = []
    for index, raw in enumerate(raw_samples):
        path = ("test", "samples", index)
        values: list[tuple[str, Any]] = []
        for key in raw:
            if key not in by_name:
                sink.error(
                    doc.line(*path, key),
                    f"sample {index + 1} names unknown argument {key!r}",
                    suggest(key, tuple(by_name), "arguments"),
                )
        for arg in args:
            if arg.name in raw:
                values.append(
                    (arg.name, _sample_value(sink, doc, arg, raw[arg.name], path + (arg.name,)))
                )
            elif arg.default is None and not arg.is_optional:
                sink.error(
                    doc.line(*path),
                    f"sample {index + 1} has no value for required argument {arg.name!r}",
                    f"add {arg.name} = ... to this sample",
                )
        samples.append(Sample(tuple(values), doc.line(*path)))
    _check_total(sink, doc, samples, max_elements)
    return samples


def helper_name(
    sink: DiagnosticSink, doc: LoadedToml, table: dict[str, Any], *path: str
) -> str | None:
    """A function name in the project's `<package>/testing_helpers.py` (Note [Testing helpers])."""
    value = table.get(path[-1])
    if value is None:
        return None
    if not isinstance(value, str) or not value.isidentifier() or keyword.iskeyword(value):
        sink.error(
            doc.line(*path),
            f"{'.'.join(path)} must name a function of testing_helpers.py, not {shown(value)}",
            f'e.g. {path[-1]} = "nms_{path[-1].split("_")[0]}"',
        )
        return None
    return value


# Note [Test tolerances] in opgen/testing/_compare.py: float64 and complex128 are never loosened.
_LOOSENED_DTYPES = ("float32", "float16", "bfloat16", "complex64")


def _tolerance(
    sink: DiagnosticSink, doc: LoadedToml, value: Any, key: str
) -> float | tuple[tuple[str, float], ...] | None:
    """`atol = 1e-5` (every reduced-precision dtype) or `atol = {float16 = 2e-3}` (per dtype)."""
    if value is None:
        return None
    if isinstance(value, dict):
        for name, bound in value.items():
            if name not in _LOOSENED_DTYPES:
                sink.error(
                    doc.line("test", key, name),
                    f"test.{key} names {shown(name)}, a dtype whose comparisons are not loosened",
                    f"name one of {', '.join(_LOOSENED_DTYPES)} (float64 keeps torch's defaults)",
                )
                return None
            if not _is_number(bound) or bound < 0:
                sink.error(
                    doc.line("test", key, name),
                    f"test.{key}.{name} must be a non-negative number, not {shown(bound)}",
                    f"e.g. {key} = {{{name} = 2e-3}}",
                )
                return None
        return tuple((name, float(bound)) for name, bound in value.items())
    if not _is_number(value) or value < 0:
        sink.error(
            doc.line("test", key),
            f"test.{key} must be a non-negative number or a table of them per dtype, "
            f"not {shown(value)}",
            f"e.g. {key} = 1e-5, or {key} = {{float16 = 2e-3}}",
        )
        return None
    return value


def build_test(
    sink: DiagnosticSink,
    doc: LoadedToml,
    table: dict[str, Any],
    args: tuple[Arg, ...],
    expr_globals: tuple[str, ...],
    max_sample_elements: int = MAX_SAMPLE_ELEMENTS,
) -> TestSpec:
    check_keys(sink, doc, table, TEST_KEYS, ("test",))
    samples = _samples(sink, doc, table.get("samples"), args, max_sample_elements)
    samples_from = helper_name(sink, doc, table, "test", "samples_from")
    reference_from = helper_name(sink, doc, table, "test", "reference_from")
    reference = table.get("reference")
    if reference is not None and reference_from is not None:
        sink.error(
            doc.line("test", "reference_from"),
            "test.reference and test.reference_from both give the reference",
            "keep one: an expression, or a function of testing_helpers.py",
        )
    if reference is not None:
        if typed(sink, doc, reference, str, "test", "reference"):
            try:
                names = {a.name for a in args}
                check_expression(reference, names | set(expr_globals), "test.reference", names)
            except ExprProblem as exc:
                sink.error(doc.line("test", "reference"), exc.message, exc.hint)
        else:
            reference = None
    dtypes = table.get("dtypes", ["float32"])
    if not isinstance(dtypes, list) or not dtypes or any(d not in DTYPES for d in dtypes):
        bad = (
            next((d for d in dtypes if d not in DTYPES), None) if isinstance(dtypes, list) else None
        )
        what = (
            f"unknown dtype {shown(bad)} in test.dtypes"
            if bad is not None
            else f"test.dtypes must be a non-empty list of dtype names, not {shown(dtypes)}"
        )
        sink.error(
            doc.line("test", "dtypes"),
            what,
            (
                suggest(str(bad), DTYPES, "one of")
                if bad is not None
                else 'e.g. dtypes = ["float32", "float64"]'
            ),
        )
        dtypes = ["float32"]
    tolerances = {key: _tolerance(sink, doc, table.get(key), key) for key in ("atol", "rtol")}
    cuda_graph = table.get("cuda_graph")
    if cuda_graph is not None and not typed(sink, doc, cuda_graph, bool, "test", "cuda_graph"):
        cuda_graph = None
    gradcheck_dtype = table.get("gradcheck_dtype", "float64")
    if gradcheck_dtype not in GRADCHECK_DTYPES:
        sink.error(
            doc.line("test", "gradcheck_dtype"),
            f"test.gradcheck_dtype is {shown(gradcheck_dtype)}",
            'use "float64" (the default) or "float32" (for kernels without a float64 path)',
        )
        gradcheck_dtype = "float64"
    return TestSpec(
        tuple(samples),
        reference,
        tuple(dtypes),
        tolerances["atol"],
        tolerances["rtol"],
        samples_from,
        reference_from,
        cuda_graph,
        gradcheck_dtype,
    )
