"""Whether opgen's op and its baseline compute the same thing at a bench size.

Note [The bench checks what it times]
The tests run the op on the spec's samples: small shapes. The bench runs it at
sizes the samples never reach (a blocked matrix product's packed path, a
reduction split between threads), and a ratio against a baseline that computes
something else is worse than no ratio. So before a case is timed, opgen's op
and its oracle (the reference, else the native op, else the original library's
op) run once more on copies of the inputs, and everything either returns or
writes into its arguments (in-place and out= ops) is compared. A tolerance
scaled to the largest value of each result leaves room for the order of a
sum, which blocking and threads change, and none for a wrong element.
"""

from __future__ import annotations

from typing import Any

from .cases import NATIVE, OPGEN, ORIGINAL, REFERENCE, Case

__all__ = ["ORACLES", "oracle", "disagreement"]

# What opgen's results are compared with, in order of preference.
ORACLES = (REFERENCE, NATIVE, ORIGINAL)

# dtype: (rtol, share of the largest value): per element |opgen - oracle| <= rtol * |oracle|
# + share * max |oracle|, by the coarser dtype of the two. The share covers the cancellation
# in a sum (an element near zero made of large terms), a few units in the last place of the
# largest value, and stays too small to pass a wrong small element among large ones.
_TOLERANCE = {
    "float64": (1e-7, 1e-10),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (3e-2, 1e-2),
    "complex64": (1e-4, 1e-5),
    "complex128": (1e-7, 1e-10),
}


def oracle(names: set[str] | dict[str, Any]) -> str | None:
    """The implementation opgen's results are compared with, among those that ran."""
    return next((name for name in ORACLES if name in names), None)


def disagreement(case: Case, stmts: dict[str, str]) -> str | None:
    """Why opgen's results differ from the oracle's at this case (None when they agree, or when
    there is no oracle). Both run on fresh copies of the inputs."""
    base = oracle(stmts)
    if base is None or OPGEN not in stmts:
        return None
    returns_writes = base == REFERENCE and case.reference_returns_writes
    mine = _results(case, stmts[OPGEN], returns_writes=False)
    theirs = _results(case, stmts[base], returns_writes)
    if len(mine) != len(theirs):
        return f"opgen gives {len(mine)} results, {base} {len(theirs)}"
    for (label, a), (_, b) in zip(mine, theirs, strict=True):
        why = _differ(a, b)
        if why:
            return f"{label}: {why} (against {base})"
    return None


def _results(case: Case, stmt: str, returns_writes: bool) -> list[tuple[str, Any]]:
    """(label, value) of what `stmt` computes, run on copies of the arguments: the gradients
    (forward+backward), else what the schema returns and the arguments it writes afterwards.
    A tests' reference (`returns_writes`) of an op that returns nothing returns the new
    values of the arguments the op writes instead (opgen.testing.check_reference)."""
    import torch

    scope = dict(case.globals)
    copies: dict[int, Any] = {}

    def copy(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            copies[id(value)] = value.detach().clone().requires_grad_(value.requires_grad)
            return copies[id(value)]
        if isinstance(value, (list, tuple)):
            return type(value)(copy(v) for v in value)
        return value

    names = {}
    for name in case.inputs:
        names[id(scope[name])] = name
        scope[name] = copy(scope[name])
    if case.mode != "forward":  # it returns the gradients of `_wrt`, which must be the copies
        labels = [f"the gradient of '{names.get(id(t), '?')}'" for t in scope["_wrt"]]
        scope["_wrt"] = tuple(copies.get(id(t), t) for t in scope["_wrt"])
        return _flat(zip(labels, eval(stmt, scope), strict=True))
    result = eval(stmt, scope)
    many = result if isinstance(result, (tuple, list)) else [result]
    written = [f"argument '{n}' afterwards" for n in case.mutated]
    if returns_writes and not case.returns:
        if len(many) != len(written):  # named as returned: the counts then differ below
            written = [f"returned value {i}" for i in range(len(many))]
        return _flat(zip(written, many, strict=True))
    returned = [result] if case.returns == 1 else list(many)[: case.returns]
    out = _flat((f"output {i}", value) for i, value in enumerate(returned))
    if returns_writes:
        return out
    return out + _flat(zip(written, [scope[n] for n in case.mutated], strict=True))


def _flat(pairs: Any) -> list[tuple[str, Any]]:
    """(label, value) pairs with lists of tensors (`Tensor[]`) spread into one pair each."""
    out: list[tuple[str, Any]] = []
    for label, value in pairs:
        if isinstance(value, (list, tuple)):
            out += [(f"{label}[{j}]", v) for j, v in enumerate(value)]
        else:
            out.append((label, value))
    return out


def _differ(a: Any, b: Any) -> str | None:
    import torch

    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            t = a if isinstance(a, torch.Tensor) else b
            # autograd.grad(allow_unused=True) gives None where the other may give zeros
            if (a is None or b is None) and not bool(t.detach().count_nonzero()):
                return None
            return f"a tensor against {type(b if t is a else a).__name__}"
        return None if _same_value(a, b) else f"{a!r} against {b!r}"
    a, b = a.detach(), b.detach()
    if a.shape != b.shape:
        return f"shape {tuple(a.shape)} against {tuple(b.shape)}"
    if not (a.is_floating_point() or a.is_complex()) and not (
        b.is_floating_point() or b.is_complex()
    ):
        wrong = int((a != b).sum())
        return None if wrong == 0 else f"{wrong} of {a.numel()} elements differ"
    rtol, share = max(
        _TOLERANCE.get(str(t.dtype).removeprefix("torch."), (1e-4, 1e-5)) for t in (a, b)
    )
    wide = torch.complex128 if a.is_complex() or b.is_complex() else torch.float64
    x, y = a.to(wide), b.to(wide)
    scale = float(y.abs().nan_to_num(posinf=0.0, neginf=0.0).max()) if y.numel() else 0.0
    close = torch.isclose(x, y, rtol=rtol, atol=share * scale, equal_nan=True)
    if bool(close.all()):
        return None
    worst = (x - y).abs().nan_to_num(nan=float("inf")).max()
    return (
        f"{int((~close).sum())} of {a.numel()} elements differ, by up to {float(worst):.3g} "
        f"(allowed: {rtol:g} of each value + {share:g} of the largest, {scale:.3g})"
    )


def _same_value(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # values that do not compare (opaque objects): nothing to check
        return True
