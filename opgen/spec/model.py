"""The spec model: frozen dataclasses holding exactly what the user wrote.

A model object exists only once it is valid: `validate.py` builds them and
reports every problem with its file and line before any is constructed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from .dialect.printer import format_schema
from .dialect.types import Default, SchemaType

__all__ = [
    "join_params",
    "param_list",
    "Arg",
    "Ret",
    "GradFormula",
    "FakeRule",
    "JvpRule",
    "TensorSample",
    "NONE_SAMPLE",
    "Sample",
    "TestSpec",
    "BenchSpec",
    "ShardingSpec",
    "BuildSettings",
    "OpSpec",
    "ProjectConfig",
    "BACKENDS",
    "Backend",
    "CppTarget",
    "Registration",
    "VmapRule",
    "ShardingRule",
    "RowOutput",
    "TritonCpu",
    "CompileBackend",
    "TRITON_CPU_CHOICES",
    "DEVICES",
    "CPP_TARGETS",
    "REGISTRATIONS",
    "COMPILE_BACKENDS",
    "VMAP_RULES",
    "SHARDING_RULES",
    "PRIVATE_TORCH_CHECKS",
    "ROW_OUTPUTS",
]


class _Choice(StrEnum):
    """A choice from a fixed list (Note [Choice enums]): compares, prints and reprs as its string."""

    def __repr__(self) -> str:
        return repr(self.value)  # messages quote the value as the user wrote it: 'classic'


class Backend(_Choice):
    """What implements an op: a Python kernel, C++ (and CUDA) kernels, or a Triton kernel.

    Code that depends on the backend reads its record in the backend table
    (Note [Backend table] in spec/backends.py), so that a new backend cannot
    fall through to another's path.
    """

    PYTHON = "python"
    CPP = "cpp"
    TRITON = "triton"


# Note [Choice enums]
# Every choice a spec or opgen.toml makes from a fixed list is a StrEnum: the model holds
# the member, which compares equal to its string, prints and reprs as it (templates compare
# `op.vmap == "custom"` and print `{{ op.backend }}` unchanged, messages quote `'classic'`);
# the tuples of values below are what validation checks and lists in its messages
# ("use one of 'stable', 'classic'").


class CppTarget(_Choice):
    """`cpp_target`: which C++ API a C++ op's kernels and registration use (docs/cpp.md)."""

    STABLE = "stable"
    CLASSIC = "classic"


class Registration(_Choice):
    """`registration`: how a Python op is registered, torch.library.custom_op or Library calls."""

    CUSTOM_OP = "custom_op"
    LIBRARY = "library"


class VmapRule(_Choice):
    """`vmap`: the op's batching rule (Note [Batching rules] in opgen/api/transforms.py)."""

    ELEMENTWISE = "elementwise"
    LEADING = "leading"
    CUSTOM = "custom"
    LOOP = "loop"
    NONE = "none"


class ShardingRule(_Choice):
    """`[sharding] rule`: the op's DTensor sharding rule (opgen/spec/sharding.py)."""

    ELEMENTWISE = "elementwise"
    ROWWISE = "rowwise"
    MATMUL = "matmul"
    REPLICATE = "replicate"
    CUSTOM = "custom"


class RowOutput(_Choice):
    """How a row-wise op's output is placed: like the rows, or a partial sum over them."""

    ROWS = "rows"
    SUM = "sum"


class TritonCpu(_Choice):
    """`[triton] cpu`: what a Triton op does on CPU tensors when Triton's interpreter is off."""

    ERROR = "error"
    REFERENCE = "reference"


class CompileBackend(_Choice):
    """`compile_backend`: the torch.compile backend of the generated tests."""

    AOT_EAGER = "aot_eager"
    INDUCTOR = "inductor"
    EAGER = "eager"


