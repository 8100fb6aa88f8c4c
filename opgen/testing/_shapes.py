"""The checks that an op's fake kernel holds at other sizes: torch.compile(dynamic=True) and
torch.export with a dynamic dim."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ._compare import Bound, assert_same, describe, message, outputs, tolerances
from ._coverage import ShapeCoverageWarning
from ._samples import Sample, Samples, TensorSpec, make_tensor
from ._samples import clone as _clone

__all__ = ["check_dynamic_shapes", "check_export", "first_sample", "made", "tables"]

_GROWTH = (0, 1, 2)

# (dim, size): only that dim of the tensors where it has that size grows
Tie = tuple[int, int]


def _grow(size: int, step: int) -> int:
    """A size one step further; 0 and 1 stay (torch.compile specializes them anyway)."""
    return size + step if size >= 2 else size


def _growable(value: TensorSpec) -> bool:
    """Exact values and offsets keep their shape: only random tensors grow."""
    return value.values is None and not value.offsets


def _has_elements(value: Any) -> bool:
    if isinstance(value, TensorSpec):
        return all(d > 0 for d in value.shape)
    if isinstance(value, list) and value and isinstance(value[0], TensorSpec):
        return all(_has_elements(v) for v in value)
    return True


def tables(samples: Samples) -> list[Sample]:
    """The samples written in the spec (a generator of testing_helpers.py has no sizes to grow)."""
    return [s for s in samples if isinstance(s, dict)]


def first_sample(samples: Samples, spec: str, what: str) -> Sample:
    """The first table whose tensors all have elements."""
    sample = next((s for s in tables(samples) if all(_has_elements(v) for v in s.values())), None)
    if sample is None:
        raise AssertionError(
            f"no [[test.samples]] table of {spec} has only non-empty tensors: {what} needs one"
        )
    return sample


def _grown_shape(shape: tuple[int, ...], step: int, tie: Tie | None) -> tuple[int, ...]:
    if tie is None:
        return tuple(_grow(d, step) for d in shape)
    dim, size = tie
    if len(shape) < abs(dim) + (dim >= 0) or shape[dim] != size:
        return shape
    grown = list(shape)
    grown[dim] = _grow(size, step)
    return tuple(grown)


def made(
    value: Any,
    device: str,
    dtype: Any,
    step: int = 0,
    sizes: bool = False,
    tie: Tie | None = None,
) -> Any:
    """A sample value with every size grown by `step`: tensors' dims, and the op's size ints.

    With `tie`, only that dim of the tensors where it has that size grows (and no int): for
    ops whose inputs tie their other dims together (`out` [n, d] beside `input` [n, 2 d], or
    a dense [b, l, d] beside its offsets of b + 1 exact values).
    """
    if isinstance(value, TensorSpec):
        shape = _grown_shape(value.shape, step, tie) if _growable(value) else value.shape
        return make_tensor(
            dataclasses.replace(value, shape=shape, noncontiguous=False), device, dtype, False
        )
    if isinstance(value, list) and value and isinstance(value[0], TensorSpec):
        return [made(v, device, dtype, step, tie=tie) for v in value]
    if tie is None and sizes and isinstance(value, int) and not isinstance(value, bool):
        return _grow(value, step)
    if tie is None and sizes and isinstance(value, list):
        return [_grow(v, step) for v in value]
    return value


def _specs(sample: Sample) -> list[TensorSpec]:
    """The sample's tensors, lists opened, in argument order."""
    return [
        spec
        for value in sample.values()
        for spec in (value if isinstance(value, list) else [value])
        if isinstance(spec, TensorSpec)
    ]


def _ties(sample: Sample) -> list[Tie]:
    """Dim 0, then the last dim, of the sample's first random tensor with dims: what grows when
    not every size can."""
    first = next((s for s in _specs(sample) if _growable(s) and s.shape), None)
    if first is None:
        return []
    ties = [(0, first.shape[0]), (-1, first.shape[-1])]
    return ties[:1] if len(first.shape) == 1 else ties


def _refusal(call: Callable[[Sample], Any], kwargs: Sample) -> str | None:
    """Why the op refuses these grown inputs (sizes it ties to exact values may not grow), or
    None where it runs on them."""
    try:
        call(kwargs)
    except Exception as error:
        first = str(error).strip().splitlines()
        return f"{type(error).__name__}: {first[0]}" if first else type(error).__name__
    return None


