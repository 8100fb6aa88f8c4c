"""How an imported op keeps the user's kernels: the first text of its kernel files.

Note [Keeping kernels]
C++: the user's source files stay where they are. For each file that defines
a registered kernel, `opgen import` writes one small translation unit under
`csrc/cpu/imported/` that `#include`s it, so `opgen build` compiles it (every
file under `csrc/cpu/` is compiled). Two macros make that safe without
editing the user's file: the registration macros are redefined to unused
functions (the spec registers the ops now, and a second TORCH_LIBRARY for a
namespace fails at load), and each kernel is renamed to `opgen_user_<name>`
(the user's `mymuladd_cpu` is often exactly the name of opgen's own kernel).
The op's kernel file `csrc/cpu/<op>.cpp`, the user's to edit from then on,
declares the renamed function with the signature the user wrote (read by
cpp_reader.py) and calls it. A kernel that other files cannot call (static,
or in an anonymous namespace) is reported with the fix.

Python: the user's modules are never imported (they register the same ops),
so each kernel function's text is copied into the op's kernel file
`<package>/kernels/<op>.py` with the module's imports; the fake and autograd
functions stay where they are and the spec names them in a comment.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..api.names import cpp_names
from ..errors import Diagnostic
from ..spec.model import Backend
from ..targets.cpp import IMPORTED_DIR
from ..targets.cpp import kernel_path as cpp_kernel_path
from ..targets.python import kernel_imports
from .found import CppFunction, FoundOp, Kernel

__all__ = ["CppKernels", "cpp_kernels", "python_kernel", "KERNEL_KEEPERS", "IMPORTED_DIR"]

RENAMED = "opgen_user_"
_PYTHON_KERNEL_IMPORTS = {
    "from __future__ import annotations",
    "import torch",
    "from torch import Tensor",
    "from collections.abc import Sequence",
}

# included before the renames below, so that torch's own names stay as they are
_HEADERS = {
    "classic": "#include <torch/all.h>\n#include <torch/library.h>",
    "stable": "#include <torch/csrc/stable/library.h>\n#include <torch/csrc/stable/ops.h>",
}
_STABLE = """\
#undef STABLE_TORCH_LIBRARY
#undef STABLE_TORCH_LIBRARY_FRAGMENT
#undef STABLE_TORCH_LIBRARY_IMPL
#define STABLE_TORCH_LIBRARY(ns, m)                                     \\
  [[maybe_unused]] static void OPGEN_UNREGISTERED(__COUNTER__)( \\
      torch::stable::detail::StableLibrary & m)
#define STABLE_TORCH_LIBRARY_FRAGMENT(ns, m) STABLE_TORCH_LIBRARY(ns, m)
#define STABLE_TORCH_LIBRARY_IMPL(ns, k, m) STABLE_TORCH_LIBRARY(ns, m)
"""
_UNIT = """\
// Compiles {shown} into this library for the kernels it defines.
//
// `opgen import` wrote this file; it is yours. Your file's own registration
// blocks are switched off here: the specs in ops/ register the ops now, and a
// second TORCH_LIBRARY for a namespace fails when the library loads. Each kernel
// is renamed to {renamed}<name>: csrc/cpu/<op>.cpp calls it under that name.
// Python bindings in your file (a PyInit_ stub, a PYBIND11_MODULE) compile with
// Python's headers and are left out of the library when it links.
{headers}

#undef TORCH_LIBRARY
#undef TORCH_LIBRARY_FRAGMENT
#undef TORCH_LIBRARY_IMPL
#define OPGEN_UNREGISTERED_(n) opgen_unregistered_##n
#define OPGEN_UNREGISTERED(n) OPGEN_UNREGISTERED_(n)
#define TORCH_LIBRARY(ns, m) \\
  [[maybe_unused]] static void OPGEN_UNREGISTERED(__COUNTER__)(torch::Library & m)
#define TORCH_LIBRARY_FRAGMENT(ns, m) TORCH_LIBRARY(ns, m)
#define TORCH_LIBRARY_IMPL(ns, k, m) TORCH_LIBRARY(ns, m)
{stable}
{renames}
#include "{include}"
"""


@dataclass
class CppKernels:
    """The files an import writes for C++ kernels, and the template variables of each op's kernel file."""

    units: dict[str, str]  # project-relative path -> text of a translation unit
    first: dict[str, dict[str, object]]  # kernel file -> template variables
    included: tuple[Path, ...] = ()  # the user's files the units compile


def _unit_path(root: Path, source: Path) -> str:
    """`csrc/cpu/imported/<the source's path, relative to the project, as one name>.cpp`."""
    parts = [
        p for p in Path(os.path.relpath(source.resolve(), root)).with_suffix("").parts if p != ".."
    ]
    name = re.sub(r"\W", "_", "_".join(parts)).strip("_")
    return f"{IMPORTED_DIR}/{name}.cpp"


