"""The C++ and CUDA starter bodies of Note [Starter bodies]: allocate, reach the data, dispatch on dtype."""

from __future__ import annotations

from dataclasses import dataclass

from ..spec.model import OpSpec
from . import cpp
from .copy_plan import CopyPlan
from .cpp_context import SCALAR_TYPES, local_names, stub_names

__all__ = ["cpp_starter", "ELEMENT_TYPES"]

# dtype -> C++ element type of `const_data_ptr<T>()`, per target
ELEMENT_TYPES = {
    "stable": {
        "float32": "float",
        "float64": "double",
        "float16": "torch::headeronly::Half",
        "bfloat16": "torch::headeronly::BFloat16",
        "int8": "int8_t",
        "int16": "int16_t",
        "int32": "int32_t",
        "int64": "int64_t",
        "uint8": "uint8_t",
        "bool": "bool",
        "complex64": "torch::headeronly::complex<float>",
        "complex128": "torch::headeronly::complex<double>",
    },
    "classic": {
        "float32": "float",
        "float64": "double",
        "float16": "at::Half",
        "bfloat16": "at::BFloat16",
        "int8": "int8_t",
        "int16": "int16_t",
        "int32": "int32_t",
        "int64": "int64_t",
        "uint8": "uint8_t",
        "bool": "bool",
        "complex64": "c10::complex<float>",
        "complex128": "c10::complex<double>",
    },
}
_NAMES = (
    *("out", "src", "dst", "kernel", "launch", "zero", "first", "n", "threads", "blocks"),
    *("error", "begin", "end", "i", "T"),
)


@dataclass(frozen=True)
class _Api:
    """The calls of one target: allocation, contiguity, parallel loop, scalar types."""

    target: str

    @property
    def stable(self) -> bool:
        return self.target == "stable"

    def empty_like(self, tensor: str) -> str:
        return f"{'torch::stable' if self.stable else 'at'}::empty_like({tensor})"

    def contiguous(self, tensor: str) -> str:
        return f"torch::stable::contiguous({tensor})" if self.stable else f"{tensor}.contiguous()"

    @property
    def parallel_for(self) -> str:
        return "torch::stable::parallel_for" if self.stable else "at::parallel_for"

    def scalar_type(self, dtype: str) -> str:
        prefix = "torch::headeronly::ScalarType" if self.stable else "at::ScalarType"
        return f"{prefix}::{SCALAR_TYPES[dtype]}"


class _Body:
    """Names and shared pieces of one op's starter bodies."""

    def __init__(self, op: OpSpec, plan: CopyPlan, element: str, dtypes: tuple[str, ...]):
        self.op, self.plan, self.dtypes = op, plan, dtypes
        self.api = _Api(op.cpp_target)
        self.kind = cpp.CppType(op.cpp_target)
        self.v = local_names(op, _NAMES)
        stub = stub_names(op)
        self.p = stub.params  # argument -> its C++ parameter (Note [Generated names])
        self.element = element  # "" copies; "sin" applies sine
        source = plan.source
        # the contiguous tensor read: the stub's `<arg>_c`, or the list's first tensor
        self.src_tensor = self.v["first"] if plan.source_is_list else stub.contiguous[source]
        many = len(plan.returns) > 1
        self.outputs: list[tuple[str, str]] = []  # (tensor expression, declaration or "")
        for index, ret in enumerate(plan.returns):
            name = f"{self.v['out']}{index if many else ''}"
            fresh = self.api.empty_like(self.src_tensor)
            if ret == "Tensor[]":
                self.outputs.append(
                    (f"{name}[0]", f"std::vector<{self.kind.tensor}> {name} = {{{fresh}}};")
                )
            else:
                self.outputs.append((name, f"{self.kind.tensor} {name} = {fresh};"))
        self.outputs += [(self.p[name], "") for name in plan.mutated]
        self.returned = [f"{self.v['out']}{i if many else ''}" for i in range(len(plan.returns))]

    def dsts(self) -> list[str]:
        dst = self.v["dst"]
        return [dst] if len(self.outputs) == 1 else [f"{dst}{i}" for i in range(len(self.outputs))]

    def value(self, device: str) -> str:
        src = f"{self.v['src']}[{self.v['i']}]"
        if not self.element:
            return src
        return f"std::{self.element}({src})" if device == "cpu" else f"{self.element}({src})"

    def prologue(self, device: str) -> list[str]:
        """Comment, source and outputs: the lines before the dtype dispatch."""
        what = "applies sine to" if self.element else "copies"
        source = self.plan.source_expr
        into = " and ".join(self.plan.mutated) or (
            "each output" if len(self.outputs) > 1 else "the output"
        )
        lines = [
            f"// Starter body: {what} {source} into {into}, so that the op builds and its",
            "// tests pass. Replace it with your kernel (and the spec's placeholder reference).",
        ]
        q, check = self.op.qualname, self.kind.check
        if self.plan.source_is_list:
            listed = self.p[self.plan.source]
            lines.append(
                f'{check}(!{listed}.empty(), "{q}: {self.plan.source} must not be empty");'
            )
            lines.append(
                f"const {self.kind.tensor} {self.src_tensor} = {self.api.contiguous(listed + '[0]')};"
            )
        for name in self.plan.mutated:
            lines.append(
                f'{check}({self.p[name]}.numel() == {self.src_tensor}.numel(), "{q}: {name} must have as many elements as {source}");'
            )
        allocations = [decl for _, decl in self.outputs if decl]
        if allocations:
            where = "on the input's device" if device == "cuda" else ""
            lines.append(f"// 1. allocate the outputs {where}".rstrip())
            lines += allocations
        return lines

    def switch(self, call: str) -> list[str]:
        """`switch` over the dtypes, calling `call` (a generic lambda) with a value of each element type."""
        types = ELEMENT_TYPES[self.op.cpp_target]
        lines = [f"switch ({self.src_tensor}.scalar_type()) {{  // 3. dispatch on dtype"]
        for dtype in self.dtypes:
            if dtype in types:
                lines += [
                    f"  case {self.api.scalar_type(dtype)}:",
                    f"    {call}({types[dtype]}{{}});",
                    "    break;",
                ]
        lines += [
            "  default:",
            f'    {self.kind.check}(false, "{self.op.qualname}: the kernel has no case for this dtype");',
            "}",
        ]
        return lines

    def epilogue(self) -> list[str]:
        if not self.returned:
            return []
        if len(self.returned) == 1:
            return [f"return {self.returned[0]};"]
        return [f"return std::make_tuple({', '.join(self.returned)});"]


