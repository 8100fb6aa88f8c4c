"""The reference set's torchvision ops against torchvision itself (differential tests).

nms, roi_align and _roi_align_backward must give what torchvision's kernels give, on the
inputs torchvision's kernels are defined for: seeded random inputs and adversarial ones
(tied scores, empty inputs, degenerate and inverted boxes, boxes off the feature map,
NaN), in every dtype either side accepts; a dtype one side refuses, both refuse. On the
CPU the results must be identical, bit for bit. On CUDA (with a GPU) torchvision's
kernels let nvcc contract multiply-adds and its backward adds atomically in any order,
so float32/float64 feature values there agree to a few ulps.

This file is yours (not generated). Without an importable torchvision the tests skip,
saying why; with EXAMPLE_REQUIRE_TORCHVISION=1 in the environment (CI's torch 2.14.1
run) they fail instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import example_ops  # noqa: F401  (registers the operators)
import pytest
import torch


def _torchvision_ops() -> Any:
    try:
        import torchvision  # noqa: F401  (registers torch.ops.torchvision)
    except Exception as error:  # a torchvision built for another torch fails in many ways
        reason = f"torchvision is not importable beside torch {torch.__version__}: {error!r}"
        if os.environ.get("EXAMPLE_REQUIRE_TORCHVISION", "") not in ("", "0"):
            pytest.fail(f"{reason} (EXAMPLE_REQUIRE_TORCHVISION is set)", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
    return torch.ops.torchvision


TV = _torchvision_ops()
EX = torch.ops.example

NMS_CASES = 2400  # per device: 600 per family below
ROI_CASES = 1200  # per device: 300 per family below; each runs the forward and the backward
COMPARED = {"nms": 2000, "roi_align": 1000}  # at least this many run on both sides

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ),
]

Case = dict[str, Any]


def _outcome(fn: Callable[..., torch.Tensor], *args: Any) -> torch.Tensor | type:
    """The result, or the type of error it raised (either side may refuse an input)."""
    try:
        return fn(*args)
    except (RuntimeError, ValueError, TypeError, NotImplementedError):
        return RuntimeError


def _dtype(index: int) -> torch.dtype:
    """float32 and float64 mostly; 1 case in 20 float16, 1 in 20 bfloat16."""
    if index % 20 in (0, 1):
        return (torch.float16, torch.bfloat16)[index % 20]
    return torch.float32 if index % 2 == 0 else torch.float64


def _describe(case: Case) -> str:
    def one(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            return f"Tensor{tuple(v.shape)} {v.dtype}" + ("" if v.is_contiguous() else " strided")
        return repr(v)

    return ", ".join(f"{k}={one(v)}" for k, v in case.items())


# ---- nms ----------------------------------------------------------------------------------


def _boxes(g: torch.Generator, n: int, kind: str) -> torch.Tensor:
    if kind == "integer":  # pixel boxes: exact IoUs such as 1/2, 3/10, often equal to the threshold
        xy = torch.randint(0, 12, (n, 2), generator=g).double()
        wh = torch.randint(0, 8, (n, 2), generator=g).double()
    elif kind == "degenerate":  # zero-size, inverted, huge and tiny boxes
        xy = torch.randn(n, 2, generator=g, dtype=torch.float64) * 10
        wh = torch.randn(n, 2, generator=g, dtype=torch.float64) * 5
        wh[torch.rand(n, generator=g) < 0.3] = 0.0
        xy[torch.rand(n, generator=g) < 0.1] *= 1e6
        wh[torch.rand(n, generator=g) < 0.1] *= 1e-6
    else:  # clustered detector boxes
        centers = torch.rand(max(n // 6, 1), 2, generator=g, dtype=torch.float64) * 100
        owner = torch.randint(0, centers.shape[0], (n,), generator=g)
        xy = centers[owner] + torch.randn(n, 2, generator=g, dtype=torch.float64) * 3
        wh = 5 + torch.rand(n, 2, generator=g, dtype=torch.float64) * 30
    return torch.cat((xy, xy + wh), dim=1)


def _scores(g: torch.Generator, n: int, tied: bool) -> torch.Tensor:
    if tied:  # quantized scores: ties everywhere
        return torch.randint(0, 4, (n,), generator=g).double() / 4
    return torch.rand(n, generator=g, dtype=torch.float64)


def _nms_case(g: torch.Generator, family: str, index: int, device: str) -> Case:
    sizes = (0, 1, 2, 3, 7, 8, 9, 17, 33, 64, 65, 150)
    n = sizes[index % len(sizes)] if index % 50 else 1000 + index % 7  # a few large ones
    thresholds = (0.5, 0.3, 0.7, 0.0, 1.0, 0.25, 0.45, -0.1)
    threshold = (
        thresholds[index % len(thresholds)] if index % 3 else float(torch.rand(1, generator=g))
    )
    dtype = _dtype(index)
    if family == "ties":
        dets, scores = _boxes(g, n, "clustered"), _scores(g, n, tied=True)
        if index % 10 == 0:  # identical boxes, identical scores: which one is kept
            dets, scores = dets[:1].expand(n, 4).clone(), torch.full((n,), 0.5, dtype=torch.float64)
        elif index % 10 == 5:  # the sort's edges: -0.0 and 0.0 tie, NaN above inf, -inf last
            edges = torch.tensor([0.0, -0.0, float("nan"), float("inf"), -float("inf"), 1.0])
            scores = edges[torch.randint(0, len(edges), (n,), generator=g)].double()
    elif family == "integer":
        dets, scores = _boxes(g, n, "integer"), _scores(g, n, tied=index % 2 == 0)
    elif family == "degenerate":
        dets, scores = _boxes(g, n, "degenerate"), _scores(g, n, tied=index % 2 == 0)
        if n and index % 7 == 0:  # NaN corners and scores
            dets[torch.rand(n, generator=g) < 0.2, index % 4] = float("nan")
            scores[torch.rand(n, generator=g) < 0.1] = float("nan")
    else:
        dets, scores = _boxes(g, n, "clustered"), _scores(g, n, tied=False)
    dets, scores = dets.to(device, dtype), scores.to(device, dtype)
    if index % 11 == 0 and n:  # strided inputs
        dets = dets.t().contiguous().t()
        scores = torch.stack((scores, scores), dim=1)[:, 0]
    if index % 97 == 0:  # dtypes that differ: both refuse on the CPU, both take them on CUDA
        scores = scores.to(torch.float64 if dtype != torch.float64 else torch.float32)
    return {"dets": dets, "scores": scores, "iou_threshold": threshold}


def _nms_cases(device: str) -> Iterator[tuple[str, int, Case]]:
    families = ("random", "ties", "integer", "degenerate")
    for family_index, family in enumerate(families):
        g = torch.Generator().manual_seed(1000 + family_index)
        for index in range(NMS_CASES // len(families)):
            yield family, index, _nms_case(g, family, index, device)


@pytest.mark.parametrize("device", DEVICES)
def test_nms_matches_torchvision(device: str) -> None:
    compared = refused = 0
    for family, index, case in _nms_cases(device):
        args = (case["dets"], case["scores"], case["iou_threshold"])
        expected, actual = _outcome(TV.nms, *args), _outcome(EX.nms, *args)
        where = f"nms {family} case {index}: {_describe(case)}"
        if expected is RuntimeError or actual is RuntimeError:
            assert (
                expected is actual
            ), f"{where}: torchvision gave {expected}, example gave {actual}"
            refused += 1
            continue
        assert actual.dtype == torch.int64 and torch.equal(
            actual, expected
        ), f"{where}: kept {actual.tolist()}, torchvision keeps {expected.tolist()}"
        compared += 1
    assert compared + refused == NMS_CASES
    assert compared >= COMPARED["nms"], f"only {compared} of {NMS_CASES} cases ran on both sides"


def test_nms_keeps_the_first_of_equal_scores() -> None:
    """The issue's case: 17 identical boxes with equal scores keep index 0, as torchvision."""
    dets = torch.tensor([[0.0, 0.0, 10.0, 10.0]] * 17)
    scores = torch.ones(17)
    assert EX.nms(dets, scores, 0.5).tolist() == [0] == TV.nms(dets, scores, 0.5).tolist()


