"""Names in generated code that cannot collide with the op's argument names.

Note [Generated names]
An argument may have any name torch accepts (Python keywords aside): `ctx`,
`grad`, `torch`, `type`, `input`, `_kernel`, `EOF`, `NULL`, `x` next to `x_c`;
the op may be called `RuntimeError`. Generated code stays valid because:
- Python: every function that takes the op's arguments as parameters (the
  typed wrapper, the fake, the custom_op bridge) refers only to module-level
  names opgen picks to differ from every argument (`Namer`), never to
  `torch` or a builtin by its own name; module-level code that runs after the
  op's function is defined calls no builtin the op's name shadows (helpers
  live in `<package>/_runtime.py`);
- autograd: `api/autograd.py` renames each argument inside setup_context and
  backward where it would shadow a name the generated lines use;
- C++: a parameter whose name is a keyword, a macro (`EOF`, `NULL`, `errno`, or
  any ALL-CAPS name), a name the generated code uses (`std`, `at`, `c10`,
  `torch`, `int64_t`, ...) or a reserved identifier (`__x`, `_X`) is renamed in
  the C++ signature only (`EOF_`); the registered schema keeps the user's name.
  Locals of the kernel stubs (`x_c`, `stream`, ...) are picked the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..spec.model import OpSpec
from ..spec.names import CPP_KEYWORDS

__all__ = ["Namer", "cpp_safe", "cpp_parameter_names", "kernel_raise"]


class Namer:
    """Hands out names that differ from `taken` and from each other: `name`, `name_`, `name__`..."""

    def __init__(self, taken: Iterable[str]) -> None:
        self.taken = set(taken)

    def __call__(self, preferred: str) -> str:
        name = preferred
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name


# Names generated C++ refers to unqualified, or that headers define as macros.
_CPP_USED = frozenset(
    "std at c10 torch cuda int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t "
    "size_t ptrdiff_t cudaStream_t cudaError_t cudaSuccess cudaGetLastError cudaGetErrorString "
    "aoti_torch_get_current_cuda_stream blockIdx blockDim threadIdx gridDim warpSize dim3 "
    "errno stdin stdout stderr assert offsetof signbit isnan isinf isfinite".split()
)
_MACRO_LIKE = re.compile(r"[A-Z][A-Z0-9_]*\Z")
_RESERVED = re.compile(r"_[A-Z]|.*__")


def _cpp_unsafe(name: str) -> bool:
    return (
        name in CPP_KEYWORDS
        or name in _CPP_USED
        or bool(_MACRO_LIKE.match(name))
        or bool(_RESERVED.match(name))
    )


def _cpp_spelling(name: str) -> str:
    """A safe C++ spelling of an unsafe name: `EOF` -> `EOF_`, `__x__` -> `arg_x_`."""
    if _RESERVED.match(name):
        return "arg_" + re.sub("_+", "_", name).strip("_") + "_"
    return name + "_"


def cpp_safe(name: str) -> str:
    """`name`, or its safe C++ spelling when it is a keyword, macro or reserved identifier."""
    return _cpp_spelling(name) if _cpp_unsafe(name) else name


def cpp_parameter_names(op: OpSpec) -> dict[str, str]:
    """Argument name -> its name in the C++ kernels (Note [Generated names])."""
    return cpp_names([a.name for a in op.args])


def cpp_names(args: Sequence[str]) -> dict[str, str]:
    """Schema argument name -> its C++ name, for the arguments `args` of one op."""
    namer = Namer(set(args))
    return {name: namer(_cpp_spelling(name)) if _cpp_unsafe(name) else name for name in args}


def kernel_raise(op: OpSpec, kernel_file: str) -> tuple[str, str]:
    """What a Python kernel stub raises, and how its message names the file: NotImplementedError
    and `{__file__}`, unless a parameter or the op shadows one (then another exception, or the path).
    """
    shadowed = {a.name for a in op.args} | {op.name, op.module}
    candidates = ("NotImplementedError", "RuntimeError", "ValueError", "Exception")
    exception = next(n for n in candidates if n not in shadowed)
    return exception, "{__file__}" if "__file__" not in shadowed else kernel_file