def _warn_nothing_grows(op: Any, test: str, why: str | None, spec: str) -> None:
    """A size-growing test that grows no size proves only that the op compiles at one size."""
    warnings.warn(
        ShapeCoverageWarning(
            f"the {test} test of {spec} grows no size of its sample ("
            + (f"{describe(op)} refused it grown: {why}" if why else "no size in it is over 1")
            + "), so it cannot find a fake kernel that specializes on a size; make the first "
            "[[test.samples]] table one whose random tensors the op also takes a few rows or "
            "columns larger"
        ),
        stacklevel=3,
    )


def _grows(sample: Sample, sizes: Iterable[str]) -> bool:
    """Whether the sample has a size to grow: a random tensor's dim or a size argument over 1."""
    values = [sample.get(name) for name in sizes]
    ints = [v for value in values for v in (value if isinstance(value, list) else [value])]
    return any(isinstance(v, int) and v >= 2 for v in ints) or any(
        _growable(s) and any(d >= 2 for d in s.shape) for s in _specs(sample)
    )


def _carried(value: Any, device: str) -> Any:
    """A size int as the length of an empty tensor, so the compiled code reads it from a shape."""
    if isinstance(value, list):
        return [_carried(v, device) for v in value]
    return torch.empty(value, device=device) if value >= 2 else value


def _read(value: Any) -> Any:
    if isinstance(value, list):
        return [_read(v) for v in value]
    return value.shape[0] if isinstance(value, torch.Tensor) else value


def _frames_why(ints: tuple[str, ...]) -> str:
    if ints:
        verb = "is" if len(ints) == 1 else "are"
        return (
            f"{', '.join(ints)} {verb} int in the schema, and torch.compile specializes on ints: "
            "declare them SymInt (the kernel keeps plain integers)"
        )
    return (
        "the fake kernel specializes on a size (e.g. int() of a shape, a float return computed "
        "from one, or a Python branch on it)"
    )


def check_dynamic_shapes(
    op: Any,
    samples: Samples,
    device: str,
    dtype: Any,
    *,
    sizes: tuple[str, ...] = (),
    ints: tuple[str, ...] = (),
    mutated: tuple[str, ...] = (),
    atol: Bound = None,
    rtol: Bound = None,
    spec: str = "the spec",
) -> None:
    """torch.compile(dynamic=True) compiles the op once for three sizes of the same sample.

    Every size grows: the tensors' dims, and the arguments in `sizes` (those the
    fake kernel's output shape reads), which the compiled function computes from
    input shapes. An `int` size in the schema (`ints`) makes torch.compile
    specialize on it and compile again for every value: declare it SymInt.
    """
    import torch.fx.experimental._config as shape_config
    from torch._dynamo.testing import CompileCounter

    sample = first_sample(samples, spec, "the dynamic-shape test")
    torch.compiler.reset()
    counter = CompileCounter()

    def call(inputs: Sample) -> Any:
        kwargs = {name: _read(value) if name in sizes else value for name, value in inputs.items()}
        return outputs(op(**kwargs), kwargs, mutated)

    def grown(step: int, tie: Tie | None) -> Sample:
        return {
            name: made(value, device, dtype, step, name in sizes, tie)
            for name, value in sample.items()
        }

    # Every size grows where the op accepts that; where its inputs tie sizes together, dim 0
    # alone, else the last dim alone; where the sample fixes them all, none (three calls alike).
    candidates = [None, *_ties(sample)]
    refusals = [_refusal(call, grown(_GROWTH[-1], t)) for t in candidates]
    ties = [t for t, why in zip(candidates, refusals, strict=True) if why is None]
    if not ties or not _grows(sample, sizes):
        _warn_nothing_grows(op, "dynamic-shape", refusals[0], spec)
    growth = _GROWTH if ties else (0,) * len(_GROWTH)
    compiled = torch.compile(call, backend=counter, dynamic=True, fullgraph=True)
    # Without duck sizing: sizes a sample makes equal by chance (offsets of 4 values beside a
    # size of 4) are not tied together, so only the op's own specializations recompile.
    with shape_config.patch(use_duck_shape=False):
        for step in growth:
            kwargs = grown(step, ties[0] if ties else None)
            expected = call(_clone(kwargs))
            carried = {
                name: _carried(v, device) if name in sizes else v
                for name, v in _clone(kwargs).items()
            }
            got = compiled(carried)
            assert_same(got, expected, message(op, 0), **tolerances(dtype, atol, rtol))
    frames = counter.frame_count
    assert frames == 1, (
        f"torch.compile(dynamic=True) compiled {frames} frames for {len(_GROWTH)} sizes: "
        + _frames_why(ints)
    )


