"""The spec's samples made into arguments, and an op's outputs made into a flat list.

Every check (reference, opcheck, gradcheck, compile, and those of the other
modules) builds its arguments with `materialize` and walks outputs with
`flatten`, so they all see the same tensors and the same structure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "Sample",
    "Samples",
    "TensorSpec",
    "clone",
    "dtype_coverage",
    "dtype_named",
    "flatten",
    "materialize",
    "optional_coverage",
    "tensors_of",
]

Sample = dict[str, Any]
# A sample is a table of the spec, or a generator of testing_helpers.py giving several.
Samples = list[Sample | Callable[[str, Any], list[Sample]]]

# torch's dtypes by name ("float32"): a lookup that reaches nothing but dtypes.
_DTYPES = {
    str(value).removeprefix("torch."): value
    for value in vars(torch).values()
    if isinstance(value, torch.dtype)
}


def dtype_named(name: str) -> Any:
    """The torch.dtype called `name` ("float32", "int64")."""
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"torch has no dtype {name!r}") from None


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of a sample: random (shape, low, high), exact (values) or offsets."""

    shape: tuple[int, ...]
    dtype: str | None = None
    low: float | None = None
    high: float | None = None
    values: Any = None
    noncontiguous: bool = False
    offsets: bool = False
    sorted: bool = False
    requires_grad: bool = True


def _offsets(spec: TensorSpec, device: str, dtype: Any) -> Any:
    """0 followed by running sums of lengths drawn in [low, high): jagged offsets."""
    low = int(spec.low) if spec.low is not None else 0
    high = int(spec.high) if spec.high is not None else low + 4
    lengths = torch.randint(low, max(high, low + 1), (spec.shape[0] - 1,), dtype=dtype)
    return torch.cat([lengths.new_zeros(1), lengths.cumsum(0)]).to(device)


def make_tensor(spec: TensorSpec, device: str, dtype: Any, requires_grad: bool) -> Any:
    """The tensor `spec` describes, in `dtype` unless it names its own."""
    dtype = dtype_named(spec.dtype) if spec.dtype else dtype
    requires_grad = (
        requires_grad and spec.requires_grad and (dtype.is_floating_point or dtype.is_complex)
    )
    if spec.values is not None:
        tensor = torch.tensor(spec.values, dtype=dtype, device=device).reshape(spec.shape)
    elif spec.offsets:
        tensor = _offsets(spec, device, dtype)
    else:
        noncontiguous = spec.noncontiguous and not spec.sorted
        tensor = torch.testing.make_tensor(
            spec.shape,
            device=device,
            dtype=dtype,
            low=spec.low,
            high=spec.high,
            noncontiguous=noncontiguous,
        )
        if not spec.sorted:
            return tensor.requires_grad_(requires_grad)
    if spec.sorted:
        tensor = tensor.sort(dim=-1).values
    if spec.noncontiguous:  # every other element of a buffer twice as long, as make_tensor does
        strides = [2 * s for s in torch.empty(spec.shape).stride()]
        tensor = torch.empty_strided(spec.shape, strides, dtype=dtype, device=device).copy_(tensor)
    return tensor.requires_grad_(requires_grad)


def _value(value: Any, device: str, dtype: Any, grad: bool) -> Any:
    if isinstance(value, TensorSpec):
        return make_tensor(value, device, dtype, grad)
    if isinstance(value, torch.Tensor):  # from a generator of testing_helpers.py
        can = grad and (value.is_floating_point() or value.is_complex())
        return value.detach().clone().requires_grad_(can) if can else value
    if isinstance(value, list) and any(isinstance(v, (TensorSpec, torch.Tensor)) for v in value):
        return [_value(v, device, dtype, grad) for v in value]  # Tensor[], Tensor?[] (None items)
    return value


def materialize(
    samples: Samples, device: str, dtype: Any, requires_grad: Iterable[str] = ()
) -> Iterator[Sample]:
    """Build each sample's arguments; the same seed gives the same tensors.

    A sample is a table of the spec (`TensorSpec` for tensors) or a generator of
    `testing_helpers.py` called as `generator(device, dtype)`, which gives several.
    `dtype` applies to the tensors whose sample names no dtype; the tensors of
    the arguments named in `requires_grad` require grad where their dtype can.
    """
    wanted = set(requires_grad)
    for index, entry in enumerate(samples):
        torch.manual_seed(index)
        for sample in entry(device, dtype) if callable(entry) else [entry]:
            yield {
                name: _value(value, device, dtype, name in wanted) for name, value in sample.items()
            }


def flatten(value: Any) -> list[Any]:
    """The leaves of an output in order: tensors, None, numbers, strings (lists, tuples opened)."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in flatten(item)]
    return [value]


def tensors_of(value: Any) -> list[Any]:
    """The tensors among `value`'s leaves, in order."""
    return [leaf for leaf in flatten(value) if isinstance(leaf, torch.Tensor)]


def clone(value: Any) -> Any:
    """A copy of arguments or outputs whose tensors are new leaves (same requires_grad)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def optional_coverage(samples: list[Sample], optional: Iterable[str]) -> dict[str, str]:
    """For each optional argument, which samples give it and which pass None or leave it out."""
    lines = {}
    for name in optional:
        given = [i + 1 for i, s in enumerate(samples) if s.get(name) is not None]
        absent = [i + 1 for i, s in enumerate(samples) if s.get(name) is None]
        lines[name] = (
            f"{name}: given in samples {given or 'none'}, None in samples {absent or 'none'}"
        )
    return lines


def dtype_coverage(samples: Samples, dtypes: Iterable[Any]) -> dict[str, str]:
    """For each test dtype, which samples built for it hold a tensor of it: a sample whose
    tensors all name their dtype, or a generator that ignores its `dtype`, runs the op in
    another dtype than the test's."""
    lines = {}
    for dtype in dtypes:
        built = [tensors_of(list(s.values())) for s in materialize(samples, "cpu", dtype)]
        having = [i + 1 for i, ts in enumerate(built) if any(t.dtype == dtype for t in ts)]
        name = str(dtype).removeprefix("torch.")
        lines[name] = f"{name}: in samples {having or 'none'}"
        if not having:
            seen = sorted({str(t.dtype).removeprefix("torch.") for ts in built for t in ts})
            lines[name] += f" (their tensors are {', '.join(seen) or 'none'})"
    return lines
