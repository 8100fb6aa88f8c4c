"""What counts as a valid name for a namespace, package, op or argument."""

from __future__ import annotations

import keyword
import re
import sys
import unicodedata

__all__ = [
    "identifier_problem",
    "package_problem",
    "RESERVED_NAMESPACES",
    "RESERVED_OP_NAMES",
    "PACKAGE_MODULES",
    "CPP_KEYWORDS",
    "MAX_NAME_LENGTH",
]

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
    "sparse _test mkl xla vulkan mps "
    # attributes of torch.ops itself: a namespace with one of these names is unreachable
    "load_library loaded_libraries import_module higher_order".split()
)

# Module-level names of a generated op module: an op of the same name would rebind
# them, and the backward (which looks `torch` up at call time) would break. The
# module's own helpers avoid the op's name (Note [Generated names]); the builtins
# here are those the generated autograd.Function calls at call time.
RESERVED_OP_NAMES = frozenset(
    "torch math F Tensor Sequence once_differentiable annotations any len list tuple "
    "_kernels _lib _backward _setup_context".split()
)

# Modules of the generated package that `import <package>.<name>` reaches: the package's
# attribute of an op with the same name would be replaced by the module on that import.
PACKAGE_MODULES = frozenset({"sharding", "sharding_rules"})

# Packages the generated code imports by name: a project package with one of these
# names would shadow it. The standard library is added at call time.
_TAKEN_PACKAGES = frozenset(
    "torch torchgen functorch triton numpy pytest typer jinja2 black opgen setuptools "
    "hypothesis tests ops csrc build".split()
)


def identifier_problem(name: object, what: str) -> str | None:
    """Why `name` cannot be used as a `what`, or None when it can."""
    if not isinstance(name, str):
        return f"{what} must be a string, not {type(name).__name__}"
    if not name:
        return f"{what} is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"{what} is {len(name)} characters long (at most {MAX_NAME_LENGTH})"
    if not name.isascii():
        char = next(c for c in name if not c.isascii())
        label = unicodedata.name(char, "unnamed character")
        return (
            f"{what} {name!r} contains the non-ASCII character {char!r} (U+{ord(char):04X} {label})"
        )
    if not _IDENT.match(name):
        return f"{what} {name!r} is not an identifier (letters, digits and _, not starting with a digit)"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"{what} {name!r} is a Python keyword"
    if name in CPP_KEYWORDS:
        return f"{what} {name!r} is a C++ keyword"
    if name.startswith("__"):
        return f"{what} {name!r} starts with a double underscore, which Python and C++ reserve"
    return None


def package_problem(name: object) -> str | None:
    """Why `name` cannot be the project's Python package, or None."""
    problem = identifier_problem(name, "package")
    if problem:
        return problem
    if name in _TAKEN_PACKAGES or name in sys.stdlib_module_names:
        return f"package {name!r} would shadow the module or folder of the same name that generated code uses"
    return None
