"""Turn an op spec's `[bench]` table into timeable cases: inputs and statements.

Every implementation of one case is a statement over the same globals (the
inputs by argument name), so the generated op and its baselines are timed on
identical tensors and all allocate their outputs: at large sizes the page
faults of a fresh output dominate, so mixing allocating and `out=` calls would
mislead.

Note [Bench baselines]
The baselines are what a user would otherwise call: the spec's reference
(often a slow composition of torch ops), `torch.compile` of that reference
(Inductor fuses it into vectorised C++ on CPU; compiled on its first call,
which the timing's warm-up call absorbs), PyTorch's native op (`[bench]
native`) and the original library's op (`[bench] original`, only where its
modules import; otherwise the case carries a note). The report compares the
op with the fastest of them.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..spec.bench import original_modules
from ..spec.dialect.values import ENUMS
from ..spec.expr import ExprProblem
from ..spec.model import Arg, OpSpec

__all__ = [
    "Impl",
    "Case",
    "CaseError",
    "size_points",
    "overhead_baseline",
    "build_case",
    "DEFAULT_SIZES",
    "QUICK_SIZES",
    "BASELINES",
]

DEFAULT_SIZES = ((("n", 1_000),), (("n", 100_000),), (("n", 1_000_000),))
QUICK_SIZES = ((("n", 256),),)
OPGEN, REFERENCE, NATIVE, HANDLE = "opgen", "reference", "native", "torch.ops"
COMPILED, ORIGINAL = "compiled", "original"
# What the op is compared with, in the order the tables show them (Note [Bench baselines]).
BASELINES = (REFERENCE, COMPILED, NATIVE, ORIGINAL)


def overhead_baseline(names: Iterable[str]) -> str | None:
    """What opgen's call overhead is measured against, among a case's implementations: the
    native op, else the reference; None with neither."""
    present = set(names)
    return NATIVE if NATIVE in present else REFERENCE if REFERENCE in present else None


class CaseError(Exception):
    """The spec does not say enough to build the inputs (the message says what to add)."""


@dataclass(frozen=True)
class Impl:
    name: str
    stmt: str


@dataclass
class Case:
    op: str
    size: dict[str, int]
    mode: str  # "forward" or "forward+backward"
    impls: list[Impl]
    globals: dict[str, Any]
    bytes: float | None = None
    flops: float | None = None
    derived_bytes: bool = False
    numel: int = 0  # elements of the largest input: the x axis of plots
    notes: list[str] = field(default_factory=list)
    dtype: str = ""  # shown beside the size when the spec times several dtypes
    inputs: tuple[str, ...] = ()  # the names in `globals` that are the op's arguments
    returns: int = 0  # values the schema returns (in-place and out= ops: often none)
    mutated: tuple[str, ...] = ()  # the arguments the op writes
    # the reference is the tests' ([test]), which returns the values an op that returns
    # nothing writes, not a `[bench] reference` that writes them as the op does
    reference_returns_writes: bool = False

    @property
    def size_label(self) -> str:
        label = (
            ",".join(f"{k}={v}" for k, v in self.size.items())
            if len(self.size) > 1
            else str(next(iter(self.size.values())))
        )
        return f"{label} {self.dtype}" if self.dtype else label


def size_points(op: OpSpec, quick: bool) -> list[dict[str, int]]:
    """The sizes to run: the spec's (the smallest only with --quick) or opgen's defaults."""
    sizes = op.bench.sizes or (QUICK_SIZES if quick else DEFAULT_SIZES)
    if quick:
        sizes = (min(sizes, key=lambda s: math.prod(v for _, v in s)),)
    return [dict(s) for s in sizes]


def _eval(text: str, names: dict[str, Any]) -> Any:
    import torch
    import torch.nn.functional as F

    scope = {"torch": torch, "F": F, "math": math, **names}
    return eval(compile(text, "<bench>", "eval"), scope)  # spec expressions, checked by validate


def _shape(template: tuple[int | str, ...], size: dict[str, int], name: str) -> tuple[int, ...]:
    dims = []
    for dim in template:
        value = dim if isinstance(dim, int) else _eval(dim, dict(size))
        if not isinstance(value, int) or value < 0:
            raise CaseError(f"bench.inputs.{name}: dimension {dim!r} gives {value!r}, not a size")
        dims.append(value)
    return tuple(dims)


def _default_value(op: OpSpec, arg: Arg, size: dict[str, int]) -> Any:
    if arg.family == "Tensor" and set(size) == {"n"}:
        return ("n",)
    if arg.family == "Tensor?":
        return None
    if arg.default is not None and not arg.is_tensor_list:
        value = arg.default.value
        if arg.type.element == "ScalarType" and isinstance(value, str):
            import torch

            return getattr(torch, value)
        if arg.type.element in ENUMS and isinstance(value, int):  # a Layout or MemoryFormat code
            import torch

            return getattr(torch, ENUMS[arg.type.element][value])
        return list(value) if isinstance(value, tuple) else value
    for sample in op.test.samples[:1]:
        for name, value in sample.values:
            if (
                name == arg.name
                and not hasattr(value, "shape")
                and not isinstance(value, (list, tuple))
            ):
                return value
    raise CaseError(
        f'{op.qualname}: add bench.inputs.{arg.name} to {op.path.name} (a shape template such as ["n"], or a value)'
    )


def _tensor(shape: tuple[int, ...], dtype: Any, device: str, seed: int) -> Any:
    import torch

    gen = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=gen).to(device)
    return torch.randint(0, 10, shape, dtype=dtype, generator=gen).to(device)


def make_inputs(op: OpSpec, size: dict[str, int], device: str, dtype_name: str) -> dict[str, Any]:
    """The op's arguments at `size`, by name (tensors in `dtype_name`, from a fixed seed)."""
    import torch

    dtype = getattr(torch, dtype_name)
    given = dict(op.bench.inputs)
    values: dict[str, Any] = {}
    for index, arg in enumerate(op.args):
        value = given[arg.name] if arg.name in given else _default_value(op, arg, size)
        if arg.is_tensor and isinstance(value, tuple):
            value = _tensor(_shape(value, size, arg.name), dtype, device, index)
        values[arg.name] = value
    return values


