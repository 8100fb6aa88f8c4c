"""matmul's float32 tolerance (generated_example/ops/matmul.toml) admits another summation order, nothing worse.

The CUDA kernel accumulates each output in K order with FMAs; the test's
reference (`a @ b`) sums in its BLAS's order. Both are emulated here on the
CPU, with the samples the generated test draws, over many seeds.
"""

from __future__ import annotations

import tomllib

import torch

from opgen.testing import tolerances

from _support import EXAMPLE

SEEDS = 400


def _spec_tolerances() -> dict[str, float]:
    """assert_close's bounds for float32, as the generated tests compute them (Note [Test tolerances])."""
    test = tomllib.loads((EXAMPLE / "ops" / "matmul.toml").read_text())["test"]
    return tolerances(torch.float32, test.get("atol"), test.get("rtol"))


def _samples() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Batches of the spec's non-empty samples, drawn as make_tensor draws them."""
    test = tomllib.loads((EXAMPLE / "ops" / "matmul.toml").read_text())["test"]
    shapes = [
        (s["a"]["shape"], s["b"]["shape"])
        for s in test["samples"]
        if 0 not in s["a"]["shape"] + s["b"]["shape"]
    ]
    torch.manual_seed(0)
    return [
        (
            torch.testing.make_tensor((SEEDS, *a), dtype=torch.float32, device="cpu"),
            torch.testing.make_tensor((SEEDS, *b), dtype=torch.float32, device="cpu"),
        )
        for a, b in shapes
    ]


def _in_order(a: torch.Tensor, b: torch.Tensor, order, accumulator=torch.float32) -> torch.Tensor:
    """acc = fma(a[:, k], b[k, :], acc) for k in `order`, rounded to `accumulator` at every step."""
    acc = torch.zeros(a.shape[0], a.shape[1], b.shape[2], dtype=accumulator)
    a64, b64 = a.double(), b.double()
    for k in order:
        acc = (a64[:, :, k : k + 1] * b64[:, k : k + 1, :] + acc.double()).to(accumulator)
    return acc.float()


def _failing_seeds(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> int:
    bad = (got - expected).abs() > atol + rtol * expected.abs()
    return int(bad.flatten(1).any(1).sum())


def test_other_summation_orders_pass():
    limits = _spec_tolerances()
    for a, b in _samples():
        expected = a @ b
        k = a.shape[2]
        for order in (range(k), reversed(range(k)), [*range(0, k, 2), *range(1, k, 2)]):
            got = _in_order(a, b, order)
            assert _failing_seeds(got, expected, **limits) == 0, (tuple(a.shape), limits)


def test_a_float16_accumulator_still_fails():
    """The bound is not vacuous: an accumulator of too low precision fails every seed."""
    limits = _spec_tolerances()
    a, b = max(_samples(), key=lambda ab: ab[0].shape[2])
    got = _in_order(a, b, range(a.shape[2]), accumulator=torch.float16)
    assert _failing_seeds(got, a @ b, **limits) == SEEDS