# ---- roi_align, _roi_align_backward ----------------------------------------------------------


def _rois(
    g: torch.Generator,
    k: int,
    batch: int,
    h: int,
    w: int,
    scale: float,
    family: str,
    keep_ordered: bool,
) -> torch.Tensor:
    """rois [k, 5] in image coordinates (feature coordinates / scale)."""
    img_h, img_w = h / scale, w / scale
    x1 = torch.rand(k, generator=g, dtype=torch.float64) * img_w
    y1 = torch.rand(k, generator=g, dtype=torch.float64) * img_h
    bw = torch.rand(k, generator=g, dtype=torch.float64) * img_w * 0.8
    bh = torch.rand(k, generator=g, dtype=torch.float64) * img_h * 0.8
    if family == "outside":  # boxes reaching past the map, or wholly off it
        x1 = x1 * 3 - img_w
        y1 = y1 * 3 - img_h
    elif family == "degenerate":  # zero-size and inverted boxes, integer corners
        bw[torch.rand(k, generator=g) < 0.3] = 0.0
        bh[torch.rand(k, generator=g) < 0.3] = 0.0
        if not keep_ordered:
            bw[torch.rand(k, generator=g) < 0.3] *= -1
            bh[torch.rand(k, generator=g) < 0.3] *= -1
        x1, y1 = x1.round(), y1.round()
    batch_index = torch.randint(0, batch, (k,), generator=g).double()
    return torch.stack((batch_index, x1, y1, x1 + bw, y1 + bh), dim=1)


