"""Sample generators and reference functions of the example_ops tests.

This file is yours: opgen created it for the functions the specs name
(`[test] samples_from`, `[test] reference_from`, `[bench] inputs_from`) and will
not overwrite it. When a spec names a new function, `opgen generate` merges its
stub into this file and keeps your bodies. It is imported by the generated tests
and by `opgen bench`: keep it free of test-only imports.

The references are vectorised PyTorch written from the semantics of the original
operators (vLLM's `forward_native` methods, torchvision's C++ and CUDA `nms` and
`roi_align` kernels), not from this project's kernels. The generators make the inputs
those operators see in a model: real rotary caches, a detector's overlapping boxes,
valid regions of interest.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

# ---- vLLM: rms_norm, fused_add_rms_norm ---------------------------------------------------


def _rms_norm_forward_native(
    x: Tensor, weight: Tensor, epsilon: float, residual: Tensor | None = None
) -> tuple[Tensor, Tensor | None]:
    """vLLM's RMSNorm.forward_native: (output, new residual or None).

    In float32: x (plus the residual, unrounded), its mean square, the scaling; then cast
    back to x's dtype and multiplied by weight in that dtype. The new residual is the float32
    sum cast back.
    """
    orig_dtype = x.dtype
    x = x.to(torch.float32)
    if residual is not None:
        x = x + residual.to(torch.float32)
        residual = x.to(orig_dtype)
    variance = x.pow(2).mean(dim=-1, keepdim=True)
    x = x * torch.rsqrt(variance + epsilon)
    return x.to(orig_dtype) * weight, residual


def rms_norm_reference(result: Tensor, input: Tensor, weight: Tensor, epsilon: float) -> Tensor:
    """The new `result`: forward_native of input."""
    return _rms_norm_forward_native(input, weight, epsilon)[0]


def fused_add_rms_norm_reference(
    input: Tensor, residual: Tensor, weight: Tensor, epsilon: float
) -> tuple[Tensor, Tensor | None]:
    """(new input, new residual): forward_native with a residual."""
    return _rms_norm_forward_native(input, weight, epsilon, residual)


# ---- vLLM: rotary_embedding -------------------------------------------------------------


def _rotate(x: Tensor, cos: Tensor, sin: Tensor, head_size: int, is_neox: bool) -> Tensor:
    """forward_native on one tensor: x [num_tokens, ...] with heads of head_size values.

    In x's dtype, each product and sum rounded to it, cos and sin cast to it first: vLLM's
    ApplyRotaryEmb.forward_static as RotaryEmbedding.forward_static calls it (no float32
    compute).
    """
    num_tokens = cos.shape[0]
    if num_tokens == 0:
        return x.clone()
    rot_dim = cos.shape[-1] * 2
    heads = x.reshape(num_tokens, -1, head_size)
    rot, rest = heads[..., :rot_dim], heads[..., rot_dim:]
    cos = cos.unsqueeze(-2).to(x.dtype)
    sin = sin.unsqueeze(-2).to(x.dtype)
    if is_neox:
        x1, x2 = torch.chunk(rot, 2, dim=-1)
    else:
        x1, x2 = rot[..., ::2], rot[..., 1::2]
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    rotated = torch.cat((o1, o2), dim=-1) if is_neox else torch.stack((o1, o2), dim=-1).flatten(-2)
    return torch.cat((rotated, rest), dim=-1).reshape(x.shape)


def rotary_embedding_reference(
    positions: Tensor,
    query: Tensor,
    key: Tensor | None,
    head_size: int,
    cos_sin_cache: Tensor,
    is_neox: bool,
) -> tuple[Tensor, Tensor | None]:
    """(new query, new key): vLLM's RotaryEmbedding.forward_native, out of place."""
    cos_sin = cos_sin_cache.index_select(0, positions.flatten())
    cos, sin = cos_sin.chunk(2, dim=-1)
    new_query = _rotate(query, cos, sin, head_size, is_neox)
    new_key = None if key is None else _rotate(key, cos, sin, head_size, is_neox)
    return new_query, new_key