def _find(kernel: Kernel, functions: list[CppFunction]) -> list[CppFunction]:
    wanted = kernel.function.lstrip(":")
    if "::" in wanted:
        return [f for f in functions if f.qualname == wanted]
    return [f for f in functions if f.name == wanted]


def cpp_kernels(
    root: Path,
    ops: list[tuple[FoundOp, str, list[tuple[str, str]]]],
    target: str,
    functions: list[CppFunction],
    problems: list[Diagnostic],
) -> CppKernels:
    """Units and kernel-file variables for `ops`: (op, its module name, its schema's arguments as
    (name, type family)), built for the C++ API `target` ("classic" or "stable")."""
    renamed: dict[Path, set[str]] = {}
    first: dict[str, dict[str, object]] = {}
    for op, module, args in ops:
        kernel = next((k for k in op.kernels if k.device == "cpu"), None)
        if kernel is None:
            continue
        candidates = _find(kernel, functions)
        # the project's csrc/cpu and csrc/cuda are opgen's: they are never read as the user's
        hint = (
            "pass the file that defines it to `opgen import` too (if it is under this project's "
            "csrc/cpu or csrc/cuda, which are opgen's, import into another folder: --into DIR)"
        )
        if len(candidates) != 1:
            many = "several functions are" if candidates else "no function is"
            problems.append(
                Diagnostic(
                    kernel.path,
                    kernel.line,
                    f"{many} named {kernel.function} in the files read: {op.qualname} gets a placeholder kernel",
                    hint if not candidates else "register it by its qualified name (ns::name)",
                )
            )
            continue
        function = candidates[0]
        if not function.linkable:
            problems.append(
                Diagnostic(
                    function.path,
                    function.line,
                    f"{function.name} is static or in an anonymous namespace: generated code cannot call it; "
                    f"{op.qualname} gets a placeholder kernel",
                    "make it a plain function in a named namespace, then run `opgen import` again",
                )
            )
            continue
        renamed.setdefault(function.path, set()).add(function.name)
        declaration = re.sub(
            rf"\b{re.escape(function.name)}(\s*\()",
            rf"{RENAMED}{function.name}\1",
            function.declaration.replace("static ", "").replace("inline ", ""),
            count=1,
        ).strip()
        if function.namespace:
            declaration = f"namespace {function.namespace} {{\n{declaration};\n}}  // namespace {function.namespace}"
        else:
            declaration += ";"
        if target == "classic" and "torch::" in function.declaration:
            # torch::Tensor and friends: the op's header declares only at:: types
            declaration = f"#include <torch/all.h>\n\n{declaration}"
        names = list(cpp_names([name for name, _ in args]).values())
        params = _parameters(function)
        copies = []
        if len(params) == len(names):
            for index, (name, param) in enumerate(zip(names, params, strict=True)):
                if args[index][1] == "SymInt" and "SymInt" not in param:
                    names[index] = f"{name}.expect_int()"  # the user's kernel takes an int64_t
                elif _mutable_reference(param):
                    # the user's kernel takes a non-const reference: hand it a copy of the
                    # handle (a tensor copy shares its storage, so writes still land)
                    copies.append(f"auto {name}_arg = {name};")
                    names[index] = f"{name}_arg"
        call_args = ", ".join(names)
        scope = f"::{function.namespace}::" if function.namespace else "::"
        call = f"{scope}{RENAMED}{function.name}({call_args})"
        where = f"{os.path.relpath(function.path, root)}:{function.line}"
        body = [
            *copies,
            f"// your kernel {function.qualname} ({where}); `opgen import` found it registered",
            f"{'return ' if not _returns_void(function) else ''}{call};",
        ]
        first[cpp_kernel_path(module, "cpu")] = {
            "imported": {"declaration": declaration},
            "starter": body,
        }
    units = {}
    for source, kernels in sorted(renamed.items()):
        include = os.path.relpath(source.resolve(), (root / IMPORTED_DIR).resolve())
        renames = "\n".join(f"#define {n} {RENAMED}{n}" for n in sorted(kernels))
        units[_unit_path(root, source)] = _UNIT.format(
            shown=os.path.relpath(source.resolve(), root),
            renamed=RENAMED,
            renames=renames,
            include=Path(include).as_posix(),
            headers=_HEADERS[target],
            stable=_STABLE if target == "stable" else "",
        )
    return CppKernels(units, first, tuple(sorted(renamed)))


def _parameters(function: CppFunction) -> list[str]:
    """The parameters of the function's declaration, as written."""
    text = function.declaration
    inner = text[text.index("(", text.index(function.name)) + 1 : text.rindex(")")]
    params, depth, current = [], 0, ""
    for ch in inner:
        depth += ch in "(<[{"
        depth -= ch in ")>]}"
        if ch == "," and depth == 0:
            params.append(current.strip())
            current = ""
        else:
            current += ch
    return [p for p in [*params, current.strip()] if p and p != "void"]


