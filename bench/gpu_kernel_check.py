"""Check the reference set's hand-written CUDA kernels against references on many shapes.

    python bench/gpu_kernel_check.py [--op NAME ...] [--emulate LIB]

Run from the repository root with the reference set's library built with CUDA kernels
(`cd generated_example && opgen build`). One line per case: the edge cases of each kernel's
launch logic (one row, odd widths that rule out 16-byte packs, rows at and past the length a
block keeps in registers, just over 2^16 rows, misaligned and non-contiguous inputs, strided
written arguments, empty tensors), every dtype the op supports. Outputs are poisoned with NaN
first, so an element a kernel never writes fails. Exits 1 if any case fails; skips (exit 0)
where CUDA is not available. `--emulate LIB` runs the same cases on the CPU through
bench/cuda_emu (LIB: its emu_ops.so), except those marked heavy.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "generated_example"))

DEVICE = "cuda"
OPS = None  # torch.ops.example, or torch.ops.emu under --emulate
DTYPE_NAMES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float64: "f64",
}
# torch.testing's defaults, and float16's 2e-3 from the rms_norm spec (2 ulps)
RTOL = {torch.float32: 1.3e-6, torch.float16: 1e-3, torch.bfloat16: 1.6e-2, torch.float64: 1e-7}
# rms_norm, layer_norm: rows of up to this many 16-byte packs are held in registers, longer rows
# (or rows of single elements past it) take two passes
CACHED_PACKS = 2048
ATOL = {torch.float32: 1e-5, torch.float16: 1e-5, torch.bfloat16: 1e-5, torch.float64: 1e-7}


@dataclass
class Case:
    op: str
    label: str
    run: Callable[[], Iterator[tuple[str, torch.Tensor, torch.Tensor, object, float]]]
    heavy: bool = False  # too slow for the emulator


def poison_allocator(numel: int, dtype: torch.dtype) -> None:
    """Leave NaN in the memory the next allocation of this size will likely get."""
    torch.full((max(numel, 1),), float("nan"), dtype=dtype, device=DEVICE)


def mismatch(actual: torch.Tensor, expected: torch.Tensor, atol: object, rtol: float) -> str:
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"shape/dtype {tuple(actual.shape)} {actual.dtype} vs {tuple(expected.shape)} {expected.dtype}"
    a, e = actual.double(), expected.double()
    if a.numel() == 0:
        return ""
    bad = ~((a - e).abs() <= atol + rtol * e.abs())
    bad &= ~(a.isnan() & e.isnan())
    if not bad.any():
        return ""
    idx = bad.nonzero()[0].tolist()
    return (
        f"{int(bad.sum())} of {a.numel()} elements differ, first at {idx}: "
        f"{a[tuple(idx)].item()!r} vs {e[tuple(idx)].item()!r}"
    )


def randn(*shape: int, dtype: torch.dtype = torch.float32, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, dtype=torch.float32, device=DEVICE) * scale).to(dtype)


def misaligned(t: torch.Tensor) -> torch.Tensor:
    """The same values one element past a 16-byte boundary: no 16-byte packs."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=DEVICE)
    view = buf[1:].view(t.shape)
    view.copy_(t)
    return view


def noncontiguous(t: torch.Tensor) -> torch.Tensor:
    """The same values in a tensor whose last dim is strided."""
    buf = torch.empty(*t.shape, 2, dtype=t.dtype, device=DEVICE)
    view = buf[..., 0]
    view.copy_(t)
    return view


LAYOUTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "contiguous": lambda t: t,
    "misaligned": misaligned,
    "noncontiguous": noncontiguous,
}
SAMPLE_SHAPE = (4, 1000)  # the row shape every input layout is tried on