def rotary_cos_sin_cache(
    max_position: int, rot_dim: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> Tensor:
    """vLLM's cache: [max_position, rot_dim] with cos(t * f) | sin(t * f), f = base^(-2i/rot_dim)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rot_dim, 2, dtype=torch.float) / rot_dim))
    freqs = torch.outer(torch.arange(max_position, dtype=torch.float), inv_freq)
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(dtype)


def rotary_samples(
    device: str, dtype: torch.dtype, tokens: int = 7, heads: int = 4, head_size: int = 64
) -> list[dict[str, Any]]:
    """Real caches (vLLM's formula): neox with a key of fewer heads, GPT-J without a key, and
    a float32 cache with bfloat16/float16 tensors. `opgen bench` times the first one at its
    size (query and key of `heads` heads)."""
    max_position = max(2 * tokens, 64)
    positions = torch.randint(0, max_position, (tokens,), device=device)

    def heads_of(count: int) -> Tensor:
        return torch.randn(tokens, count * head_size, device=device).to(dtype)

    cache = rotary_cos_sin_cache(max_position, head_size, dtype=dtype).to(device)
    partial = rotary_cos_sin_cache(max_position, head_size // 2).to(
        device
    )  # float32, rot_dim < head_size
    return [
        {
            "positions": positions,
            "query": heads_of(heads),
            "key": heads_of(heads),
            "head_size": head_size,
            "cos_sin_cache": cache,
            "is_neox": True,
        },
        {
            "positions": positions,
            "query": heads_of(heads).view(tokens, heads, head_size),
            "key": None,
            "head_size": head_size,
            "cos_sin_cache": cache,
            "is_neox": False,
        },
        {
            "positions": positions,
            "query": heads_of(heads),
            "key": heads_of(max(heads // 4, 1)),
            "head_size": head_size,
            "cos_sin_cache": partial,
            "is_neox": False,
        },
    ]


# ---- torchvision: nms ---------------------------------------------------------------------


def _cpp_max(a: Tensor, b: Tensor) -> Tensor:
    """std::max(a, b) = a < b ? b : a (NaN handling as in the C++ kernel)."""
    return torch.where(a < b, b, a)


def _cpp_min(a: Tensor, b: Tensor) -> Tensor:
    """std::min(a, b) = b < a ? b : a."""
    return torch.where(b < a, b, a)


def _cpu_suppression(boxes: Tensor, iou_threshold: float) -> Tensor:
    """[N, N] bool: box i suppresses box j, as torchvision's CPU kernel decides.

    The IoU is its expression in the boxes' dtype, inter / (area_i + area_j - inter), with
    std::max / std::min operand order, compared with the threshold in float64 as the C++
    `ovr > iou_threshold` does.
    """
    x1, y1, x2, y2 = boxes.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    if torch.isnan(boxes).any():  # std::max / std::min operand order decides what NaN gives
        zero = torch.zeros((), dtype=boxes.dtype, device=boxes.device)
        w = _cpp_max(zero, _cpp_min(x2[:, None], x2[None, :]) - _cpp_max(x1[:, None], x1[None, :]))
        h = _cpp_max(zero, _cpp_min(y2[:, None], y2[None, :]) - _cpp_max(y1[:, None], y1[None, :]))
    else:  # the same values, faster
        w = (
            torch.minimum(x2[:, None], x2[None, :]) - torch.maximum(x1[:, None], x1[None, :])
        ).clamp_(min=0)
        h = (
            torch.minimum(y2[:, None], y2[None, :]) - torch.maximum(y1[:, None], y1[None, :])
        ).clamp_(min=0)
    inter = w * h
    iou = inter / (areas[:, None] + areas[None, :] - inter)
    return iou.double() > iou_threshold


def _cuda_suppression(boxes: Tensor, iou_threshold: float) -> Tensor:
    """[N, N] bool: box i suppresses box j, as torchvision's CUDA kernel (devIoU) decides.

    max / min ignore NaN (fmax / fmin); float16 boxes are measured in float32 with the
    widths, heights and y extents rounded to float16 (c10::Half arithmetic); the IoU is
    compared with the threshold rounded to float32.
    """
    measure = torch.float32 if boxes.dtype == torch.float16 else boxes.dtype

    def in_box_type(v: Tensor) -> Tensor:
        return v.to(boxes.dtype).to(measure)

    x1, y1, x2, y2 = boxes.to(measure).unbind(1)
    areas = (x2 - x1) * in_box_type(y2 - y1)
    zero = torch.zeros((), dtype=measure, device=boxes.device)
    w = torch.fmax(
        in_box_type(torch.fmin(x2[:, None], x2[None, :]) - torch.fmax(x1[:, None], x1[None, :])),
        zero,
    )
    h = torch.fmax(
        in_box_type(torch.fmin(y2[:, None], y2[None, :]) - torch.fmax(y1[:, None], y1[None, :])),
        zero,
    )
    inter = w * h
    iou = inter / (areas[:, None] + areas[None, :] - inter)
    threshold = torch.tensor(iou_threshold, dtype=torch.float32).to(measure).item()
    return iou > threshold


def nms_reference(dets: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """torchvision's nms: IoU matrix of the score-sorted boxes, then greedy suppression.

    Boxes are taken in a stable descending sort of the scores (equal scores in index order,
    as torchvision sorts them). Whether a box suppresses another is decided as torchvision's
    kernel for the boxes' device decides it: its CPU and CUDA kernels differ (see
    _cpu_suppression and _cuda_suppression).
    """
    if dets.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=dets.device)
    order = scores.sort(dim=0, descending=True, stable=True).indices
    boxes = dets[order]
    decide = _cuda_suppression if dets.is_cuda else _cpu_suppression
    # row i suppresses the later boxes j > i that overlap it
    suppresses = decide(boxes, iou_threshold).triu_(1)
    keep = torch.ones(len(order), dtype=torch.bool, device=dets.device)
    i = 0
    while i < len(order):  # one step per kept box, not per box
        keep &= ~suppresses[i]
        later = keep[i + 1 :].nonzero()
        if later.numel() == 0:
            break
        i += 1 + int(later[0])
    return order[keep]


def detection_boxes(
    n: int,
    *,
    image_size: float = 800.0,
    objects: int = 40,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """(boxes [n, 4] as x1, y1, x2, y2; scores [n]) like a detector's raw output.

    Boxes gather around `objects` object boxes with jittered corners, so many of them
    overlap heavily (as before nms in a detector); all are valid (x1 < x2, y1 < y2).
    """
    centers = torch.rand(objects, 2) * image_size
    sizes = 16 + torch.rand(objects, 2) * (image_size / 4)
    owner = torch.randint(0, objects, (n,))
    c = centers[owner] + torch.randn(n, 2) * sizes[owner] * 0.1
    s = sizes[owner] * (1 + 0.2 * torch.randn(n, 2)).clamp(min=0.3)
    boxes = torch.cat((c - s / 2, c + s / 2), dim=1).clamp(0, image_size)
    boxes[:, 2:] = torch.maximum(boxes[:, 2:], boxes[:, :2] + 1)
    scores = torch.rand(n)
    return boxes.to(dtype), scores.to(dtype)


def detection_samples(device: str, dtype: torch.dtype, n: int = 300) -> list[dict[str, Any]]:
    """n detector boxes at thresholds 0.5 (the first: `opgen bench`), 0.3 and 0.7 (not exact
    in float32: the C++ kernel compares the float IoU with the double threshold)."""
    dets, scores = detection_boxes(n, dtype=dtype)
    return [
        {"dets": dets.to(device), "scores": scores.to(device), "iou_threshold": threshold}
        for threshold in (0.5, 0.3, 0.7)
    ]


# ---- torchvision: roi_align -------------------------------------------------------------


def _axis_samples(
    start: Tensor,
    bin_size: Tensor,
    grid: Tensor,
    pooled: int,
    size: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """One axis of the sampling grid of every roi: (low, high, w_low, w_high, in_range).

    start, bin_size, grid: [K]. Returns tensors [K, pooled, G] (G = the largest grid
    of any roi); samples past a roi's own grid get zero weights. The arithmetic is
    torchvision's, in the same order (no fused multiply-add on either side).
    """
    count = max(int(grid.max().item()) if grid.numel() else 1, 1)
    p = torch.arange(pooled, dtype=start.dtype, device=start.device).view(1, -1, 1)
    i = torch.arange(count, device=start.device).view(1, 1, -1)
    grid_f = grid.to(start.dtype).view(-1, 1, 1)
    bin_size = bin_size.view(-1, 1, 1)
    # roi_start + p * bin + (i + 0.5) * bin / grid
    pos = (start.view(-1, 1, 1) + p * bin_size) + ((i.to(start.dtype) + 0.5) * bin_size) / grid_f
    in_range = (pos >= -1.0) & (pos <= size)
    used = i < grid.view(-1, 1, 1)
    pos = torch.where(pos <= 0, torch.zeros_like(pos), pos)
    low = torch.where(in_range, pos, torch.zeros_like(pos)).to(torch.long)  # (int) truncation
    at_end = low >= size - 1
    low = torch.where(at_end, size - 1, low)
    high = torch.where(at_end, low, low + 1)
    pos = torch.where(at_end, low.to(pos.dtype), pos)
    frac = pos - low.to(pos.dtype)
    keep = in_range & used
    zero = torch.zeros_like(frac)
    w_low = torch.where(keep, 1.0 - frac, zero)
    w_high = torch.where(keep, frac, zero)
    return low, high, w_low, w_high, in_range


def roi_align_reference(
    input: Tensor,
    rois: Tensor,
    spatial_scale: float,
    pooled_height: int,
    pooled_width: int,
    sampling_ratio: int,
    aligned: bool,
) -> Tensor:
    """torchvision's roi_align as one vectorised bilinear gather over all rois.

    Sampling is separable: each sample's four weights are products of a y weight and an
    x weight, and a sample is empty when y or x is outside [-1, size]. Rois with an
    adaptive grid smaller than the largest are padded with zero-weight samples.
    Differentiable with respect to `input` (autograd gives the backward reference).
    """
    k = rois.shape[0]
    _, c, height, width = input.shape
    if k == 0:
        return input.new_zeros((0, c, pooled_height, pooled_width))
    dtype = input.dtype
    device = input.device
    scale = torch.tensor(spatial_scale, dtype=dtype, device=device)  # the kernel's `const T&`
    offset = 0.5 if aligned else 0.0
    batch = rois[:, 0].to(torch.long)  # (int) truncation, as the C++ kernel
    start_w = rois[:, 1] * scale - offset
    start_h = rois[:, 2] * scale - offset
    roi_w = rois[:, 3] * scale - offset - start_w
    roi_h = rois[:, 4] * scale - offset - start_h
    if not aligned:  # std::max(size, 1): malformed rois become 1 x 1
        one = torch.ones((), dtype=dtype, device=device)
        roi_w = torch.where(roi_w < one, one, roi_w)
        roi_h = torch.where(roi_h < one, one, roi_h)
    bin_h = roi_h / pooled_height
    bin_w = roi_w / pooled_width
    if sampling_ratio > 0:
        grid_h = torch.full((k,), sampling_ratio, dtype=torch.long, device=device)
        grid_w = grid_h
    else:
        grid_h = torch.ceil(roi_h / pooled_height).to(torch.long)
        grid_w = torch.ceil(roi_w / pooled_width).to(torch.long)
    count = (grid_h * grid_w).clamp(min=1).to(dtype)
    yl, yh, wyl, wyh, _ = _axis_samples(start_h, bin_h, grid_h, pooled_height, height)
    xl, xh, wxl, wxh, _ = _axis_samples(start_w, bin_w, grid_w, pooled_width, width)
    # [K, ph, gy, pw, gx] index grids; features channels-last: [N, H, W, C]
    feat = input.permute(0, 2, 3, 1)
    b = batch.view(-1, 1, 1, 1, 1)
    y_low, y_high = yl[:, :, :, None, None], yh[:, :, :, None, None]
    x_low, x_high = xl[:, None, None], xh[:, None, None]
    w_yl, w_yh = wyl[:, :, :, None, None], wyh[:, :, :, None, None]
    w_xl, w_xh = wxl[:, None, None], wxh[:, None, None]
    # w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4, with w1 = hy * hx etc. as the C++ kernel
    val = (
        (w_yl * w_xl)[..., None] * feat[b, y_low, x_low]
        + (w_yl * w_xh)[..., None] * feat[b, y_low, x_high]
        + (w_yh * w_xl)[..., None] * feat[b, y_high, x_low]
        + (w_yh * w_xh)[..., None] * feat[b, y_high, x_high]
    )
    out = val.sum(dim=(2, 4)) / count.view(-1, 1, 1, 1)  # [K, ph, pw, C]
    return out.permute(0, 3, 1, 2).contiguous()


def roi_align_backward_reference(
    grad: Tensor,
    rois: Tensor,
    spatial_scale: float,
    pooled_height: int,
    pooled_width: int,
    batch_size: int,
    channels: int,
    height: int,
    width: int,
    sampling_ratio: int,
    aligned: bool,
) -> Tensor:
    """The gradient of roi_align_reference with respect to its input: the gather's adjoint, as
    torch.func.vjp computes it, so that it is itself differentiable in `grad` (roi_align is
    linear in its input) under autograd and torch.func alike."""
    x = torch.zeros((batch_size, channels, height, width), dtype=grad.dtype, device=grad.device)
    if grad.numel() == 0 or x.numel() == 0:  # nothing to sample from: torchvision's zeros too
        return x

    def forward(x: Tensor) -> Tensor:
        return roi_align_reference(
            x, rois.detach(), spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned
        )

    _, pullback = torch.func.vjp(forward, x)
    (result,) = pullback(grad)
    return result


def valid_rois(
    k: int,
    batch_size: int,
    height: int,
    width: int,
    spatial_scale: float = 1.0,
    *,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """rois [k, 5] (batch index, x1, y1, x2, y2) in image coordinates (feature / spatial_scale).

    Valid as torchvision documents: integer batch indices in [0, batch_size),
    0 <= x1 < x2 and 0 <= y1 < y2 inside the image; sizes from a few pixels to about
    half the image, so adaptive sampling grids differ between rois.
    """
    img_w, img_h = width / spatial_scale, height / spatial_scale
    batch = torch.randint(0, batch_size, (k,)).to(torch.float64)
    size = torch.rand(k, 2) * 0.5 + 0.02
    bw, bh = size[:, 0] * img_w, size[:, 1] * img_h
    x1 = torch.rand(k) * (img_w - bw)
    y1 = torch.rand(k) * (img_h - bh)
    rois = torch.stack((batch, x1, y1, x1 + bw, y1 + bh), dim=1)
    return rois.to(dtype)


def roi_align_samples(
    device: str,
    dtype: torch.dtype,
    batch: int = 2,
    channels: int = 2,
    height: int = 8,
    width: int = 7,
    rois: int = 4,
) -> list[dict[str, Any]]:
    """Valid rois on a feature map of stride 8: sampling_ratio 2 with aligned boxes (the first:
    `opgen bench`, 7 x 7 bins at its size), adaptive sampling (0) unaligned, and 3 x 3 bins."""
    pooled = 7 if height * width > 1000 else 2
    samples = []
    for sampling_ratio, aligned, bins in ((2, True, pooled), (0, False, pooled), (1, False, 3)):
        samples.append(
            {
                "input": torch.randn(batch, channels, height, width, dtype=dtype, device=device),
                "rois": valid_rois(rois, batch, height, width, 1 / 8, dtype=dtype).to(device),
                "spatial_scale": 1 / 8,
                "pooled_height": bins,
                "pooled_width": bins,
                "sampling_ratio": sampling_ratio,
                "aligned": aligned,
            }
        )
    return samples


def roi_align_backward_samples(
    device: str, dtype: torch.dtype, **size: int
) -> list[dict[str, Any]]:
    """roi_align_samples' cases, with a gradient of each one's output shape."""
    samples = []
    for forward in roi_align_samples(device, dtype, **size):
        batch, channels, height, width = forward.pop("input").shape
        k = forward["rois"].shape[0]
        shape = (k, channels, forward["pooled_height"], forward["pooled_width"])
        samples.append(
            {
                "grad": torch.randn(shape, dtype=dtype, device=device),
                "batch_size": batch,
                "channels": channels,
                "height": height,
                "width": width,
                **forward,
            }
        )
    return samples
