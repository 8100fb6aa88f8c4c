"""How the checks compare outputs and name what failed.

Note [Test tolerances]
The spec's [test] atol/rtol loosen the comparisons in reduced precision
(float32, float16, bfloat16, complex64), never below torch's default for the
dtype; float64 (and complex128) comparisons keep torch's defaults, so a bound
that float32 needs cannot hide a float64 error. A bound given per dtype
(`rtol = {float16 = 2e-3}`, a dict here) loosens only the dtypes it names, so
float16's bound cannot hide a float32 error either. gradcheck runs in float64
with its own tolerances; a spec with `[test] gradcheck_dtype = "float32"` (a
kernel without a float64 path) gets looser ones (`_eager.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["Bound", "assert_same", "describe", "message", "outputs", "tolerances"]

# A spec's atol or rtol: one number, or one per dtype name.
Bound = float | dict[str, float] | None

_DEFAULT_TOLERANCES = {  # dtype: (atol, rtol), as torch.testing.assert_close
    torch.float16: (1e-5, 1e-3),
    torch.bfloat16: (1e-5, 1.6e-2),
    torch.float32: (1e-5, 1.3e-6),
    torch.complex64: (1e-5, 1.3e-6),
}
_EXACT_DTYPES = (torch.float64, torch.complex128)


def tolerances(dtype: Any, atol: Bound = None, rtol: Bound = None) -> dict[str, float]:
    """assert_close's atol/rtol for a comparison in `dtype` (Note [Test tolerances])."""
    name = str(dtype).removeprefix("torch.")
    atol = atol.get(name) if isinstance(atol, dict) else atol
    rtol = rtol.get(name) if isinstance(rtol, dict) else rtol
    if dtype in _EXACT_DTYPES or (atol is None and rtol is None):
        return {}
    default_atol, default_rtol = _DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
    return {
        "atol": max(atol, default_atol) if atol is not None else default_atol,
        "rtol": max(rtol, default_rtol) if rtol is not None else default_rtol,
    }


def outputs(result: Any, kwargs: dict[str, Any], mutated: tuple[str, ...] | list[str]) -> Any:
    """What an op produced: its return value, or its mutated arguments if it returns nothing."""
    if result is None and mutated:
        values = tuple(kwargs.get(name) for name in mutated)  # an omitted optional is None
        return values[0] if len(values) == 1 else values
    return result


def describe(op: Any) -> str:
    """`torch.ops.ns.op.default` for the registered op, the import path for the typed wrapper."""
    if hasattr(op, "overloadpacket"):
        return f"torch.ops.{op}"
    return f"{op.__module__}.{op.__qualname__}"


def message(op: Any, index: int) -> Callable[[str], str]:
    """assert_close's `msg`: the op and the sample (counted from 1) before torch's text."""
    return lambda text: f"{describe(op)}, sample {index + 1}: {text}"


def assert_same(got: Any, expected: Any, msg: Callable[[str], str], **limits: float) -> None:
    """Same structure (tuples, lists, None) and leaves: tensors and numbers close, strings equal."""
    if isinstance(got, (tuple, list)) and isinstance(expected, (tuple, list)):
        assert len(got) == len(expected), msg(f"{len(got)} outputs, expected {len(expected)}")
        for item, wanted in zip(got, expected, strict=True):
            assert_same(item, wanted, msg, **limits)
        return
    if got is None or expected is None or isinstance(got, str) or isinstance(expected, str):
        assert got == expected, msg(f"got {got!r}, expected {expected!r}")
        return
    torch.testing.assert_close(got, expected, equal_nan=True, msg=msg, **limits)
