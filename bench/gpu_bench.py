"""Time the reference set's CUDA kernels against what a user would pick instead, on one GPU.

    python bench/gpu_bench.py [--json FILE] [--quick] [--no-compile] [--device cpu]

Run from the repository root with the reference set's library built
(`generated_example/example_ops/_C.abi3.so`, CUDA kernels included). Each row
times opgen's op, PyTorch's native op where one exists, `torch.compile` of the
reference expression (compiled before timing) and the original library's op
(torchvision) where it is importable, on the same inputs, taking turns. Times
come from CUDA events over many back-to-back calls (median of repeats); a
memory-bound op's GB/s counts the bytes its inputs and outputs occupy once, and
the device-to-device copy line gives the bandwidth this GPU reaches.
`--device cpu --quick` runs the same cases at small sizes without a GPU (a dry run).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "generated_example"))

from example_ops import testing_helpers as helpers  # noqa: E402

OPS = torch.ops.example
DEVICE = "cuda"
QUICK = False  # --quick: small sizes (a smoke test, or a dry run on the CPU)


@dataclass
class Case:
    name: str  # "vector_add f32 n=2^26"
    impls: dict[str, Callable[[], Any]]  # "opgen", "native", "compiled", "original"
    bytes: int = 0  # memory-bound: bytes of inputs and outputs
    flops: int = 0  # compute-bound: floating-point operations
    times: dict[str, float] = field(default_factory=dict)  # seconds per call
    notes: list[str] = field(default_factory=list)


class _Clock:
    """Seconds between `start` and `stop`: CUDA events on a GPU (no host sync inside a repeat)."""

    def __init__(self) -> None:
        self.cuda = DEVICE == "cuda"
        if self.cuda:
            self.events = (
                torch.cuda.Event(enable_timing=True),
                torch.cuda.Event(enable_timing=True),
            )

    def start(self) -> None:
        if self.cuda:
            self.events[0].record()
        else:
            self.t0 = time.perf_counter()

    def stop(self) -> float:
        if not self.cuda:
            return time.perf_counter() - self.t0
        self.events[1].record()
        self.events[1].synchronize()
        return self.events[0].elapsed_time(self.events[1]) / 1e3


def time_calls(fn: Callable[[], Any], budget: float) -> float:
    """Seconds per call: the median of repeats, each timing back-to-back calls."""
    clock = _Clock()
    fn()
    clock.start()
    fn()
    once = max(clock.stop(), 1e-6)
    calls = max(1, min(1000, int(0.02 / once)))  # about 20 ms a repeat
    repeats = max(3, min(25, int(budget / (calls * once))))
    samples = []
    for _ in range(repeats):
        clock.start()
        for _ in range(calls):
            fn()
        samples.append(clock.stop() / calls)
    return statistics.median(samples)


def run_case(case: Case, budget: float, rounds: int) -> None:
    working: dict[str, Callable[[], Any]] = {}
    for name, fn in case.impls.items():
        try:
            fn()  # also compiles a torch.compile'd baseline before any timing
            if DEVICE == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:  # a baseline that fails is reported, not fatal
            case.notes.append(f"{name} failed: {type(exc).__name__}: {str(exc).splitlines()[0]}")
        else:
            working[name] = fn
    best: dict[str, float] = {}
    for _ in range(rounds):  # take turns: every implementation sees the same disturbances
        for name, fn in working.items():
            t = time_calls(fn, budget / rounds)
            best[name] = min(best.get(name, math.inf), t)
    case.times = best


def compiled(fn: Callable[..., Any], enabled: bool) -> Callable[..., Any] | None:
    return torch.compile(fn, dynamic=False) if enabled else None


def elementwise_cases(n: int, comp: bool) -> list[Case]:
    a, b = (torch.randn(n, device=DEVICE) for _ in range(2))
    out = torch.empty_like(a)
    grad = torch.randn_like(a)
    label = f"f32 n=2^{int(math.log2(n))}"
    cases = [
        Case(
            f"vector_add {label}",
            {"opgen": lambda: OPS.vector_add(a, b), "native": lambda: torch.add(a, b)},
            3 * 4 * n,
        ),
        Case(
            f"mymul {label}",
            {"opgen": lambda: OPS.mymul(a, b), "native": lambda: torch.mul(a, b)},
            3 * 4 * n,
        ),
        Case(
            f"muladd {label}",
            {
                "opgen": lambda: OPS.muladd(a, b, 2.0),
                "native": lambda: torch.add(torch.mul(a, b), 2.0),
            },
            3 * 4 * n,
        ),
        Case(
            f"add_out {label}",
            {
                "opgen": lambda: OPS.add_out(a, b, out),
                "native": lambda: torch.add(a, b, out=out),
            },
            3 * 4 * n,
        ),
        Case(
            f"gelu {label}",
            {
                "opgen": lambda: OPS.gelu(a),
                "native": lambda: F.gelu(a, approximate="tanh"),
            },
            2 * 4 * n,
        ),
        Case(
            f"gelu_backward {label}",
            {
                "opgen": lambda: OPS.gelu_backward(grad, a),
                "native": lambda: torch.ops.aten.gelu_backward(grad, a, approximate="tanh"),
            },
            3 * 4 * n,
        ),
    ]
    references = {
        "vector_add": lambda: a + b,
        "mymul": lambda: a * b,
        "muladd": lambda: a * b + 2.0,
        "gelu": lambda: F.gelu(a, approximate="tanh"),
    }
    for case in cases:
        reference = references.get(case.name.split()[0])
        fn = compiled(reference, comp) if reference else None
        if fn is not None:
            case.impls["compiled"] = fn
    return cases


def norm_cases(comp: bool) -> list[Case]:
    cases = []
    tokens = 64 if QUICK else 4096
    for dtype, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        rows, d = (64, 256) if QUICK else (16384, 4096)
        x = torch.randn(rows, d, device=DEVICE, dtype=dtype)
        w = torch.randn(d, device=DEVICE, dtype=dtype)
        result = torch.empty_like(x)
        size = x.element_size()

        def rms_plain(x=x, w=w):
            normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
            return normed.to(x.dtype) * w

        case = Case(
            f"rms_norm {tag} {rows}x{d}",
            {
                "opgen": lambda x=x, w=w, result=result: OPS.rms_norm(result, x, w, 1e-6),
                "native": lambda x=x, w=w, d=d: F.rms_norm(x, (d,), w, 1e-6),
            },
            2 * rows * d * size,
        )
        if comp:
            case.impls["compiled"] = torch.compile(rms_plain, dynamic=False)
        cases.append(case)

        inp, res = x.clone(), torch.randn_like(x)

        def fused_plain(inp=inp, res=res, w=w):
            r = res + inp
            normed = r.float() * torch.rsqrt(r.float().pow(2).mean(-1, keepdim=True) + 1e-6)
            return normed.to(r.dtype) * w, r

        case = Case(
            f"fused_add_rms_norm {tag} {rows}x{d}",
            {
                "opgen": lambda inp=inp, res=res, w=w: OPS.fused_add_rms_norm(inp, res, w, 1e-6),
            },
            4 * rows * d * size,
        )
        if comp:
            case.impls["compiled"] = torch.compile(fused_plain, dynamic=False)
            case.notes.append("compiled: out of place (the op writes input and residual in place)")
        cases.append(case)

        sample = helpers.rotary_samples(DEVICE, dtype, tokens=tokens, heads=32, head_size=128)[0]
        q, k = sample["query"], sample["key"]
        positions, cache = sample["positions"], sample["cos_sin_cache"]

        def rotary_plain(positions=positions, q=q, k=k, cache=cache):
            return helpers.rotary_embedding_reference(positions, q, k, 128, cache, True)

        case = Case(
            f"rotary_embedding {tag} {tokens} tokens x 32 heads x 128",
            {
                "opgen": lambda positions=positions, q=q, k=k, cache=cache: (
                    OPS.rotary_embedding(positions, q, k, 128, cache, True)
                ),
            },
            2 * 2 * q.numel() * size,
        )
        if comp:
            case.impls["compiled"] = torch.compile(rotary_plain, dynamic=False)
            case.notes.append("compiled: vLLM's forward_native, out of place")
        cases.append(case)
    return cases


def layer_norm_cases(comp: bool) -> list[Case]:
    rows, d = (64, 256) if QUICK else (16384, 4096)
    x = torch.randn(rows, d, device=DEVICE, requires_grad=True)
    w = torch.randn(d, device=DEVICE, requires_grad=True)
    b = torch.randn(d, device=DEVICE, requires_grad=True)
    g = torch.randn(rows, d, device=DEVICE)
    xd, wd, bd = x.detach(), w.detach(), b.detach()

    def fwd_bwd(f):
        return lambda: torch.autograd.grad(f(x, w, b), (x, w, b), g)

    def native(x, w, b):
        return F.layer_norm(x, (d,), w, b, 1e-5)

    forward = Case(
        f"layer_norm f32 {rows}x{d}",
        {"opgen": lambda: OPS.layer_norm(xd, wd, bd, 1e-5), "native": lambda: native(xd, wd, bd)},
        2 * rows * d * 4,
    )
    both = Case(
        f"layer_norm fwd+bwd f32 {rows}x{d}",
        {
            "opgen": fwd_bwd(lambda x, w, b: OPS.layer_norm(x, w, b, 1e-5)),
            "native": fwd_bwd(native),
        },
        5 * rows * d * 4,
    )
    if comp:
        forward.impls["compiled"] = torch.compile(lambda: native(xd, wd, bd), dynamic=False)
    return [forward, both]


def matmul_cases() -> list[Case]:
    cases = []
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for n in (128,) if QUICK else (1024, 4096):
        a, b = torch.randn(n, n, device=DEVICE), torch.randn(n, n, device=DEVICE)
        cases.append(
            Case(
                f"matmul f32 {n}x{n} (TF32 off)",
                {"opgen": lambda a=a, b=b: OPS.matmul(a, b), "native": lambda a=a, b=b: a @ b},
                flops=2 * n**3,
            )
        )
    return cases


def torchvision_cases() -> list[Case]:
    try:
        import torchvision
    except ImportError as exc:
        case = Case("nms, roi_align", {})
        case.notes.append(f"torchvision not importable ({exc}): no original baseline")
        return [case]
    torch.manual_seed(0)
    cases = []
    for n in (200,) if QUICK else (2000, 20000):
        dets, scores = helpers.detection_boxes(n)
        dets, scores = dets.to(DEVICE), scores.to(DEVICE)
        cases.append(
            Case(
                f"nms f32 {n} boxes, iou 0.5",
                {
                    "opgen": lambda dets=dets, scores=scores: OPS.nms(dets, scores, 0.5),
                    "original": lambda dets=dets, scores=scores: torchvision.ops.nms(
                        dets, scores, 0.5
                    ),
                },
            )
        )
    channels, k = (8, 16) if QUICK else (256, 256)
    sample = helpers.roi_align_samples(
        DEVICE, torch.float32, batch=2, channels=channels, height=100, width=136, rois=k
    )[0]
    feats, rois = sample["input"], sample["rois"]
    args = (1 / 8, 7, 7, 2, True)
    label = f"[2,{channels},100,136], {k} rois, 7x7"
    cases.append(
        Case(
            f"roi_align f32 {label}",
            {
                "opgen": lambda: OPS.roi_align(feats, rois, *args),
                "original": lambda: torchvision.ops.roi_align(feats, rois, (7, 7), 1 / 8, 2, True),
            },
        )
    )
    feats_g = feats.clone().requires_grad_()
    grad = torch.randn(k, channels, 7, 7, device=DEVICE)
    cases.append(
        Case(
            f"roi_align fwd+bwd f32 {label}",
            {
                "opgen": lambda: torch.autograd.grad(
                    OPS.roi_align(feats_g, rois, *args), feats_g, grad
                ),
                "original": lambda: torch.autograd.grad(
                    torchvision.ops.roi_align(feats_g, rois, (7, 7), 1 / 8, 2, True),
                    feats_g,
                    grad,
                ),
            },
        )
    )
    return cases


def copy_bandwidth() -> float:
    """Bytes per second of a device-to-device copy (read + write), this GPU's practical ceiling."""
    src = torch.empty(2**20 if QUICK else 2**28, device=DEVICE)
    dst = torch.empty_like(src)
    t = time_calls(lambda: dst.copy_(src), 0.3)
    return 2 * src.numel() * 4 / t