def _roi_case(g: torch.Generator, family: str, index: int, device: str) -> Case:
    dense = index % 10 in (2, 3)  # many rois on a small map: the channels-last kernels
    batch = 1 + index % 3
    channels = (1, 3, 8, 9, 17, 32, 0)[index % 7] if not dense else 40
    h, w = (1 + index % 9, 1 + (index * 7) % 11) if not dense else (12, 10)
    k = (0, 1, 2, 5, 9)[index % 5] if not dense else 64
    scale = (1.0, 0.5, 0.25, 1 / 16, 2.0)[index % 5]
    if index % 4 == 1:
        scale = float(torch.rand(1, generator=g, dtype=torch.float64) * 2)
    pooled_h, pooled_w = (index % 4, 1 + index % 3) if index % 13 else (0, 2)
    if dense:
        pooled_h, pooled_w = 3, 3
    sampling_ratio = (-1, 0, 1, 2, 3)[index % 5]
    aligned = index % 2 == 0
    # torchvision sizes its sampling grid with ceil(roi size / pooled size): a roi inverted
    # by more than a bin with adaptive sampling and aligned boxes makes it allocate a
    # negative size (an error from its kernel, not a result): such rois stay ordered.
    rois = _rois(g, k, batch, h, w, scale, family, keep_ordered=aligned and sampling_ratio <= 0)
    dtype = _dtype(index)
    x = torch.randn(batch, channels, h, w, generator=g, dtype=torch.float64)
    grad = torch.randn(k, channels, pooled_h, pooled_w, generator=g, dtype=torch.float64)
    x, rois, grad = x.to(device, dtype), rois.to(device, dtype), grad.to(device, dtype)
    if index % 6 == 0:  # strided (channels-last) input and a strided gradient
        x = x.contiguous(memory_format=torch.channels_last)
        grad = grad.transpose(2, 3).contiguous().transpose(2, 3)
    return {
        "input": x,
        "rois": rois,
        "spatial_scale": scale,
        "pooled_height": pooled_h,
        "pooled_width": pooled_w,
        "sampling_ratio": sampling_ratio,
        "aligned": aligned,
        "grad": grad,
    }