def layouts(shape: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(LAYOUTS) if shape == SAMPLE_SHAPE else ("contiguous",)


# ---- rms_norm, fused_add_rms_norm ------------------------------------------------------------


def rms_reference(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rms_tol(dtype: torch.dtype) -> tuple[float, float]:
    return ATOL[dtype], 2e-3 if dtype == torch.float16 else RTOL[dtype]


def rms_norm_cases() -> Iterator[Case]:
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        pack = 16 // torch.empty((), dtype=dtype).element_size()
        cached = CACHED_PACKS * pack  # the longest row kept in registers
        shapes = [
            (1, 4096), (3, 37), (5, 8), (5, 1), (4, 1000), (2, 4096 + pack), (3, 2047),
            (3, 2049), (2, 1, 64), (2, cached), (2, cached + pack), (2, 2 * cached + 1),
            (300, 4096), (0, 16),
        ]  # fmt: skip
        for shape in shapes:
            extra = ("strided result", "in place") if shape == SAMPLE_SHAPE else ()
            for layout in layouts(shape) + extra:
                yield _rms_case(dtype, shape, layout, heavy=math.prod(shape) > 300_000)
        yield _rms_case(dtype, (65537, 16), "contiguous", heavy=True)
        yield _rms_case(dtype, (70000, 8 * pack), "contiguous", heavy=True)


def _rms_case(dtype: torch.dtype, shape: tuple[int, ...], layout: str, heavy: bool) -> Case:
    def run() -> Iterator:
        x = randn(*shape, dtype=dtype, scale=3.0)
        w = randn(shape[-1], dtype=dtype)
        eps = 1e-6
        expected = rms_reference(x, w, eps)
        if layout == "in place":
            result = x.clone()
            OPS.rms_norm(result, result, w, eps)
        else:
            xin = LAYOUTS.get(layout, LAYOUTS["contiguous"])(x)
            if layout == "strided result":
                result = noncontiguous(torch.full_like(x, float("nan")))
            elif layout == "misaligned":
                result = misaligned(torch.full_like(x, float("nan")))
            else:
                result = torch.full_like(x, float("nan"))
            OPS.rms_norm(result, xin, w, eps)
        yield "result", result, expected, *rms_tol(dtype)

    return Case("rms_norm", f"{DTYPE_NAMES[dtype]} {shape} {layout}", run, heavy)


def fused_add_rms_norm_cases() -> Iterator[Case]:
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        pack = 16 // torch.empty((), dtype=dtype).element_size()
        cached = CACHED_PACKS * pack
        shapes = [
            (1, 4096), (3, 37), (4, 1000), (2, 4096 + pack), (3, 2049), (2, cached),
            (2, cached + pack), (300, 4096), (0, 16),
        ]  # fmt: skip
        for shape in shapes:
            for layout in layouts(shape):
                yield _fused_case(dtype, shape, layout, heavy=math.prod(shape) > 300_000)
        yield _fused_case(dtype, (65537, 16), "contiguous", heavy=True)


def _fused_case(dtype: torch.dtype, shape: tuple[int, ...], layout: str, heavy: bool) -> Case:
    def run() -> Iterator:
        x = randn(*shape, dtype=dtype, scale=2.0)
        r = randn(*shape, dtype=dtype, scale=2.0)
        w = randn(shape[-1], dtype=dtype)
        eps = 1e-5
        new_residual = x + r
        expected = rms_reference(new_residual, w, eps)
        xin, rin = LAYOUTS[layout](x.clone()), LAYOUTS[layout](r.clone())
        OPS.fused_add_rms_norm(xin, rin, w, eps)
        yield "input", xin, expected, *rms_tol(dtype)
        yield "residual", rin, new_residual, 0.0, 0.0

    return Case("fused_add_rms_norm", f"{DTYPE_NAMES[dtype]} {shape} {layout}", run, heavy)


# ---- layer_norm, layer_norm_backward ---------------------------------------------------------


def layer_norm_shapes(dtype: torch.dtype) -> list[tuple[tuple[int, ...], bool]]:
    pack = 16 // torch.empty((), dtype=dtype).element_size()
    cached = CACHED_PACKS * pack
    return [
        ((1, 4096), False), ((3, 5, 7), False), ((8, 64), False), ((5, 1), False),
        ((4, 1000), False), ((3, 2047), False), ((3, 2049), False), ((2, 4096 + pack), False), ((2, cached), False),
        ((2, cached + pack), False), ((2, 3 * 4096 + 1), False), ((300, 1024), False),
        ((0, 4), False), ((65537, 16), True), ((4096, 4096), True),
    ]  # fmt: skip


def layer_norm_cases() -> Iterator[Case]:
    for dtype in (torch.float32, torch.float64):
        for shape, heavy in layer_norm_shapes(dtype):
            for layout in layouts(shape):
                yield _ln_case(dtype, shape, layout, heavy)


def _ln_case(dtype: torch.dtype, shape: tuple[int, ...], layout: str, heavy: bool) -> Case:
    def run() -> Iterator:
        n = shape[-1]
        x = randn(*shape, dtype=dtype, scale=2.0) + 0.5
        w, b = randn(n, dtype=dtype), randn(n, dtype=dtype)
        expected = torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)
        poison_allocator(x.numel(), dtype)
        yield "y", OPS.layer_norm(LAYOUTS[layout](x), w, b, 1e-5), expected, 1e-5, 1e-4

    return Case("layer_norm", f"{DTYPE_NAMES[dtype]} {shape} {layout}", run, heavy)


def layer_norm_backward_cases() -> Iterator[Case]:
    for dtype in (torch.float32, torch.float64):
        for shape, heavy in layer_norm_shapes(dtype):
            for layout in layouts(shape):
                yield _ln_bwd_case(dtype, shape, layout, heavy)


def _ln_bwd_case(dtype: torch.dtype, shape: tuple[int, ...], layout: str, heavy: bool) -> Case:
    def run() -> Iterator:
        n = shape[-1]
        x = randn(*shape, dtype=dtype, scale=2.0) + 0.5
        g = randn(*shape, dtype=dtype)
        w = randn(n, dtype=dtype)
        eps = 1e-5
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, (n,), w, None, eps)
        dx, dw, db = torch.ops.aten.native_layer_norm_backward(
            g, x, (n,), mean, rstd, w, w, [True, True, True]
        )
        poison_allocator(x.numel(), dtype)
        got = OPS.layer_norm_backward(LAYOUTS[layout](g), LAYOUTS[layout](x), w, eps)
        # dweight and dbias sum over every row: their rounding error grows with the row count
        rows = max(1, x.numel() // max(n, 1))
        sum_tol = 1e-4 * max(1.0, math.sqrt(rows) / 8)
        yield "dx", got[0], dx, 1e-4, 1e-4
        yield "dweight", got[1], dw, sum_tol, 1e-4
        yield "dbias", got[2], db, sum_tol, 1e-4

    return Case("layer_norm_backward", f"{DTYPE_NAMES[dtype]} {shape} {layout}", run, heavy)


# ---- matmul ----------------------------------------------------------------------------------


def matmul_cases() -> Iterator[Case]:
    shapes = [
        (1, 1, 1), (5, 7, 3), (16, 32, 8), (64, 64, 64), (127, 129, 131), (300, 4, 300),
        (4, 300, 5), (257, 300, 259), (1025, 77, 513), (0, 3, 4), (3, 0, 4), (3, 4, 0),
    ]  # fmt: skip
    for dtype in (torch.float32, torch.float64):
        for m, k, n in shapes:
            for layout in tuple(LAYOUTS) if (m, k, n) == (127, 129, 131) else ("contiguous",):
                yield _mm_case(dtype, m, k, n, layout, heavy=m * n * k > 50_000_000)
            if (m, k, n) == (257, 300, 259):
                yield _mm_case(dtype, 256, 300, 256, "misaligned", heavy=False)
        yield _mm_case(dtype, 2048, 2048, 2048, "contiguous", heavy=True)
        yield _mm_case(dtype, 1536, 1000, 1408, "contiguous", heavy=True)
        yield _mm_case(dtype, 70000, 8, 3, "contiguous", heavy=True)
        yield _mm_case(dtype, 3, 8, 70000, "contiguous", heavy=True)
        # more column tiles than grid y holds (65535): the blocks loop over the rest
        yield _mm_case(dtype, 2, 3, 65535 * 128 + 5, "contiguous", heavy=True)


def _mm_case(dtype: torch.dtype, m: int, k: int, n: int, layout: str, heavy: bool) -> Case:
    def run() -> Iterator:
        a, b = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)
        expected = (a.double() @ b.double()).to(dtype)
        # a K-term FMA chain is within K * u * sum|a_k b_k| of the exact sum (u: unit roundoff);
        # TF32 inputs or a half-precision accumulator would be far outside
        u = 2.0**-24 if dtype == torch.float32 else 2.0**-53
        bound = (a.double().abs() @ b.double().abs()) * (2 * max(k, 1) * u) + 1e-30
        poison_allocator(m * n, dtype)
        yield "c", OPS.matmul(LAYOUTS[layout](a), LAYOUTS[layout](b)), expected, bound, 0.0

    return Case("matmul", f"{DTYPE_NAMES[dtype]} {m}x{k} @ {k}x{n} {layout}", run, heavy)


