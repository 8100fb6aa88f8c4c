"""Per-call cost of opgen's generated ops against the same ops written by hand, in one process.

    python bench/call_overhead.py [--rounds 7] [--calls 20000]

Run from the repository root with the reference set's library built (`cd generated_example &&
opgen build`). Each pair calls the same kernel on 1-element float32 tensors:

- C++ (stable ABI): `example::muladd`, compiled once; the hand-written side is what
  pytorch/extension-cpp writes for it, a typed function calling `torch.ops....default`. The
  registrations are the canonical ones on both sides (register_fake, register_autograd,
  register_vmap), so the raw handle is the same call: its row shows that it stays so.
- Python (custom_op): `example::mul` against `handwritten::mul`, defined below as a careful
  engineer writes it: custom_op, register_fake, register_autograd (same formulas),
  register_vmap, register_autocast: the same registrations as the generated op, and the
  same argument checks in the kernel (None, one device).

Rows take turns over several rounds and keep each one's best (the least disturbed on a
shared machine); the ratio is opgen's time over the hand-written one's.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "generated_example"))

import example_ops  # noqa: E402  (loads the library and registers the ops)
from example_ops import _batching  # noqa: E402

# ---- the hand-written Python op: the canonical torch.library code ----------------------------


@torch.library.custom_op("handwritten::mul", mutates_args=(), device_types="cpu")
def handwritten_mul(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    # the generated kernel's argument checks: a raw torch.ops call can pass None
    if w is None or x is None:
        raise ValueError("handwritten::mul: an argument is None; pass a tensor")
    if x.device != w.device:
        raise ValueError("handwritten::mul: pass both tensors on one device")
    return w * x


@handwritten_mul.register_fake
def _(w, x):
    return w.new_empty(torch.broadcast_shapes(w.shape, x.shape))


def _setup_context(ctx, inputs, output):
    w, x = inputs
    ctx.save_for_backward(
        w if ctx.needs_input_grad[1] else None, x if ctx.needs_input_grad[0] else None
    )


def _backward(ctx, grad):
    w, x = ctx.saved_tensors
    grad_w = grad_x = None
    if ctx.needs_input_grad[0]:
        grad_w = (grad * x).sum_to_size(w.shape)
    if ctx.needs_input_grad[1]:
        grad_x = (grad * w).sum_to_size(x.shape)
    return grad_w, grad_x


handwritten_mul.register_autograd(_backward, setup_context=_setup_context)


@torch.library.register_vmap("handwritten::mul")
def _(info, in_dims, w, x):
    return _batching.elementwise(torch.ops.handwritten.mul.default, info, in_dims, w, x)


torch.library.register_autocast("handwritten::mul", "cpu", torch.bfloat16)


def mul(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The hand-written typed wrapper."""
    return torch.ops.handwritten.mul.default(w, x)


def muladd(a: torch.Tensor, b: torch.Tensor, c: float) -> torch.Tensor:
    """extension-cpp's typed wrapper of the compiled op."""
    return torch.ops.example.muladd.default(a, b, c)


# ---- timing ------------------------------------------------------------------------------------


def best_time(fn: Callable[[], Any], calls: int, rounds: int) -> float:
    return min(timeit.repeat(fn, number=calls, repeat=rounds)) / calls


def rows(grad: bool) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    a, b = torch.randn(1, requires_grad=grad), torch.randn(1)
    w, x = torch.randn(1, requires_grad=grad), torch.randn(1)
    return [
        (
            "C++ stable, typed wrapper",
            lambda: example_ops.muladd(a, b, 2.0),
            lambda: muladd(a, b, 2.0),
        ),
        (
            "C++ stable, torch.ops handle",
            lambda: torch.ops.example.muladd.default(a, b, 2.0),
            lambda: torch.ops.example.muladd.default(a, b, 2.0),
        ),
        ("Python custom_op, typed wrapper", lambda: example_ops.mul(w, x), lambda: mul(w, x)),
        (
            "Python custom_op, torch.ops handle",
            lambda: torch.ops.example.mul.default(w, x),
            lambda: torch.ops.handwritten.mul.default(w, x),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}; 1-element float32; best of {args.rounds} rounds")
    print("| call | requires grad | opgen (µs) | by hand (µs) | opgen / by hand |")
    print("|---|---|---|---|---|")
    for grad in (False, True):
        for name, ours, theirs in rows(grad):
            best = {"opgen": float("inf"), "hand": float("inf")}
            for _ in range(args.rounds):  # take turns
                best["opgen"] = min(best["opgen"], best_time(ours, args.calls, 1))
                best["hand"] = min(best["hand"], best_time(theirs, args.calls, 1))
            ratio = best["opgen"] / best["hand"]
            print(
                f"| {name} | {'yes' if grad else 'no'} | {best['opgen'] * 1e6:.2f} | "
                f"{best['hand'] * 1e6:.2f} | {ratio:.2f} |"
            )


if __name__ == "__main__":
    main()