BACKENDS = tuple(b.value for b in Backend)
TRITON_CPU_CHOICES = tuple(c.value for c in TritonCpu)
DEVICES = ("cpu", "cuda")
CPP_TARGETS = tuple(t.value for t in CppTarget)
REGISTRATIONS = tuple(r.value for r in Registration)
COMPILE_BACKENDS = tuple(b.value for b in CompileBackend)
VMAP_RULES = tuple(r.value for r in VmapRule)
SHARDING_RULES = tuple(r.value for r in ShardingRule)
# Note [Private torch checks] in opgen/runtime/private_torch.py: what the opt-in module adds
PRIVATE_TORCH_CHECKS = ("raw_handle_transforms", "raw_handle_versions", "sharding_cache_key")
ROW_OUTPUTS = tuple(o.value for o in RowOutput)


@dataclass(frozen=True)
class Arg:
    """One schema argument as registered (Note [Schema model] in dialect/types.py).

    `type` carries the alias annotations opgen registers: the user's, with each
    bare `!` given a set name and `mutates` written in; `text` is the argument
    as the user wrote it.
    """

    name: str
    type: SchemaType
    default: Default | None = None
    kwarg_only: bool = False
    text: str = ""

    @property
    def family(self) -> str:
        """The type without annotations and list sizes: `Tensor?`, `int[]`, `(int, int)?`."""
        return self.type.family

    @property
    def is_tensor(self) -> bool:
        return self.type.family in ("Tensor", "Tensor?")

    @property
    def is_tensor_list(self) -> bool:
        return self.type.family in ("Tensor[]", "Tensor?[]", "Tensor[]?")

    @property
    def is_optional(self) -> bool:
        return self.type.is_optional

    @property
    def differentiable(self) -> bool:
        return self.is_tensor or self.is_tensor_list

    @property
    def mutated(self) -> bool:
        """Whether the op writes to the argument (a write annotation: `Tensor(a!)`, `Tensor!?`)."""
        return self.type.is_write


@dataclass(frozen=True)
class Ret:
    """One return: its name ("" when unnamed) and type, with any alias annotation."""

    name: str
    type: SchemaType

    @property
    def family(self) -> str:
        return self.type.family

    @property
    def is_tensor(self) -> bool:
        return self.type.family in ("Tensor", "Tensor?")

    @property
    def aliased(self) -> bool:
        """Whether the return carries an alias annotation (`Tensor(a!)`, a view `Tensor(a)`)."""
        return self.type.annotation is not None


@dataclass(frozen=True)
class GradFormula:
    """`inputs` get the value(s) of `expression`; several inputs take a tuple."""

    inputs: tuple[str, ...]
    expression: str
    line: int


@dataclass(frozen=True)
class FakeRule:
    """The `[fake]` table as written: how the fake kernel builds each output.

    `like` names, per return, the tensor input whose shape, dtype and device it
    copies; otherwise `expr` holds one Python expression per return. `checks`
    are the expressions of its `torch._check` guards.
    """

    like: tuple[str, ...] = ()
    expr: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()

    @property
    def data_dependent(self) -> bool:
        """Whether an output's size depends on the input values (`new_dynamic_size()`)."""
        return any("new_dynamic_size" in e for e in self.expr)


@dataclass(frozen=True)
class JvpRule:
    """The `[jvp]` table as written: forward-mode formulas (derivatives.yaml's `result:`).

    `auto` is "auto_element_wise" (the [grad] formulas with the incoming
    gradient replaced by each input's tangent, summed) or "auto_linear" (the
    op applied to the tangents); otherwise `result` holds one expression per
    return, or one expression returning all of them as a tuple.
    """

    auto: str | None = None
    result: tuple[str, ...] = ()
    line: int = 0

    @property
    def present(self) -> bool:
        return self.auto is not None or bool(self.result)


@dataclass(frozen=True)
class TensorSample:
    """A tensor argument of a `[[test.samples]]` entry, as written: a shape (given, or that of
    `values`) and how to draw or fill it."""

    shape: tuple[int, ...]
    dtype: str | None = None
    noncontiguous: bool = False
    low: float | None = None
    high: float | None = None
    requires_grad: bool = True
    values: Any = None  # nested tuples of numbers: the tensor's exact contents
    offsets: bool = False  # 0, then cumulative sums of lengths drawn in [low, high)
    sorted: bool = False  # sorted along the last dimension


class _NoneSample:
    """An optional argument given as None in a sample (`x = {none = true}`)."""

    def __repr__(self) -> str:
        return "None"


NONE_SAMPLE = _NoneSample()