def _call(name: str, op: OpSpec) -> str:
    return (
        f"{name}("
        + ", ".join(f"{a.name}={a.name}" if a.kwarg_only else a.name for a in op.args)
        + ")"
    )


def _outputs(result: Any) -> list[Any]:
    import torch

    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [r for r in result if isinstance(r, torch.Tensor)]
    return []


def _nbytes(tensors: list[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _helpers(fn: Any) -> Any:
    """The project's `testing_helpers.py` (Note [Testing helpers]), found from the wrapper."""
    import importlib

    return importlib.import_module(f"{fn.__module__.partition('.')[0]}.testing_helpers")


def helper_inputs(
    op: OpSpec, fn: Any, size: dict[str, int], device: str, dtype_name: str
) -> dict[str, Any]:
    """The first sample of `[bench] inputs_from`, a generator of the project's
    `testing_helpers.py` called with the size variables (Note [Testing helpers])."""
    import torch

    generator = op.bench.inputs_from or ""
    torch.manual_seed(0)
    samples = getattr(_helpers(fn), generator)(device, getattr(torch, dtype_name), **size)
    if not samples:
        raise CaseError(f"{op.qualname}: {generator}(..., **{size}) gave no samples")
    return dict(samples[0])


def _compile_reference(op: OpSpec, reference: str | None, scope: dict[str, Any]) -> Any:
    """`torch.compile` of the reference, taking the op's arguments (static shapes: each
    case compiles for its own sizes). It compiles on its first call."""
    import torch

    if reference:
        params = ", ".join(a.name for a in op.args)
        fn = eval(compile(f"lambda {params}: ({reference})", "<bench reference>", "eval"), scope)
    else:
        fn = scope["_reference"]
    return torch.compile(fn, dynamic=False)


def _import_original(text: str, scope: dict[str, Any]) -> str | None:
    """Put the modules `[bench] original` names into `scope`; why not, when one fails to import."""
    try:
        modules = original_modules(text, set(scope))
    except ExprProblem as exc:  # validated with the spec; the scope may hide a name
        return exc.message
    for name in modules:
        try:
            scope[name] = importlib.import_module(name)
        except ImportError as exc:
            return f"{name} does not import here ({exc}); install it to compare with `{text}`"
    return None


def build_case(
    op: OpSpec,
    fn: Any,
    namespace: dict[str, Any],
    size: dict[str, int],
    device: str,
    backward: bool | None = None,
    dtype: str | None = None,
    compiled: bool = False,
) -> Case:
    """One size of one op in one dtype: its implementations as statements over shared globals.

    `fn` is the generated wrapper; `namespace` holds the library's other ops by
    name (for expressions that call them). `dtype` defaults to the spec's first.
    `compiled` adds `torch.compile` of the reference (Note [Bench baselines]).
    """
    import torch

    backward = op.bench.backward if backward is None else backward
    dtype_name = dtype or op.bench.dtypes[0]
    inputs = (
        helper_inputs(op, fn, size, device, dtype_name)
        if op.bench.inputs_from
        else make_inputs(op, size, device, dtype_name)
    )
    tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)]
    wrt = _grad_inputs(op, inputs, backward)
    scope: dict[str, Any] = {
        **namespace,
        "torch": torch,
        "F": torch.nn.functional,
        "math": math,
        **size,
        **inputs,
    }
    scope.update({"_op": fn, "_grad": torch.autograd.grad, "_wrt": tuple(wrt)})
    exprs, notes = _expressions(op, fn, scope, compiled)
    result = eval(exprs[0][1], scope)
    outputs = _outputs(result)
    if backward:
        scope["_gout"] = tuple(torch.randn_like(o) for o in outputs)
        impls = [
            Impl(name, f"_grad(({expr}), _wrt, _gout, allow_unused=True)") for name, expr in exprs
        ]
    else:
        impls = [Impl(name, expr) for name, expr in exprs]
    mode = "forward+backward" if backward else "forward"
    case = Case(op.qualname, size, mode, impls, scope, notes=notes)
    case.dtype = dtype_name if len(op.bench.dtypes) > 1 else ""
    case.inputs = tuple(inputs)
    case.returns = len(op.returns)
    case.mutated = tuple(a.name for a in op.mutated)
    case.reference_returns_writes = not op.bench.reference
    case.numel = max((t.numel() for t in tensors), default=0)
    _count_work(case, op, {**size, **inputs}, tensors, outputs, wrt if backward else None)
    return case