# ---- rotary_embedding ------------------------------------------------------------------------


def rotary_cases() -> Iterator[Case]:
    configs = [
        # tokens, heads, key heads (0: no key), head_size, rot_dim, neox, layout
        (7, 4, 4, 64, 64, True, "flat"),
        (7, 4, 1, 64, 64, False, "flat"),
        (5, 3, 2, 128, 64, True, "flat"),
        (5, 3, 2, 128, 64, False, "heads"),
        (6, 2, 0, 12, 6, True, "flat"),
        (6, 2, 2, 12, 6, False, "flat"),
        (4, 2, 2, 12, 12, True, "strided heads"),
        (4, 2, 2, 64, 64, True, "misaligned"),
        (4, 2, 2, 64, 64, False, "misaligned"),
        (3, 2, 2, 16, 16, True, "batch"),
        (5, 2, 2, 32, 32, True, "bad position"),
        (1, 1, 1, 8, 8, True, "flat"),
        (0, 2, 2, 16, 16, True, "flat"),
        (4097, 8, 2, 128, 128, True, "flat"),
        (4097, 8, 2, 128, 128, False, "flat"),
    ]
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for cache_dtype in {dtype, torch.float32}:
            for cfg in configs:
                yield _rotary_case(dtype, cache_dtype, *cfg)


