"""Working first bodies for the kernel stubs of a fresh op.

Note [Starter bodies]
A fresh op (one whose spec this run creates: `opgen new`) starts with a
kernel that works instead of a stub that raises, so that `opgen build &&
opgen test` pass at once and the user edits a working kernel. The body is
template context (`starter`, docs/templates.md) used for the kernel file's
first text only: the scaffold that later runs merge against stays the stub,
so the starter counts as the user's first edit and a schema change later
merges into the user's body without a conflict.

Two starters exist. The default op of `opgen new` (no --schema) is an
elementwise sine. An op made with --schema gets a copy-through
(`copy_plan`): the first tensor input (or the first tensor of the first
tensor-list input) is copied into every tensor output, each element of a
Tensor[] output and every mutated tensor; `opgen new` writes the matching
reference (`x.clone()`), fake rule and samples into the spec (`scaffold/texts.py`,
from the same `copy_plan.py`),
and a kernel gets the starter only while the spec still holds that
reference. Schemas without such a source (only optional tensors, a void op
that mutates nothing) keep the stub. The C++ bodies show the three things
every kernel does: allocate the outputs, reach the data through typed
pointers, dispatch on dtype (`starter_cpp.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec.backends import backend_of
from ..spec.model import OpSpec
from .copy_plan import CopyPlan, Param, copy_plan
from .starter_cpp import cpp_starter

__all__ = ["Starter", "starter", "STARTER_DTYPES"]

# What a starter body's dtype dispatch covers besides the spec's test dtypes: float64
# too, so that adding [grad] (gradcheck runs in float64) needs no change to the body.
STARTER_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class Starter:
    """Starter text of each kernel: body lines (without the function's indentation)."""

    python: tuple[str, ...] | None = None  # the op's Python kernel function
    cpu: tuple[str, ...] | None = None  # the C++ CPU kernel, after its input checks
    cuda_kernel: tuple[str, ...] | None = None  # the CUDA `__global__` function, whole
    cuda: tuple[str, ...] | None = None  # the CUDA launcher, after its checks and stream


def _op_plan(op: OpSpec) -> CopyPlan | None:
    params = [Param(a.name, a.family, bool(a.mutated)) for a in op.args]
    # a return aliasing an argument keeps its annotation: no copy-through writes one
    returns = [r.type.spelling if r.aliased else r.family for r in op.returns]
    return copy_plan(params, returns)


def _is_sine(op: OpSpec) -> bool:
    """The op `opgen new` writes without --schema: `(Tensor x) -> Tensor` checked against torch.sin(x)."""
    one_tensor = (
        len(op.args) == 1
        and op.args[0].name == "x"
        and op.args[0].family == "Tensor"
        and not op.args[0].mutated
    )
    return (
        one_tensor
        and [r.family for r in op.returns] == ["Tensor"]
        and not op.returns[0].aliased
        and op.test.reference == "torch.sin(x)"
    )


def dispatch_dtypes(op: OpSpec) -> tuple[str, ...]:
    """The dtypes a starter's C++ dispatch handles: the spec's test dtypes, float32 and float64."""
    wanted = list(op.test.dtypes) + [d for d in STARTER_DTYPES if d not in op.test.dtypes]
    return tuple(wanted)


def starter(op: OpSpec) -> Starter | None:
    """The working body a fresh op's kernels start with, or None where opgen has none (Note [Starter bodies])."""
    if _is_sine(op):
        plan = CopyPlan("x", False, ("Tensor",), ())
        python: tuple[str, ...] = ("return torch.sin(x)",)
        element = "sin"
    else:
        found = _op_plan(op)
        if found is None or op.test.reference != found.reference:
            return None
        plan, python, element = found, found.python_body(), ""
    if not backend_of(op).compiles_cpp:  # Triton ops: api/starter_triton.py, from this plan
        return Starter(python=python)
    cpu, cuda_kernel, cuda = cpp_starter(op, plan, element, dispatch_dtypes(op))
    return Starter(python=python, cpu=cpu, cuda_kernel=cuda_kernel, cuda=cuda)
