"""The checks of what PyTorch 2 does with an op beyond eager calls and compilation at other
sizes: autocast, tags and CUDA graphs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest
import torch

from ._compare import Bound, assert_same, message, outputs, tolerances
from ._samples import Sample, Samples
from ._samples import clone as _clone
from ._shapes import first_sample, made, tables

__all__ = ["check_autocast", "check_cuda_graph", "check_cuda_graph_compiled", "check_tags"]


def _autocast(value: Any, dtype: Any) -> Any:
    """torch.autocast's input policy of register_autocast: floating tensors cast, float64 never."""
    if isinstance(value, list):
        return [_autocast(v, dtype) for v in value]
    if (
        isinstance(value, torch.Tensor)
        and value.is_floating_point()
        and value.dtype != torch.float64
    ):
        return value.to(dtype)
    return value


def check_autocast(
    op: Any,
    reference: Callable[..., Any],
    samples: Samples,
    device: str,
    dtype: Any,
    *,
    atol: Bound = None,
    rtol: Bound = None,
) -> None:
    """Under torch.autocast the op runs in `dtype` and matches the reference on inputs cast the
    same way."""
    for sample in tables(samples):
        kwargs = {name: made(value, device, torch.float32) for name, value in sample.items()}
        with torch.autocast(device, dtype=dtype):
            got = op(**_clone(kwargs))
        expected = reference(**{name: _autocast(v, dtype) for name, v in kwargs.items()})
        for out in got if isinstance(got, (tuple, list)) else (got,):
            assert (
                out.dtype == dtype
            ), f"under torch.autocast the op returned {out.dtype}, not {dtype}"
        assert_same(got, expected, message(op, 0), **tolerances(dtype, atol, rtol))


def check_tags(op: Any, tags: Iterable[str]) -> None:
    """The registered op carries the spec's tags (torch.Tag names)."""
    has = {tag.name for tag in op.tags}
    missing = sorted(set(tags) - has)
    assert not missing, f"{op} lacks the tags {missing} (it has {sorted(has)})"


def _cuda_sample(samples: Samples, spec: str) -> Sample:
    if not torch.cuda.is_available():
        pytest.skip("CUDA graphs need a CUDA device")
    return first_sample(samples, spec, "the CUDA graph test")


def check_cuda_graph(
    op: Any,
    samples: Samples,
    dtype: Any,
    *,
    mutated: tuple[str, ...] = (),
    atol: Bound = None,
    rtol: Bound = None,
    spec: str = "the spec",
) -> None:
    """Captured in a torch.cuda.CUDAGraph, the op replays on fresh inputs like eager.

    A kernel launched on the legacy default stream instead of the current one is
    not captured: the replay then leaves the output stale, or capture fails.
    """
    sample = _cuda_sample(samples, spec)
    static = {name: made(value, "cuda", dtype) for name, value in sample.items()}
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            op(**_clone(static))
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        output = outputs(op(**static), static, mutated)
    torch.manual_seed(1)
    fresh = {name: made(value, "cuda", dtype) for name, value in sample.items()}
    for name, value in fresh.items():
        if isinstance(value, torch.Tensor):
            static[name].copy_(value)
    graph.replay()
    torch.cuda.synchronize()
    eager = _clone(fresh)
    expected = outputs(op(**eager), eager, mutated)
    assert_same(output, expected, message(op, 0), **tolerances(dtype, atol, rtol))


def check_cuda_graph_compiled(
    op: Any,
    samples: Samples,
    dtype: Any,
    *,
    mutated: tuple[str, ...] = (),
    atol: Bound = None,
    rtol: Bound = None,
    spec: str = "the spec",
) -> None:
    """torch.compile(mode="reduce-overhead") (CUDA graphs under Inductor) matches eager over
    three calls."""
    sample = _cuda_sample(samples, spec)
    torch.compiler.reset()

    def call(**kwargs: Any) -> Any:
        return outputs(op(**kwargs), kwargs, mutated)

    compiled = torch.compile(call, mode="reduce-overhead", fullgraph=True)
    for seed in range(3):
        torch.manual_seed(seed)
        kwargs = {name: made(value, "cuda", dtype) for name, value in sample.items()}
        expected = call(**_clone(kwargs))
        got = compiled(**_clone(kwargs))
        assert_same(got, expected, message(op, 0), **tolerances(dtype, atol, rtol))