@dataclass(frozen=True)
class Sample:
    """Argument name -> TensorSample, list of TensorSample, or a plain value."""

    values: tuple[tuple[str, Any], ...]
    line: int


@dataclass(frozen=True)
class TestSpec:
    """`[test]` and its `[[test.samples]]`, with the defaults of what the spec leaves out."""

    samples: tuple[Sample, ...]
    reference: str | None
    dtypes: tuple[str, ...] = ("float32",)
    # a bound for every reduced-precision dtype, or (dtype name, bound) pairs
    atol: float | tuple[tuple[str, float], ...] | None = None
    rtol: float | tuple[tuple[str, float], ...] | None = None
    samples_from: str | None = None  # a generator in <package>/testing_helpers.py
    reference_from: str | None = None  # a reference function there
    # whether the CUDA kernel can be captured in a CUDA graph; None: unless an output's
    # size depends on the values (FakeRule.data_dependent), which a graph cannot replay
    cuda_graph: bool | None = None
    # the dtype of gradcheck and the other gradient checks: float64, or float32 for kernels
    # without a float64 path
    gradcheck_dtype: str = "float64"

    @property
    def helpers(self) -> tuple[str, ...]:
        """The names the spec's tests take from `<package>/testing_helpers.py`."""
        return tuple(n for n in (self.samples_from, self.reference_from) if n)

    @property
    def has_samples(self) -> bool:
        return bool(self.samples or self.samples_from)

    @property
    def has_reference(self) -> bool:
        return bool(self.reference or self.reference_from)


MAX_SAMPLE_ELEMENTS = 1 << 28  # the default of `[options] max_sample_elements`


@dataclass(frozen=True)
class BuildSettings:
    """A `[build]` table as written (Note [Build settings] in spec/build_settings.py).

    `lines` maps each key to its line, for the messages `opgen build` gives
    when a path or an environment variable turns out wrong on this machine.
    """

    cxx_flags: tuple[str, ...] = ()
    cuda_flags: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    library_dirs: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    lines: tuple[tuple[str, int], ...] = ()

    def line(self, key: str) -> int | None:
        """The line `key` is written on, or None when the table does not set it."""
        return dict(self.lines).get(key)


@dataclass(frozen=True)
class ProjectConfig:
    """`opgen.toml`: the namespace and package, and the options every spec takes as its defaults.

    Read from the file, defaults filled in; `root` and `path` are where it was found, and
    `templates` is the override folder resolved inside the project.
    """

    root: Path
    path: Path
    namespace: str
    package: str
    backend: Backend = Backend.PYTHON
    cpp_target: CppTarget = CppTarget.STABLE
    torch_target_version: str = "2.10"
    registration: Registration = Registration.CUSTOM_OP
    compile_backend: CompileBackend = CompileBackend.INDUCTOR
    pybind: bool = False
    templates: Path | None = None
    # the checks the project opts into that need private torch (PRIVATE_TORCH_CHECKS)
    private_torch: tuple[str, ...] = ()
    # the tensor elements of all of a spec's [[test.samples]] together (Note [Sample bounds])
    max_sample_elements: int = MAX_SAMPLE_ELEMENTS
    build: BuildSettings = BuildSettings()


@dataclass(frozen=True)
class BenchSpec:
    """`[bench]` (see opgen/spec/bench.py): sizes are tuples of (variable, value)."""

    sizes: tuple[tuple[tuple[str, int], ...], ...] = ()
    inputs: tuple[tuple[str, Any], ...] = ()
    native: str | None = None
    reference: str | None = None
    bytes: str | None = None
    flops: str | None = None
    backward: bool = False
    dtypes: tuple[str, ...] = ("float32",)  # each size is timed in each
    inputs_from: str | None = None  # a sample generator in <package>/testing_helpers.py
    original: str | None = None  # the original library's op, timed where its modules import


@dataclass(frozen=True)
class ShardingSpec:
    """`[sharding]`: the op's DTensor sharding rule (see opgen/spec/sharding.py).

    `outputs` (row-wise rules only) says, per returned tensor, whether it is
    sharded like the rows (`rows`) or a partial sum over them (`sum`).
    """

    rule: ShardingRule
    outputs: tuple[RowOutput, ...] = ()


