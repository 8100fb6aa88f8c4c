"""What the distributed tests run on every rank: each op on DTensors, checked against itself
on whole tensors."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ._compare import Bound, tolerances
from ._promises import Case, cases, is_tensor, table
from ._samples import Samples, materialize
from ._schema import overload, parse, positional, registered_name

__all__ = ["check_sharded"]


def _clone(value: Any) -> Any:
    return value.detach().clone().requires_grad_(value.requires_grad) if is_tensor(value) else value


def _same_on_every_rank(args: Sequence[Any], index: int) -> None:
    """distribute_tensor takes rank 0's data, while each rank checks against its own tensors."""
    import torch.distributed as dist

    tensors = [a.detach().contiguous() for a in args if is_tensor(a)]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, tensors)
    for rank, theirs in enumerate(gathered):
        assert all(torch.equal(a, b) for a, b in zip(tensors, theirs, strict=True)), (
            f"sample {index + 1}: rank {rank} built other tensors than rank {dist.get_rank()}: "
            "samples must come from the same seed on every rank"
        )


def _results(result: Any, args: Sequence[Any], mutated: Sequence[int]) -> list[Any]:
    """What the op produced: its returned tensors, or its mutated arguments."""
    if mutated:
        assert result is None, f"a mutating op returning nothing returned {type(result).__name__}"
        return [args[i] for i in mutated]
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _grad_inputs(outputs: Sequence[Any], args: Sequence[Any], cotangents: Sequence[Any]) -> Any:
    leaves = [a for a in args if is_tensor(a) and a.requires_grad]
    return torch.autograd.grad(outputs, leaves, cotangents, allow_unused=True)


@dataclass(frozen=True)
class _Reference:
    """The op on whole tensors in this process, and its gradients against one fixed grad_output."""

    outputs: list[Any]
    cotangents: list[Any]
    grads: Any  # None when the op has no gradient formulas

    @staticmethod
    def of(
        op: Any,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        mutated: Sequence[int],
        differentiable: bool,
    ) -> _Reference:
        args = [_clone(a) for a in args]
        outputs = _results(op(*args, **kwargs), args, mutated)
        torch.manual_seed(1234)
        cotangents = [torch.randn_like(o) for o in outputs]
        grads = _grad_inputs(outputs, args, cotangents) if differentiable else None
        return _Reference(outputs, cotangents, grads)


@dataclass(frozen=True)
class _SampleRun:
    """One sample's arguments, called on DTensors case by case (through the op, then its
    wrapper)."""

    mesh: Any
    args: list[Any]
    kwargs: dict[str, Any]
    mutated: list[int]
    names: list[str]
    limits: dict[str, float]

    def distribute(self, case: Case) -> list[Any]:
        from torch.distributed.tensor import distribute_tensor

        # A copy: rank 0's shards may share memory with the tensor, and a mutating op writes
        # into them.
        return [
            (
                distribute_tensor(a.detach().clone(), self.mesh, [p]).requires_grad_(
                    a.requires_grad
                )
                if is_tensor(a)
                else a
            )
            for a, p in zip(self.args, case.inputs, strict=True)
        ]

    def refused(self, fn: Any, case: Case, label: str) -> None:
        """The rule cannot keep a mutated argument where it is: the call must fail, naming it."""
        try:
            fn(*self.distribute(case), **self.kwargs)
        except NotImplementedError as error:
            named = any(f"`{self.names[i]}`" in str(error) for i in self.mutated)
            assert named, f"{label}: {error}"
            return
        raise AssertionError(
            f"{label}: the rule cannot keep the mutated argument there, yet the call ran"
        )

    def check(self, fn: Any, case: Case, reference: _Reference, label: str, backward: bool) -> None:
        dargs = self.distribute(case)
        got = _results(fn(*dargs, **self.kwargs), dargs, self.mutated)
        produced = tuple(g.placements[0] for g in got)
        promised = " or ".join(str(list(outcome)) for outcome in case.outcomes)
        assert produced in case.outcomes, (
            f"{label}: the rule promises outputs placed {promised}, DTensor produced "
            f"{list(produced)}"
        )
        self.compare(got, reference.outputs, f"{label}, output")
        if backward and reference.grads is not None:
            from torch.distributed.tensor import Replicate, Shard, distribute_tensor

            placed = [p if isinstance(p, Shard) else Replicate() for p in produced]
            cotangents = [
                distribute_tensor(c, self.mesh, [p])
                for c, p in zip(reference.cotangents, placed, strict=True)
            ]
            grads = _grad_inputs(got, dargs, cotangents)
            self.compare(grads, reference.grads, f"{label}, gradient")

    def compare(self, got: Sequence[Any], expected: Sequence[Any], label: str) -> None:
        from torch.distributed.tensor import DTensor

        for position, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert (g is None) == (e is None), f"{label} {position}: {g} against {e}"
            if g is not None:
                torch.testing.assert_close(
                    g.full_tensor() if isinstance(g, DTensor) else g,
                    e.detach(),
                    equal_nan=True,
                    **self.limits,
                    msg=lambda text, position=position: f"{label} {position}: {text}",
                )