def _mutable_reference(param: str) -> bool:
    words = re.sub(r"/\*.*?\*/|//[^\n]*", " ", param)
    return "&" in words and not re.search(r"\bconst\b", words)


def _returns_void(function: CppFunction) -> bool:
    head = function.declaration.split(function.name + "(", 1)[0].split()
    return head[-1:] == ["void"] if head else False


def python_kernel(
    op: FoundOp, args: list[str], problems: list[Diagnostic]
) -> dict[str, object] | None:
    """The template variables of an imported Python op's kernel file: the user's function, moved."""
    function = op.python_kernels.get("cpu") or next(iter(op.python_kernels.values()), None)
    if function is None:
        return None
    node = ast.parse(function.source).body[0]
    assert isinstance(node, ast.FunctionDef)
    lines = function.source.splitlines()
    body_start = node.body[0].lineno - 1
    if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
        body_start = (
            node.body[0].end_lineno or body_start
        )  # its docstring describes the old function
    indent = len(lines[node.body[0].lineno - 1]) - len(lines[node.body[0].lineno - 1].lstrip())
    body = [line[indent:] for line in lines[body_start:]] or ["pass"]
    where = f"{function.path.name}:{function.line}"
    head = [f"# your kernel {function.name} ({where}), moved here by `opgen import`"]
    if list(function.params) != args:
        if len(function.params) != len(args):
            problems.append(
                Diagnostic(
                    function.path,
                    function.line,
                    f"{function.name} does not take the arguments of {op.qualname}'s schema",
                    "make its parameters match the schema",
                )
            )
            return None
        head.append(f"{', '.join(function.params)} = {', '.join(args)}")
    if function.helpers:
        problems.append(
            Diagnostic(
                function.path,
                function.line,
                f"{function.name} uses {', '.join(function.helpers)}, defined in "
                f"{function.path.name}: the kernel moved without them",
                f"copy them into the kernel file of {op.qualname} (<package>/kernels/), "
                "then run `opgen test`",
                "warning",
            )
        )
    imports = [i for i in function.imports if i.strip() not in _PYTHON_KERNEL_IMPORTS]
    # the stub's own imports come from its signatures; the moved body may need them too
    used = {key: True for key, value in kernel_imports([], body).items() if value}
    return {"imported": {"imports": imports}, "starter": head + body, **used}


# what the Triton kernel file's template imports itself
_TRITON_KERNEL_IMPORTS = {
    "from __future__ import annotations",  # Triton reads the kernels' annotations
    "import torch",
    "import triton",
    "import triton.language as tl",
    "from torch import Tensor",
}


def _module_functions(path: Path, names: set[str]) -> list[str]:
    """The source of the module-level functions `names` of `path` and of those they use,
    decorators included (a `@triton.jit` kernel is its decorator), in file order."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    nodes = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    wanted, todo = set(), [n for n in names if n in nodes]
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        used = {n.id for n in ast.walk(nodes[name]) if isinstance(n, ast.Name)}
        todo += [n for n in used if n in nodes and n not in wanted]
    lines = source.splitlines()
    out: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in wanted:
            start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
            out += ([""] * 2 if out else []) + lines[start : node.end_lineno]
    return out


def triton_kernel(
    op: FoundOp, args: list[str], problems: list[Diagnostic]
) -> dict[str, object] | None:
    """The template variables of an imported Triton op's kernel file: the op's function becomes
    the launcher's body, after the module's functions it uses (its `@triton.jit` kernels)."""
    found: list[Diagnostic] = []
    moved = python_kernel(op, args, found)
    # python_kernel warns that the function's helpers stay behind: here they move with it
    problems += [p for p in found if "the kernel moved without them" not in p.message]
    if moved is None:
        return None
    function = op.python_kernels.get("cpu") or next(iter(op.python_kernels.values()))
    kernel = _module_functions(function.path, set(function.helpers))
    imports = [i for i in function.imports if i.strip() not in _TRITON_KERNEL_IMPORTS]
    starter = moved["starter"]
    return {"imported": {"imports": imports}, "starter": {"kernel": kernel, "body": starter}}


def _kept_with_their_units(
    op: FoundOp, args: list[str], problems: list[Diagnostic]
) -> dict[str, object] | None:
    """A C++ op's kernels are kept by `cpp_kernels`, all together: they share translation units."""
    return None


# The first text of an imported op's kernel module, per backend (Note [Backend table] in
# spec/backends.py): its variables, or None where the module starts as the stub.
KernelKeeper = Callable[[FoundOp, list[str], list[Diagnostic]], "dict[str, object] | None"]
KERNEL_KEEPERS: Mapping[Backend, KernelKeeper] = {
    Backend.PYTHON: python_kernel,
    Backend.CPP: _kept_with_their_units,
    Backend.TRITON: triton_kernel,
}