def _leaves(kwargs: Sample) -> list[tuple[str, int | None]]:
    """Where the tensors of a call are: (argument, index in its list or None)."""
    out: list[tuple[str, int | None]] = []
    for name, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            out.append((name, None))
        elif isinstance(value, list) and value and isinstance(value[0], torch.Tensor):
            out += [(name, index) for index in range(len(value))]
    return out


def _bound(kwargs: Sample, leaves: list[tuple[str, int | None]], tensors: Any) -> Sample:
    bound = {name: list(v) if isinstance(v, list) else v for name, v in kwargs.items()}
    for (name, index), tensor in zip(leaves, tensors, strict=True):
        if index is None:
            bound[name] = tensor
        else:
            bound[name][index] = tensor
    return bound


def _dynamic_dims(sample: Sample, tie: Tie | None) -> list[Any]:
    """Per tensor of the sample (lists opened): {dim: Dim.DYNAMIC} where `tie` grows it, else
    None. Dim.DYNAMIC lets the op narrow the size's range (`n - n // 2 != 1` gives n >= 4) and
    the equalities its checks impose, and fails only where the op fixes the size."""
    from torch.export import Dim

    if tie is None:
        return [None] * len(_specs(sample))
    return [
        (
            {tie[0] % len(s.shape): Dim.DYNAMIC}
            if _growable(s) and _grown_shape(s.shape, 3, tie) != s.shape
            else None
        )
        for s in _specs(sample)
    ]


def _batched(sample: Sample) -> bool:
    return any(
        isinstance(v, TensorSpec) and _growable(v) and len(v.shape) > 0 and v.shape[0] >= 2
        for v in sample.values()
    )


def check_export(
    wrapper: Any,
    samples: Samples,
    device: str,
    dtype: Any,
    *,
    mutated: tuple[str, ...] = (),
    atol: Bound = None,
    rtol: Bound = None,
    spec: str = "the spec",
) -> None:
    """torch.export.export of a module calling the op, one dim dynamic where the sample allows
    (dim 0, else the last), runs like eager at another size of that dim."""
    from torch._dynamo.exc import UserError

    full = [s for s in tables(samples) if all(_has_elements(v) for v in s.values())]
    sample = next((s for s in full if _batched(s)), None) or first_sample(
        samples, spec, "the export test"
    )
    kwargs = {name: made(value, device, dtype) for name, value in sample.items()}
    leaves = _leaves(kwargs)
    tensors = [kwargs[n] if i is None else kwargs[n][i] for n, i in leaves]

    def call(inputs: Sample) -> Any:
        return outputs(wrapper(**inputs), inputs, mutated)

    class Op(torch.nn.Module):
        def forward(self, *inputs: Any) -> Any:
            return call(_bound(kwargs, leaves, inputs))

    def grown(tie: Tie | None) -> Sample:
        step = 0 if tie is None else 3
        return {name: made(value, device, dtype, step, tie=tie) for name, value in sample.items()}

    # Dim 0 is dynamic where the op accepts 3 more rows; else the last dim where it accepts
    # that (sizes tied to exact values stay); else none: the program runs at the sample's size.
    candidates = [t for t in _ties(sample) if t[1] >= 2]
    refusals = [_refusal(call, grown(t)) for t in candidates]
    tie = next((t for t, why in zip(candidates, refusals, strict=True) if why is None), None)
    if tie is None:
        _warn_nothing_grows(wrapper, "export", refusals[-1] if refusals else None, spec)
    dynamic = _dynamic_dims(sample, tie)
    try:
        program = torch.export.export(
            Op(), tuple(tensors), dynamic_shapes=(tuple(dynamic),) if tensors else None
        )
    except UserError as error:
        if "Constraints violated" not in str(error) or tie is None:
            raise
        raise AssertionError(
            f"{describe(wrapper)}: torch.export cannot keep dim {tie[0]} of {spec}'s sample "
            "dynamic: the op specializes on that size (an int argument or return computed from "
            "it: declare it SymInt; the dynamic-shape test names it)"
        ) from error
    larger = grown(tie)
    eager = _clone(larger)
    expected = outputs(wrapper(**eager), eager, mutated)
    got = program.module()(*(larger[n] if i is None else larger[n][i] for n, i in _leaves(larger)))
    assert_same(got, expected, message(wrapper, 0), **tolerances(dtype, atol, rtol))