def _uneven(args: Sequence[Any], inputs: tuple[Any, ...], world: int) -> bool:
    """A shard of this case holds more rows than another (a size the mesh does not divide)."""
    from torch.distributed.tensor import Shard

    return any(
        isinstance(p, Shard) and a.shape[p.dim] >= world and a.shape[p.dim] % world
        for a, p in zip(args, inputs, strict=True)
    )


def check_sharded(
    mesh: Any,
    schema: str,
    wrapper: Any,
    samples: Samples,
    dtype: Any,
    *,
    rule: str,
    rules: str,
    outputs: Sequence[str] = (),
    differentiable: Sequence[str] = (),
    mutated: Sequence[str] = (),
    atol: Bound = None,
    rtol: Bound = None,
) -> int:
    """Every sample under every case of the op's rule (once per sample also through `wrapper`).

    `schema` is the op's registered schema, `rules` the module that registers the
    project's sharding rules (`<package>.sharding`). Each case distributes the
    inputs, calls the op, checks the output placements (Note [Promise tables] in
    `_promises.py`) and compares `full_tensor()` with the op on whole tensors in
    this process, then the gradients. The op itself is the reference: whatever
    differs comes from sharding (its own tests compare it with the spec's
    reference, and the spec need not have one). A mutated argument must keep its
    placement and hold the op's result. Returns the number of cases run; at least
    one must shard a dim that the mesh does not divide evenly.
    """
    importlib.import_module(rules)  # registers the rules
    op, name = overload(schema), registered_name(schema)
    world = mesh.size()
    names = [a.name for a in parse(schema).arguments if not a.kwarg_only]
    returns = len(parse(schema).returns)
    checked = uneven = 0
    for index, sample in enumerate(materialize(samples, "cpu", dtype, differentiable)):
        args, kwargs = positional(schema, sample)
        where = [i for i, n in enumerate(names[: len(args)]) if n in mutated]
        _same_on_every_rank(args, index)
        reference = _Reference.of(op, args, kwargs, where, bool(differentiable))
        run = _SampleRun(mesh, args, kwargs, where, names, tolerances(dtype, atol, rtol))
        promises = table(rule, name, rules, args, kwargs, outputs, returns, mesh)
        shapes = [tuple(a.shape) for a in args if is_tensor(a)]
        wrapped = False
        for case in cases(promises, args, where, world):
            label = f"{name}, sample {index + 1} (shapes {shapes}), inputs {list(case.inputs)}"
            # The typed wrapper calls the same op: once per sample, on sharded inputs, shows it
            # passes DTensors through.
            sharded = case.outcomes and not all(p is None or p.is_replicate() for p in case.inputs)
            for fn in (op, wrapper) if sharded and not wrapped else (op,):
                if case.outcomes:
                    run.check(fn, case, reference, label, backward=fn is op)
                else:
                    run.refused(fn, case, label)
            wrapped = wrapped or bool(sharded)
            checked += 1
            uneven += bool(case.outcomes) and _uneven(args, case.inputs, world)
    assert checked, f"{name}: no sample to check"
    assert uneven, (
        f"{name}: no case shards a dim that {world} ranks do not divide evenly: add a "
        "[[test.samples]] entry with an odd size (e.g. shape = [7, 13])"
    )
    return checked