def _cpu(body: _Body) -> tuple[str, ...]:
    v = body.v
    lines = body.prologue("cpu")
    lines += [
        f"const auto {v['kernel']} = [&](auto {v['zero']}) {{",
        f"  using {v['T']} = decltype({v['zero']});",
        f"  const {v['T']}* {v['src']} = {body.src_tensor}.const_data_ptr<{v['T']}>();  // 2. reach the data",
    ]
    for dst, (tensor, _) in zip(body.dsts(), body.outputs, strict=True):
        lines.append(f"  {v['T']}* {dst} = {tensor}.mutable_data_ptr<{v['T']}>();")
    i, begin, end = v["i"], v["begin"], v["end"]
    lines += [
        f"  {body.api.parallel_for}(0, {body.src_tensor}.numel(), 4096, [&](int64_t {begin}, int64_t {end}) {{",
        f"    for (int64_t {i} = {begin}; {i} < {end}; ++{i}) {{",
    ]
    lines += [f"      {dst}[{i}] = {body.value('cpu')};" for dst in body.dsts()]
    lines += ["    }", "  });", "};"]
    return tuple(lines + body.switch(v["kernel"]) + body.epilogue())


def _cuda_kernel(body: _Body, name: str) -> tuple[str, ...]:
    v = body.v
    t, i, n = v["T"], v["i"], v["n"]
    params = ", ".join(
        [f"const {t}* __restrict__ {v['src']}"]
        + [f"{t}* __restrict__ {dst}" for dst in body.dsts()]
        + [f"int64_t {n}"]
    )
    lines = [
        "// Starter kernel: a grid-stride loop, so that any n runs on a capped grid;",
        "// each thread handles elements i, i + stride, ... Replace the loop body.",
        f"template <typename {t}>",
        f"__global__ void {name}({params}) {{",
        "  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;",
        f"  for (int64_t {i} = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; {i} < {n}; {i} += stride) {{",
    ]
    lines += [f"    {dst}[{i}] = {body.value('cuda')};" for dst in body.dsts()]
    return tuple(lines + ["  }", "}"])


def _cuda(body: _Body, name: str, stream: str) -> tuple[str, ...]:
    v = body.v
    n, threads, blocks, error, t = v["n"], v["threads"], v["blocks"], v["error"], v["T"]
    lines = body.prologue("cuda")
    pointers = [f"{body.src_tensor}.const_data_ptr<{t}>()"] + [
        f"{tensor}.mutable_data_ptr<{t}>()" for tensor, _ in body.outputs
    ]
    lines += [
        f"const int64_t {n} = {body.src_tensor}.numel();",
        f"constexpr int {threads} = 256;",
        f"const unsigned {blocks} = {name}_blocks({n}, {threads});",
        f"const auto {v['launch']} = [&](auto {v['zero']}) {{  // 2. reach the data, launch on the current stream",
        f"  using {t} = decltype({v['zero']});",
        f"  {name}<<<{blocks}, {threads}, 0, {stream}>>>({', '.join(pointers)}, {n});",
        "};",
        f"if ({n} > 0) {{",
    ]
    lines += ["  " + line for line in body.switch(v["launch"])]
    check = body.kind.check
    lines += [
        f"  const cudaError_t {error} = cudaGetLastError();",
        f'  {check}({error} == cudaSuccess, "{body.op.qualname}: kernel launch failed: ", cudaGetErrorString({error}));',
        "}",
    ]
    return tuple(lines + body.epilogue())


def cpp_starter(
    op: OpSpec, plan: CopyPlan, element: str, dtypes: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The CPU body, the CUDA kernel and the CUDA body of a C++ op's starter."""
    body = _Body(op, plan, element, dtypes)
    kernel = stub_names(op).cuda_kernel
    stream = local_names(op)["stream"]
    return _cpu(body), _cuda_kernel(body, kernel), _cuda(body, kernel, stream)
