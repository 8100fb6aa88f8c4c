"""What counts as a valid name for a namespace, package, op or argument."""

from __future__ import annotations

import keyword
import re

__all__ = ["identifier_problem", "RESERVED_NAMESPACES", "CPP_KEYWORDS", "MAX_NAME_LENGTH"]

MAX_NAME_LENGTH = 64
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

CPP_KEYWORDS = frozenset(
    """alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
    char16_t char32_t class compl concept const consteval constexpr constinit const_cast
    continue co_await co_return co_yield decltype default delete do double dynamic_cast else
    enum explicit export extern false float for friend goto if inline int long mutable
    namespace new noexcept not not_eq nullptr operator or or_eq private protected public
    register reinterpret_cast requires return short signed sizeof static static_assert
    static_cast struct switch template this thread_local throw true try typedef typeid
    typename union unsigned using virtual void volatile wchar_t while xor xor_eq""".split()
)

# Namespaces PyTorch itself owns; registering into them clobbers built-in ops.
RESERVED_NAMESPACES = frozenset(
    "aten prim prims torch c10 at std quantized _quantized cuda cudnn mkldnn onednn "
    "inductor higher_order _c10d_functional _dtensor profiler rngprims debugprims "
    "sparse _test mkl xla vulkan mps".split()
)


def identifier_problem(name: object, what: str) -> str | None:
    """Why `name` cannot be used as a `what`, or None when it can."""
    if not isinstance(name, str) or not name:
        return f"{what} is empty"
    if not name.isascii():
        return f"{what} {name!r} contains non-ASCII characters"
    if len(name) > MAX_NAME_LENGTH:
        return f"{what} is {len(name)} characters long (at most {MAX_NAME_LENGTH})"
    if not _IDENT.match(name):
        return f"{what} {name!r} is not an identifier (letters, digits and _, not starting with a digit)"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"{what} {name!r} is a Python keyword"
    if name in CPP_KEYWORDS:
        return f"{what} {name!r} is a C++ keyword"
    if name.startswith("__"):
        return f"{what} {name!r} starts with a double underscore, which Python and C++ reserve"
    return None
