"""Which names `torch.`, `F.` and `math.` have, read from the installed torch's files without importing it.

Note [Torch names in expressions]
A typo in a formula (`F.silu2`, `torch.sinn`) would pass `opgen generate` and
fail only when a test runs it, at a line of a generated file. So when a spec
is validated (not restored from the cache), each attribute chain that starts
at `torch`, `F` or `math` is looked up: `math` in the module itself, torch's
namespaces first in the installed torch's sources and stubs, searched as text
for the name's definition (importing torch costs seconds; reading the files a
few milliseconds, once per run):
  * torch: `torch/__init__.py`, what it re-exports from `torch._C`
    (`_C/__init__.pyi`, `_C/_VariableFunctions.pyi`) and `torch/functional.py`,
    and its submodules (files and folders);
  * `torch.nn.functional` (F), `torch.linalg`, `torch.special`, `torch.fft`:
    their own files.
A name the scan does not find is looked up in torch itself (imported then,
and only then: the stubs miss a few names made in C++, such as
`torch.uint4`), so a name torch has is never refused, and the error names
the closest one torch has. Chains into any other namespace
(`torch.distributions.Normal`), and everything when torch is not installed,
are not checked.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import math
import re
from pathlib import Path

__all__ = ["unknown_attribute"]

# module -> its files (relative to torch's folder) whose top-level names it has
_MODULES = {
    "torch": (
        "__init__.py",
        "_C/_VariableFunctions.pyi",
        "_C/__init__.pyi",
        "functional.py",
    ),
    "torch.nn.functional": ("nn/functional.py", "nn/functional.pyi"),
    "torch.linalg": ("linalg/__init__.py",),
    "torch.special": ("special/__init__.py",),
    "torch.fft": ("fft/__init__.py",),
}
_ROOTS = {"torch": "torch", "F": "torch.nn.functional", "math": "math"}
# how a file defines or re-exports `{n}`, as plain text: substring tests cost little even on the
# 1 MB of _VariableFunctions.pyi, where a regular expression costs tens of milliseconds
_DEF_OR_CLASS = re.compile(rb"\n(?:def|class) ([A-Za-z]\w*)")
_FORMS = (
    "\n    def {n}(",
    "\n{n} =",
    "\n{n}:",
    "\n    {n} =",
    "\n    {n}:",
    "\n    {n},",
    "import {n}\n",
    "import {n},",
    " as {n}\n",
    " as {n},",
    " as {n} ",
    ", {n}\n",
    ", {n},",
    ", {n} ",
    '"{n}"',
    "'{n}'",
)


@functools.cache
def _torch_dir() -> Path | None:
    spec = importlib.util.find_spec("torch")  # finds torch without importing it
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


@functools.cache
def _texts(module: str) -> tuple[bytes, ...] | None:
    """The bytes of the files that define `module`'s names, or None when they cannot be read."""
    folder = _torch_dir()
    if folder is None or module not in _MODULES:
        return None
    try:
        texts = tuple(
            b"\n" + (folder / rel).read_bytes()
            for rel in _MODULES[module]
            if (folder / rel).is_file()
        )
    except OSError:
        return None
    return texts or None


@functools.cache
def _defined(module: str) -> frozenset[bytes]:
    """The functions and classes `module`'s files define at the top: a regular expression that
    starts with a long literal is fast even on 1 MB of stubs."""
    return frozenset(name for text in _texts(module) or () for name in _DEF_OR_CLASS.findall(text))


def _scanned(module: str, name: str) -> bool | None:
    """Whether the files of `module` define `name`; None when they cannot be read."""
    if module == "math":
        return hasattr(math, name)
    texts = _texts(module)
    if texts is None:
        return None
    if name.encode() in _defined(module):
        return True
    forms = [form.format(n=name).encode() for form in _FORMS]
    if any(form in text for text in texts for form in forms):
        return True
    folder = _torch_dir()  # a submodule: an attribute once imported
    return (
        module == "torch"
        and folder is not None
        and ((folder / name / "__init__.py").is_file() or (folder / f"{name}.py").is_file())
    )


@functools.cache
def _imported(module: str) -> object | None:
    """The module itself: imported only for a name the scan did not find."""
    try:
        return importlib.import_module(module)
    except Exception:  # noqa: BLE001 (an unimportable torch: the name cannot be checked)
        return None


def _has(module: str, name: str) -> bool:
    """Whether `module` has `name`; True when that cannot be known (no check, no error)."""
    if module == "math":
        return hasattr(math, name)
    found = _imported(module)
    return found is None or hasattr(found, name)


def _public(module: str) -> list[str]:
    """The names to suggest from (the module is imported by then: the name was not found)."""
    found = _imported(module) if module != "math" else math
    return sorted(n for n in dir(found) if not n.startswith("_")) if found is not None else []


def _version() -> str:
    folder = _torch_dir()
    try:
        text = (folder / "version.py").read_text(encoding="utf-8") if folder else ""
    except OSError:
        text = ""
    found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
    return f"torch {found.group(1)}" if found else "the installed torch"


def unknown_attribute(chain: list[str], root: str) -> tuple[str, str] | None:
    """For `root.a.b...` (`chain` = [root, a, b, ...]): the message and hint when a part is a name
    its namespace does not have (Note [Torch names in expressions]); None when known or unknowable.
    """
    module = _ROOTS[root]
    written = root
    for part in chain[1:]:
        if module == "torch.nn" and part == "functional":
            module, written = "torch.nn.functional", f"{written}.functional"
            continue
        found = _scanned(module, part)
        if found is None:
            return None
        if not found and not _has(module, part):
            close = difflib.get_close_matches(part, _public(module), n=1)
            where = _version() if module != "math" else "Python's math module"
            return (
                f"uses {written}.{part}, which {where} does not have",
                (
                    f"did you mean {written}.{close[0]}?"
                    if close
                    else f"check the name against the documentation of {module}"
                ),
            )
        written += f".{part}"
        module = f"{module}.{part}"
        if module not in _MODULES and module != "torch.nn":  # torch.nn: only .functional is read
            return None
    return None
