"""Seeded bad calls of a built project's ops, one outcome each (run in a child process).

Case `i` of seed `s` is the same call on every run: op number `i % len(ops)`,
one of its spec's samples, and one mutation of it drawn from `Random((s, i))`:
a wrong dtype, a tensor on meta (or every tensor on meta), a wrong shape, a
strided or an expanded view, an integer argument at an int boundary, None for
a tensor, or written and read arguments that alias. Each case ends in one
outcome: "result" (equal to the spec's reference on the same arguments),
"error" (an exception that names the op), or one of the failures "opaque"
(an exception that does not name the op) and "wrong" (a result that differs
from the reference, or a result where the reference raises). Crashes and hangs
are the parent's to see: the child prints one JSON line per finished case, and
`faulthandler` ends it after `CASE_TIMEOUT_S` in one case.

Usage: python _runtime_fuzz.py PROJECT_ROOT SEED START STOP
"""

from __future__ import annotations

import faulthandler
import importlib
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from opgen.testing._compare import assert_same, outputs, tolerances
from opgen.testing._samples import clone, materialize, tensors_of

CASE_TIMEOUT_S = 20
INT_BOUNDARIES = (0, -1, 2**31 - 1, 2**31, 2**32, 2**40, 2**63 - 1, -(2**63))
WRONG_DTYPES = ("int64", "int32", "float16", "bfloat16", "bool", "complex64", "uint8")
MUTATIONS = (
    "valid",
    "dtype",
    "meta",
    "all_meta",
    "shape",
    "strided",
    "expanded",
    "int_boundary",
    "none",
    "alias",
)


def load_ops(root: Path) -> list[Any]:
    """The generated test module of every op of the project, in name order."""
    sys.path[:0] = [str(root), str(root / "tests")]
    modules = []
    for path in sorted((root / "tests").glob("test_*.py")):
        try:
            modules.append(importlib.import_module(path.stem))
        except BaseException as error:  # noqa: BLE001 - pytest.skip at import: not an op's tests
            if type(error).__name__ != "Skipped":
                raise
    return [m for m in modules if hasattr(m, "OP") and hasattr(m, "reference")]


def _tensor_names(kwargs: dict[str, Any]) -> list[str]:
    return [k for k, v in kwargs.items() if isinstance(v, torch.Tensor)]


def _int_names(module: Any, kwargs: dict[str, Any]) -> list[str]:
    schema = module.OP._schema
    kinds = {a.name: str(a.type) for a in schema.arguments}
    return [k for k in kwargs if kinds.get(k) in ("int", "SymInt")]


def _written(module: Any) -> list[str]:
    return list(getattr(module, "MUTATED", ()))


def mutate(module: Any, kwargs: dict[str, Any], kind: str, rng: random.Random) -> str:
    """Applies mutation `kind` to `kwargs` in place; returns what it did (or "" if it cannot)."""
    tensors = _tensor_names(kwargs)
    if kind == "valid":
        return "valid"
    if kind in _TENSOR_MUTATIONS and not tensors:
        return ""
    name = rng.choice(tensors) if tensors else ""  # drawn for every kind: a case stays the same
    if kind not in _MUTATE:
        raise AssertionError(kind)
    return _MUTATE[kind](module, kwargs, name, tensors, rng)


# Each mutation: (module, kwargs, a tensor argument's name, every tensor argument's, rng) -> what
# it did, or "" when it cannot apply.
_Mutation = Callable[[Any, dict[str, Any], str, list[str], random.Random], str]
# the mutations of one tensor argument, `name`: none applies to an op without tensor arguments
_TENSOR_MUTATIONS = ("dtype", "meta", "shape", "strided", "expanded", "none")


def _wrong_dtype(
    module: Any, kwargs: dict[str, Any], name: str, tensors: list[str], rng: random.Random
) -> str:
    dtype = rng.choice(WRONG_DTYPES)
    kwargs[name] = kwargs[name].to(getattr(torch, dtype))
    return f"{name} as {dtype}"