def _rotary_case(
    dtype: torch.dtype, cache_dtype: torch.dtype, tokens: int, heads: int, kheads: int,
    head_size: int, rot: int, neox: bool, layout: str,
) -> Case:  # fmt: skip
    from example_ops import testing_helpers as helpers

    def run() -> Iterator:
        max_pos = 64
        positions = torch.randint(0, max_pos, (tokens,), device=DEVICE)
        cache = helpers.rotary_cos_sin_cache(max_pos, rot, dtype=cache_dtype).to(DEVICE)
        q = randn(tokens, heads * head_size, dtype=dtype, scale=2.0)
        k = randn(tokens, kheads * head_size, dtype=dtype, scale=2.0) if kheads else None
        valid = torch.ones(tokens, dtype=torch.bool, device=DEVICE)
        if layout == "bad position" and tokens:
            positions[1] = max_pos  # outside the cache: the token is left unchanged
            valid[1] = False
        eq, ek = q.clone(), None if k is None else k.clone()
        if valid.any():
            rq, rk = helpers.rotary_embedding_reference(
                positions[valid], q[valid], None if k is None else k[valid], head_size, cache, neox
            )
            eq[valid] = rq
            if k is not None:
                ek[valid] = rk
        pos = positions
        if layout == "heads":
            qin = q.clone().view(tokens, heads, head_size)
            kin = None if k is None else k.clone().view(tokens, kheads, head_size)
        elif layout == "strided heads":  # every other head of a bigger tensor
            qbuf = torch.zeros(tokens, 2 * heads, head_size, dtype=dtype, device=DEVICE)
            qin = qbuf[:, ::2]
            qin.copy_(q.view(tokens, heads, head_size))
            kin = None if k is None else k.clone().view(tokens, kheads, head_size)
        elif layout == "misaligned":
            qin, kin = misaligned(q), None if k is None else misaligned(k)
        elif layout == "batch":
            pos = positions.view(1, tokens)
            qin = q.clone().view(1, tokens, heads * head_size)
            kin = None if k is None else k.clone().view(1, tokens, kheads * head_size)
        else:
            qin, kin = q.clone(), None if k is None else k.clone()
        OPS.rotary_embedding(pos, qin, kin, head_size, cache, neox)
        yield "query", qin.reshape(q.shape), eq, ATOL[dtype], RTOL[dtype]
        if k is not None:
            yield "key", kin.reshape(k.shape), ek, ATOL[dtype], RTOL[dtype]

    label = (
        f"{DTYPE_NAMES[dtype]} cache {DTYPE_NAMES[cache_dtype]} {tokens} tok {heads}/{kheads} heads"
        f" {head_size} rot {rot} {'neox' if neox else 'gptj'} {layout}"
    )
    return Case("rotary_embedding", label, run, heavy=tokens > 1000)


CASES = {
    "rms_norm": rms_norm_cases,
    "fused_add_rms_norm": fused_add_rms_norm_cases,
    "layer_norm": layer_norm_cases,
    "layer_norm_backward": layer_norm_backward_cases,
    "matmul": matmul_cases,
    "rotary_embedding": rotary_cases,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", action="append", choices=sorted(CASES), help="only these ops")
    parser.add_argument("--emulate", type=Path, help="bench/cuda_emu's emu_ops.so: run on the CPU")
    args = parser.parse_args()
    global DEVICE, OPS
    if args.emulate:
        DEVICE = "cpu"
        torch.ops.load_library(str(args.emulate))
        OPS = torch.ops.emu
    elif not torch.cuda.is_available():
        print("skipped: CUDA is not available")
        return 0
    else:
        import example_ops  # noqa: F401  (loads the library)

        OPS = torch.ops.example
        torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    failed = total = 0
    started = time.perf_counter()
    for op in args.op or sorted(CASES):
        for case in CASES[op]():
            if case.heavy and args.emulate:
                continue
            total += 1
            problems = []
            try:
                for name, actual, expected, atol, rtol in case.run():
                    if DEVICE == "cuda":
                        torch.cuda.synchronize()
                    problem = mismatch(actual, expected, atol, rtol)
                    if problem:
                        problems.append(f"{name}: {problem}")
            except Exception as exc:  # a kernel error is a failed case, not the end of the run
                problems.append(
                    f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                )
            failed += bool(problems)
            status = "FAIL" if problems else "ok"
            print(
                f"{status:4} {case.op} {case.label}"
                + (f"  {'; '.join(problems)}" if problems else ""),
                flush=True,
            )
    print(f"{total - failed} of {total} cases passed in {time.perf_counter() - started:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