def _grad_inputs(op: OpSpec, inputs: dict[str, Any], backward: bool) -> list[Any]:
    """The floating-point tensor inputs a [grad] formula differentiates, in argument order;
    with `backward` they require grad, and there must be one."""
    import torch

    wrt_names = [a.name for a in op.args if a.name in {n for f in op.grads for n in f.inputs}]
    wrt = [
        inputs[n]
        for n in wrt_names
        if isinstance(inputs[n], torch.Tensor) and inputs[n].is_floating_point()
    ]
    if backward and not wrt:
        raise CaseError(
            f"{op.qualname}: bench.backward needs a [grad] formula for a floating-point tensor input"
        )
    for t in wrt if backward else ():
        t.requires_grad_(True)
    return wrt


def _expressions(
    op: OpSpec, fn: Any, scope: dict[str, Any], compiled: bool
) -> tuple[list[tuple[str, str]], list[str]]:
    """(implementation name, expression over `scope`) for opgen's op and each baseline the spec
    names, with what they need put into `scope`; and a note for each baseline left out."""
    exprs = [(OPGEN, _call("_op", op))]
    notes: list[str] = []
    reference = op.bench.reference or op.test.reference
    if reference:
        exprs.append((REFERENCE, reference))
    elif op.test.reference_from:  # the tests' reference function, on the same inputs
        scope["_reference"] = getattr(_helpers(fn), op.test.reference_from)
        exprs.append((REFERENCE, _call("_reference", op)))
    if compiled and len(exprs) > 1:
        scope["_compiled"] = _compile_reference(op, reference, scope)
        exprs.append((COMPILED, _call("_compiled", op)))
    if op.bench.native:
        exprs.append((NATIVE, op.bench.native))
    if op.bench.original:
        note = _import_original(op.bench.original, scope)
        if note:
            notes.append(f"{op.name} original: {note}")
        else:
            exprs.append((ORIGINAL, op.bench.original))
    return exprs, notes


def _count_work(
    case: Case,
    op: OpSpec,
    names: dict[str, Any],
    tensors: list[Any],
    outputs: list[Any],
    wrt: list[Any] | None,
) -> None:
    """The case's flops and bytes from the spec's formulas over `names`; without either, the
    bytes its tensors move (`wrt`: the inputs differentiated, when the case runs backward)."""
    if op.bench.flops:
        case.flops = float(_eval(op.bench.flops, names))
    if op.bench.bytes:
        case.bytes = float(_eval(op.bench.bytes, names))
    elif not op.bench.flops:
        moved = _nbytes(tensors) + _nbytes(outputs)
        if wrt is not None:  # read grad_out and the saved inputs again, write one grad per input
            moved += _nbytes(outputs) + 2 * _nbytes(wrt)
        case.bytes, case.derived_bytes = float(moved), True