def _on_meta(
    module: Any, kwargs: dict[str, Any], name: str, tensors: list[str], rng: random.Random
) -> str:
    kwargs[name] = kwargs[name].to("meta")
    return f"{name} on meta"


def _all_on_meta(
    module: Any, kwargs: dict[str, Any], name: str, tensors: list[str], rng: random.Random
) -> str:
    for n in tensors:
        kwargs[n] = kwargs[n].to("meta")
    return "every tensor on meta"


def _wrong_shape(
    module: Any, kwargs: dict[str, Any], name: str, tensors: list[str], rng: random.Random
) -> str:
    t = kwargs[name]
    if t.dim() > 0 and t.shape[0] and rng.random() < 0.5:
        kwargs[name] = t.select(0, 0)
        return f"{name} without its first dimension"
    kwargs[name] = torch.cat([t, t[:1]]) if t.dim() and t.shape[0] else t.unsqueeze(0)
    return f"{name} one row longer"


def _strided(
    module: Any, kwargs: dict[str, Any], name: str, tensors: list[str], rng: random.Random
) -> str:
    t = kwargs[name]
    wide = torch.zeros((*t.shape[:-1], 2 * t.shape[-1]) if t.dim() else (2,), dtype=t.dtype)
    view = wide[..., ::2] if t.dim() else wide[0]
    kwargs[name] = view.copy_(t)
    return f"{name} strided"


def _expanded(
    module: Any, kwargs: dict[str, Any], name: str, tensors: list[str], rng: random.Random
) -> str:
    t = kwargs[name]
    if t.numel() == 0:
        return ""
    kwargs[name] = t.reshape(-1)[:1].reshape([1] * t.dim()).expand(t.shape)
    return f"{name} expanded from one element"


def _int_boundary(
    module: Any, kwargs: dict[str, Any], name: str, tensors: list[str], rng: random.Random
) -> str:
    ints = _int_names(module, kwargs)
    if not ints:
        return ""
    which, value = rng.choice(ints), rng.choice(INT_BOUNDARIES)
    kwargs[which] = value
    return f"{which}={value}"


def _none(
    module: Any, kwargs: dict[str, Any], name: str, tensors: list[str], rng: random.Random
) -> str:
    kwargs[name] = None
    return f"{name}=None"


def _aliased(
    module: Any, kwargs: dict[str, Any], name: str, tensors: list[str], rng: random.Random
) -> str:
    return _alias(module, kwargs, tensors, rng)


_MUTATE: dict[str, _Mutation] = {
    "dtype": _wrong_dtype,
    "meta": _on_meta,
    "all_meta": _all_on_meta,
    "shape": _wrong_shape,
    "strided": _strided,
    "expanded": _expanded,
    "int_boundary": _int_boundary,
    "none": _none,
    "alias": _aliased,
}


