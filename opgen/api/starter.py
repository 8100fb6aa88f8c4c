"""Working first bodies for the kernel stubs of a fresh op.

Note [Starter bodies]
A fresh op (one whose spec this run creates: `opgen new`) can start with a
kernel that works instead of a stub that raises, so that its generated tests
pass at once. The body is template context (`starter`, docs/templates.md)
used for the kernel file's first text only: the scaffold that later runs
merge against stays the stub, so the starter counts as the user's first edit
and a schema change later merges into the user's body without a conflict.
For now opgen has a starter only for the elementwise sine `opgen new` writes
by default.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec.model import OpSpec

__all__ = ["Starter", "starter"]


@dataclass(frozen=True)
class Starter:
    """Body lines (without the function's indentation) that replace a stub's placeholder line."""

    python: tuple[str, ...] | None = None  # the op's (first) Python kernel function
    cpu: tuple[str, ...] | None = None  # the C++ CPU kernel, after its input checks


_SINE_STABLE = (
    "auto out = torch::stable::empty_like(x_c);",
    "auto sine = [&](auto* dst, const auto* src) {",
    "  torch::stable::parallel_for(0, x_c.numel(), 4096, [&](int64_t begin, int64_t end) {",
    "    for (int64_t i = begin; i < end; ++i) dst[i] = std::sin(src[i]);",
    "  });",
    "};",
    "if (x_c.scalar_type() == torch::headeronly::ScalarType::Double) {",
    "  sine(out.mutable_data_ptr<double>(), x_c.const_data_ptr<double>());",
    "} else {",
    "  sine(out.mutable_data_ptr<float>(), x_c.const_data_ptr<float>());",
    "}",
    "return out;",
)
_SINE_CLASSIC = ("return x_c.sin();  // full ATen is available: write your kernel here",)


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


def starter(op: OpSpec) -> Starter | None:
    """The working body a fresh op's kernels start with, or None where opgen has none (Note [Starter bodies])."""
    if not _is_sine(op):
        return None
    if op.backend == "python":
        return Starter(python=("return torch.sin(x)",))
    return Starter(cpu=_SINE_STABLE if op.cpp_target == "stable" else _SINE_CLASSIC)