def _roi_cases(device: str) -> Iterator[tuple[str, int, Case]]:
    families = ("random", "inside", "outside", "degenerate")
    for family_index, family in enumerate(families):
        g = torch.Generator().manual_seed(2000 + family_index)
        for index in range(ROI_CASES // len(families)):
            yield family, index, _roi_case(g, family, index, device)


def _same(actual: torch.Tensor, expected: torch.Tensor, exact: bool) -> bool:
    """Identical values (NaN where torchvision has NaN), or within a few ulps where not exact."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return False
    if exact:
        return torch.equal(actual.isnan(), expected.isnan()) and torch.equal(
            actual.nan_to_num(), expected.nan_to_num()
        )
    ulps = 8 * torch.finfo(actual.dtype).eps
    return torch.allclose(actual, expected, rtol=ulps, atol=ulps, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
def test_roi_align_and_backward_match_torchvision(device: str) -> None:
    compared = refused = 0
    for family, index, case in _roi_cases(device):
        where = f"roi_align {family} case {index}: {_describe(case)}"
        forward = [
            case[name]
            for name in (
                "input",
                "rois",
                "spatial_scale",
                "pooled_height",
                "pooled_width",
                "sampling_ratio",
                "aligned",
            )
        ]
        expected, actual = _outcome(TV.roi_align, *forward), _outcome(EX.roi_align, *forward)
        if expected is RuntimeError or actual is RuntimeError:
            assert (
                expected is actual
            ), f"{where}: torchvision gave {expected}, example gave {actual}"
            refused += 1
            continue
        # CUDA: float16 rounds every operation (no contraction), so its forward is exact too.
        exact = device == "cpu" or actual.dtype == torch.float16
        assert _same(actual, expected, exact), f"{where}: forward differs from torchvision"
        batch, channels, height, width = case["input"].shape
        backward = [
            case["grad"],
            case["rois"],
            case["spatial_scale"],
            case["pooled_height"],
            case["pooled_width"],
            batch,
            channels,
            height,
            width,
            case["sampling_ratio"],
            case["aligned"],
        ]
        expected, actual = TV._roi_align_backward(*backward), EX._roi_align_backward(*backward)
        exact = device == "cpu"  # CUDA adds atomically, in no fixed order
        assert _same(actual, expected, exact), f"{where}: backward differs from torchvision"
        compared += 1
    assert compared + refused == ROI_CASES
    assert (
        compared >= COMPARED["roi_align"]
    ), f"only {compared} of {ROI_CASES} cases ran on both sides"


@pytest.mark.parametrize("pooled", [(0, 2), (2, 0), (0, 0)])
def test_roi_align_with_no_bins_is_empty(pooled: tuple[int, int]) -> None:
    """pooled_height or pooled_width 0: an empty output and a zero gradient, as torchvision."""
    x = torch.randn(1, 2, 5, 5)
    rois = torch.tensor([[0.0, 0.0, 0.0, 3.0, 3.0]])
    out = EX.roi_align(x, rois, 1.0, *pooled, 2, False)
    assert out.shape == (1, 2, *pooled) == TV.roi_align(x, rois, 1.0, *pooled, 2, False).shape
    grad = torch.randn(1, 2, *pooled)
    gi = EX._roi_align_backward(grad, rois, 1.0, *pooled, 1, 2, 5, 5, 2, False)
    assert torch.equal(gi, TV._roi_align_backward(grad, rois, 1.0, *pooled, 1, 2, 5, 5, 2, False))
    assert torch.equal(gi, torch.zeros(1, 2, 5, 5))