def _alias(module: Any, kwargs: dict[str, Any], tensors: list[str], rng: random.Random) -> str:
    """A written argument that is, or partially overlaps, a read one of its shape and dtype."""
    written = [n for n in _written(module) if kwargs.get(n) is not None]
    for w in written:
        target = kwargs[w]
        peers = [
            n
            for n in tensors
            if n != w and kwargs[n].shape == target.shape and kwargs[n].dtype == target.dtype
        ]
        if not peers or target.numel() < 2:
            continue
        peer = rng.choice(peers)
        if rng.random() < 0.5:
            kwargs[w] = kwargs[peer]
            return f"{w} is {peer}"
        n, shift = target.numel(), max(1, target.numel() // 2)
        buffer = _flat_concat(kwargs[peer], target)
        kwargs[peer] = buffer[:n].view(target.shape)
        kwargs[w] = buffer[shift : shift + n].view(target.shape)
        return f"{w} overlaps {peer} partially"
    if len(tensors) >= 2:  # no written argument: the same tensor read twice
        a, b = rng.sample(tensors, 2)
        if kwargs[a].shape == kwargs[b].shape and kwargs[a].dtype == kwargs[b].dtype:
            kwargs[b] = kwargs[a]
            return f"{b} is {a}"
    return ""


def _flat_concat(first: Any, second: Any) -> Any:
    return torch.cat([first.reshape(-1), second.reshape(-1)]).contiguous()


def _names_op(module: Any, error: BaseException) -> bool:
    name = module.OP._schema.name  # "example::add_out"
    notes = getattr(error, "__notes__", [])  # a Python op's kernel error: Note [Argument checks]
    text = f"{type(error).__name__}: {error} {' '.join(notes)}"
    return name in text or name.split("::")[-1] in text


def _compare(module: Any, got: Any, expected: Any, dtype: Any) -> str:
    """Empty when `got` equals `expected` (meta: in shape and dtype only), else what differs."""

    def meta_only(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return (tuple(value.shape), value.dtype)
        if isinstance(value, (tuple, list)):
            return type(value)(meta_only(v) for v in value)
        return value

    if any(t.device.type == "meta" for t in tensors_of(got)):
        got, expected = meta_only(got), meta_only(expected)
        return "" if got == expected else f"got {got}, expected {expected}"
    try:
        atol, rtol = getattr(module, "ATOL", None), getattr(module, "RTOL", None)
        assert_same(got, expected, lambda text: text, **tolerances(dtype, atol, rtol))
    except AssertionError as error:
        return str(error).splitlines()[0][:300]
    return ""


def _on_cpu(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Meta tensors replaced by CPU ones of their shape: the reference of an all-meta call."""
    return {
        k: torch.zeros(v.shape, dtype=v.dtype) if isinstance(v, torch.Tensor) else v
        for k, v in kwargs.items()
    }


def run_case(modules: list[Any], seed: int, index: int) -> dict[str, Any]:
    """Case `index` of `seed`, and its outcome."""
    rng = random.Random(seed * 1_000_003 + index)
    module = modules[index % len(modules)]
    dtype = rng.choice(list(module.DTYPES))
    samples = list(materialize([rng.choice(module.SAMPLES)], "cpu", dtype))
    kwargs = dict(rng.choice(samples))
    kind = rng.choice(MUTATIONS)
    what = mutate(module, kwargs, kind, rng) or mutate(module, kwargs, "valid", rng)
    record = {"i": index, "op": module.OP._schema.name, "call": what, "dtype": str(dtype)}
    print(json.dumps({"calling": index, **record}), flush=True)  # named, should it crash
    everything_meta = what == "every tensor on meta"
    reference_args = _on_cpu(kwargs) if everything_meta else clone(kwargs)
    mutated = tuple(_written(module))
    try:
        got = outputs(module.OP(**kwargs), kwargs, mutated)
    except Exception as error:  # noqa: BLE001 - every exception is classified
        named = _names_op(module, error)
        detail = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}" if str(error) else ""
        return {**record, "outcome": "error" if named else "opaque", "detail": detail}
    # the reference runs only on what the op accepted (a bad size can make it slow)
    try:
        expected = module.reference(**reference_args)
    except Exception as error:  # noqa: BLE001 - the reference refusing is an outcome
        detail = f"the reference raises {type(error).__name__}: {error}"
        return {**record, "outcome": "wrong", "detail": detail[:300]}
    if everything_meta:
        expected = torch.utils._pytree.tree_map(
            lambda v: v.to("meta") if isinstance(v, torch.Tensor) else v, expected
        )
    difference = _compare(module, got, expected, dtype)
    return {**record, "outcome": "wrong" if difference else "result", "detail": difference}


def main(argv: list[str]) -> None:
    root, seed, start, stop = Path(argv[0]), int(argv[1]), int(argv[2]), int(argv[3])
    faulthandler.enable()
    modules = load_ops(root)
    print(json.dumps({"ops": len(modules)}), flush=True)
    for index in range(start, stop):
        print(json.dumps({"start": index}), flush=True)
        faulthandler.dump_traceback_later(CASE_TIMEOUT_S, exit=True)
        record = run_case(modules, seed, index)
        faulthandler.cancel_dump_traceback_later()
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