@dataclass(frozen=True)
class OpSpec:
    """One op, as its spec file (`ops/<name>.toml`) describes it once validated.

    Read from the file: the name (split into namespace, name and overload), the schema
    (`args`, `returns`) and each table, with defaults for what is left out. Derived, so the model
    does not round-trip to the file: `backend`, `cpp_target`, `registration` and `pybind` default
    to opgen.toml's options; a Python op's `registration` becomes "library" when custom_op cannot
    register its schema; `mutates` becomes the args' alias annotations; `tags` add those the
    schema implies after the spec's own; `path` and `lines` (each key's line) serve messages.
    """

    path: Path
    namespace: str
    name: str
    overload: str
    args: tuple[Arg, ...]
    returns: tuple[Ret, ...]
    devices: tuple[str, ...]
    backend: Backend
    doc: str
    grads: tuple[GradFormula, ...]
    fake: FakeRule
    test: TestSpec
    per_device: bool = False
    double_backward: bool = True
    cpp_target: CppTarget = CppTarget.STABLE
    registration: Registration = Registration.CUSTOM_OP
    pybind: bool = False
    bench: BenchSpec = BenchSpec()
    jvp: JvpRule = JvpRule()
    vmap: VmapRule = VmapRule.LOOP
    vmap_leading: tuple[str, ...] = ()
    autocast: tuple[tuple[str, str], ...] = ()  # (device, dtype), in the spec's order
    # torch.Tag names the op is defined with: the spec's `tags`, then those its schema
    # implies (Note [Tags of aliasing ops] in spec/registration.py)
    tags: tuple[str, ...] = ()
    sharding: ShardingSpec | None = None
    build: BuildSettings = BuildSettings()
    # written tensor arguments whose kernels handle any strides: no fenced contiguity check
    strided_writes: tuple[str, ...] = ()
    # `[triton] cpu`: a Triton op's CPU calls without Triton's interpreter (TRITON_CPU_CHOICES)
    triton_cpu: TritonCpu = TritonCpu.ERROR
    lines: dict[str, int] = field(default_factory=dict, compare=False, hash=False)

    @property
    def qualname(self) -> str:
        return f"{self.namespace}::{self.name}"

    @property
    def schema(self) -> str:
        """The schema opgen registers, without the op name (dialect/printer.py)."""
        return format_schema(self.args, self.returns)

    @property
    def overload_name(self) -> str:
        """The op's name plus `.overload` if it has one: how torch.library names the overload."""
        return f"{self.name}.{self.overload}" if self.overload else self.name

    @property
    def registered_name(self) -> str:
        """`namespace::name[.overload]`, the name torch.library registers."""
        return f"{self.namespace}::{self.overload_name}"

    @property
    def module(self) -> str:
        """The op's name in file names and generated identifiers: name, plus `_overload` if any."""
        return f"{self.name}_{self.overload}" if self.overload else self.name

    @property
    def full_schema(self) -> str:
        return f"{self.overload_name}{self.schema}"

    @property
    def mutated(self) -> tuple[Arg, ...]:
        return tuple(a for a in self.args if a.mutated)

    @property
    def functional(self) -> bool:
        """Writes no argument and returns no alias of one: torch registers gradient formulas only for these."""
        return not self.mutated and not self.aliased_returns

    @property
    def aliased_returns(self) -> bool:
        """Whether a return aliases an argument (an in-place, out= or view op)."""
        return any(r.aliased for r in self.returns)

    def arg(self, name: str) -> Arg:
        """The argument named `name` (it must exist)."""
        return next(a for a in self.args if a.name == name)


def join_params(args: tuple[Arg, ...], render: Callable[[Arg], str]) -> str:
    """Comma-joined parameters with `*` before the first keyword-only one (schema and Python alike)."""
    return ", ".join(param_list(args, render))


def param_list(args: tuple[Arg, ...], render: Callable[[Arg], str]) -> list[str]:
    """The parameters of `join_params`, one item each."""
    parts: list[str] = []
    for arg in args:
        if arg.kwarg_only and "*" not in parts:
            parts.append("*")
        parts.append(render(arg))
    return parts
