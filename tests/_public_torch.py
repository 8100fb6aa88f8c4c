"""Finds the private torch a Python file touches: statically (`scan`) and while it runs (the
recorder plugin of `RECORDER`).

Private means a name with a `_`-prefixed part under `torch` (`torch._C.X`,
`torch._dynamo`, `torch.utils._pytree`), reached by attribute, by import, or
by `getattr(torch..., "...")` with a literal name. `torch._check*` is public
(documented for fake kernels); `allowed` lists what else a file may use.
"""

from __future__ import annotations

import ast
from collections.abc import Collection

__all__ = ["ALWAYS_ALLOWED", "RECORDER", "is_allowed", "is_private", "scan"]

ALWAYS_ALLOWED = ("torch._check",)  # and every torch._check_* (torch._check_is_size, ...)


def is_private(path: str) -> bool:
    """Whether a dotted torch name has a private part (dunders such as `__version__` are not;
    under `torch.ops` the namespace and the op are the project's names: `ns._roi_align`)."""
    parts = path.split(".")
    if parts[0] != "torch":
        return False
    if parts[1:2] == ["ops"]:
        parts = parts[:2] + parts[4:]
    return any(
        p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts[1:]
    )


def is_allowed(path: str, allowed: Collection[str], *, imported: bool = False) -> bool:
    """`path` is public, a `torch._check*` name, or one of `allowed` (or inside one). An import
    may also name a module on the way to an allowed name (`import torch._dynamo.testing`)."""
    if not is_private(path) or path.startswith("torch._check"):
        return True
    for name in allowed:
        if path == name or path.startswith(name + "."):
            return True
        if imported and name.startswith(path + "."):
            return True
    return False


class _Scan(ast.NodeVisitor):
    def __init__(self, allowed: Collection[str]) -> None:
        self.allowed = allowed
        self.names: dict[str, str] = {}  # local name -> the torch path it stands for
        self.found: list[tuple[int, str]] = []

    def path(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.path(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def report(self, node: ast.AST, path: str, imported: bool = False) -> None:
        if not is_allowed(path, self.allowed, imported=imported):
            self.found.append((getattr(node, "lineno", 0), path))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] != "torch":
                continue
            self.report(node, alias.name, imported=True)
            if alias.asname:
                self.names[alias.asname] = alias.name
            else:
                self.names["torch"] = "torch"

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or module.split(".")[0] != "torch":
            return
        self.report(node, module, imported=True)
        for alias in node.names:
            path = f"{module}.{alias.name}"
            self.report(node, path, imported=True)
            self.names[alias.asname or alias.name] = path

    def visit_Assign(self, node: ast.Assign) -> None:
        path = self.path(node.value)
        if path:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.names[target.id] = path
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        path = self.path(node)
        if path:
            self.report(node, path)  # the whole chain, once: not its inner attributes
            return
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        lookups = ("getattr", "hasattr", "setattr", "delattr")
        if isinstance(func, ast.Name) and func.id in lookups and len(node.args) >= 2:
            owner, name = self.path(node.args[0]), node.args[1]
            if owner and isinstance(name, ast.Constant) and isinstance(name.value, str):
                self.found.append((node.lineno, f'{func.id}({owner}, "{name.value}")'))
        self.generic_visit(node)


def scan(source: str, allowed: Collection[str] = ()) -> list[tuple[int, str]]:
    """(line, name) of each private torch name the source uses that `allowed` does not cover."""
    visitor = _Scan(allowed)
    visitor.visit(ast.parse(source))
    return visitor.found


# A pytest plugin (`-p opgen_private_recorder`, the file on PYTHONPATH) that records each
# private torch name the code under OPGEN_WATCH (folders, os.pathsep-separated) reaches while
# the tests run, and writes them to OPGEN_RECORD as JSON: [file, line, name] per use.
RECORDER = '''
import builtins
import dis
import json
import os
import sys
import types

import torch

_WATCH = tuple(os.path.realpath(p) + os.sep for p in os.environ["OPGEN_WATCH"].split(os.pathsep))
_SEEN = set()


# Only the file's own bytecode counts: an attribute or import statement. torch's C code
# imports and looks up names too, while a frame of the watched file calls it.
_OWN = {dis.opmap[name] for name in ("LOAD_ATTR", "LOAD_METHOD", "IMPORT_NAME", "IMPORT_FROM") if name in dis.opmap}


def _watched(depth):
    frame = sys._getframe(depth + 1)
    name = frame.f_code.co_filename
    if not os.path.isabs(name):  # <frozen importlib._bootstrap>, <string>: not a file
        return None
    if frame.f_code.co_code[frame.f_lasti] not in _OWN:
        return None
    name = os.path.realpath(name)
    return (name, frame.f_lineno) if name.startswith(_WATCH) else None


def _private(part):
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


class _Chain:
    """What a watched file got for `torch.<private name>`: records the next attribute too."""

    def __init__(self, real, path):
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_path", path)

    def __getattr__(self, name):
        where = _watched(1)
        if where:
            _SEEN.add((*where, f"{object.__getattribute__(self, '_path')}.{name}"))
        return getattr(object.__getattribute__(self, "_real"), name)

    def __call__(self, *args, **kwargs):
        return object.__getattribute__(self, "_real")(*args, **kwargs)


class _Torch(types.ModuleType):
    def __getattribute__(self, name):
        value = super().__getattribute__(name)
        if name[:1] == "_" and _private(name):
            where = _watched(1)
            if where:
                _SEEN.add((*where, f"torch.{name}"))
                return _Chain(value, f"torch.{name}")
        return value


torch.__class__ = _Torch
_import = builtins.__import__


def _recording_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and name.split(".")[0] == "torch":
        where = _watched(1)
        if where:
            paths = [name] + [f"{name}.{item}" for item in fromlist or ()]
            for path in paths:
                if any(_private(p) for p in path.split(".")[1:]):
                    _SEEN.add((*where, path))
    return _import(name, globals, locals, fromlist, level)


builtins.__import__ = _recording_import


def pytest_unconfigure(config):
    with open(os.environ["OPGEN_RECORD"], "w") as out:
        json.dump(sorted(_SEEN), out)
'''