def table(cases: list[Case], peak: float) -> str:
    lines = [
        "| case | opgen | native | compiled | original | best baseline | opgen vs best |"
        " opgen GB/s or TFLOP/s | % of best baseline's | % of copy bandwidth |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in cases:
        if "opgen" not in case.times:
            lines.append(f"| {case.name} | – | | | | | | | | {'; '.join(case.notes)} |")
            continue
        cells = [
            f"{case.times[k] * 1e3:.3f} ms" if k in case.times else "–"
            for k in ("opgen", "native", "compiled", "original")
        ]
        baselines = {k: v for k, v in case.times.items() if k not in ("opgen", "reference")}
        best = min(baselines, key=baselines.__getitem__) if baselines else None
        ratio = f"{baselines[best] / case.times['opgen']:.2f}×" if best else "–"
        t = case.times["opgen"]
        if case.flops:
            rate = f"{case.flops / t / 1e12:.1f} TFLOP/s"
        elif case.bytes:
            rate = f"{case.bytes / t / 1e9:.0f} GB/s"
        else:
            rate = "–"
        of_best = (
            f"{baselines[best] / t * 100:.0f} %" if best and (case.bytes or case.flops) else "–"
        )
        of_peak = f"{case.bytes / t / peak * 100:.0f} %" if case.bytes else "–"
        lines.append(
            f"| {case.name} | {' | '.join(cells)} | {best or '–'} | {ratio} | {rate} | {of_best}"
            f" | {of_peak} |"
        )
    notes = [f"- {case.name}: {note}" for case in cases for note in case.notes]
    return "\n".join(lines + ([""] + notes if notes else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write every time here")
    parser.add_argument("--quick", action="store_true", help="small sizes, short timings")
    parser.add_argument("--no-compile", action="store_true", help="no torch.compile baseline")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    global DEVICE, QUICK
    DEVICE, QUICK = args.device, args.quick
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("skipped: CUDA is not available (a dry run: --device cpu --quick)")
        return
    comp = not args.no_compile
    budget = 0.05 if args.quick else 0.3
    torch.manual_seed(0)
    peak = copy_bandwidth()
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU"
    print(
        f"{name}, torch {torch.__version__}, CUDA {torch.version.cuda}; "
        f"copy {peak / 1e9:.0f} GB/s (read + write)\n"
    )
    groups = [
        lambda: elementwise_cases(2**20 if args.quick else 2**26, comp),
        lambda: norm_cases(comp),
        lambda: layer_norm_cases(comp),
        matmul_cases,
        torchvision_cases,
    ]
    done: list[Case] = []
    for group in groups:
        cases = group()
        for case in cases:
            if case.impls:
                run_case(case, budget, rounds=1 if args.quick else 3)
            print(table([case], peak).splitlines()[-1] if case.times else case.name, flush=True)
        done.extend(cases)
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    print("\n" + table(done, peak))
    if args.json:
        payload = {
            "device": name,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "copy_bytes_per_s": peak,
            "cases": [
                {
                    "name": c.name,
                    "times": c.times,
                    "bytes": c.bytes,
                    "flops": c.flops,
                    "notes": c.notes,
                }
                for c in done
            ],
        }
        args.json.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
