"""`opgen import` as a library call: read an existing extension, write one spec per op, generate.

Nothing of the user's is edited or run: C++ is tokenized (Note [Reading
registrations]), Python is parsed (Note [Reading Python registrations]), and
the kernels are kept as Note [Keeping kernels] says. Every file written goes
to generate's writer with the generated files, so a failing import writes
nothing; a re-run writes nothing new; a spec already on disk with other text
stops the run unless `force`. A registration the readers cannot use (a schema
that is not a string literal, a kernel that cannot be called) is reported
with its file:line and that op (or kernel) is skipped: the rest is imported,
and the command exits 1 so that nobody misses it.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Diagnostic, OpgenError
from ..generate import GenerateResult, generate
from ..project.load import OPS_DIR, find_root
from ..scaffold.texts import _PROJECT_TEMPLATE, _custom_spec
from ..spec.backends import DEFAULT_BACKEND, backend_traits, for_backend
from ..spec.config import CONFIG_FILE
from ..spec.names import RESERVED_NAMESPACES, identifier_problem, package_problem
from ..targets.python import kernel_path as python_kernel_path
from ..write.confined import Confined
from .found import Found, FoundOp
from .kernels import KERNEL_KEEPERS, cpp_kernels
from .read import read_sources, source_files

__all__ = ["ImportResult", "import_extension"]

_OPGEN_FOLDERS = ("csrc/cpu", "csrc/cuda", OPS_DIR, "tests", "build", ".opgen")


@dataclass
class ImportResult:
    """The project the ops went into, their specs, the generate run that wrote them, and what was
    reported while reading (a skipped op or kernel is an error)."""

    root: Path
    specs: list[str]  # project-relative, one per op imported
    generated: GenerateResult
    problems: list[Diagnostic] = field(default_factory=list)
    builds_cpp: bool = False  # an op imported is a C++ op: `opgen test` builds first

    @property
    def failed(self) -> bool:
        """Something was skipped (an error was reported): the command exits 1."""
        return any(p.level == "error" for p in self.problems)


def _namespace(ops: list[FoundOp], wanted: str | None, existing: str | None) -> str:
    namespaces = collections.Counter(op.namespace for op in ops)
    namespace = wanted or existing or namespaces.most_common(1)[0][0]
    problem = identifier_problem(namespace, "namespace")
    if problem is None and (namespace in RESERVED_NAMESPACES or namespace.startswith("_")):
        problem = f"namespace {namespace!r} is reserved by PyTorch"
    if problem is None and namespace.isupper():
        problem = f"the ops' namespace is {namespace}, a macro opgen cannot expand"
    others = sorted(set(namespaces) - {namespace})
    if problem is None and others and wanted is None:
        problem = f"the ops are in namespace {', '.join(others)}, the project in {namespace!r}"
    if problem:
        raise OpgenError(
            Diagnostic(
                None,
                None,
                problem,
                "choose the namespace the ops get: opgen import --namespace mylib ...",
            )
        )
    return namespace


def import_extension(
    cwd: Path,
    paths: Sequence[Path],
    into: Path | None = None,
    force: bool = False,
    namespace: str | None = None,
) -> ImportResult:
    """Import the ops that `paths` (files or folders) register into the project at `into`, or the
    one `cwd` is in, or a new one in `cwd`. Raises OpgenError, writing nothing, when it cannot."""
    root, made = _into(cwd, into) if into is not None else (None, None)
    root = root or find_root(cwd) or cwd.resolve()
    try:
        result = _import(root, cwd, paths, force, namespace)
    except BaseException:
        if made is not None:
            made.remove_created_folders()
        raise
    if made is not None and not result.generated.written:
        made.remove_created_folders()
    return result


def _into(cwd: Path, into: Path) -> tuple[Path, Confined]:
    """The `--into` folder, made where missing through the confined path (Note [Confined
    writes]), and the `Confined` that made it (it removes what it made if the import fails).

    The path is taken as written (`..` is not resolved through a symlink): walked from the
    current folder when it lies inside it, otherwise from its parent. A symlink on the way, or
    in its place, is refused like any other in a project: a checkout could hold
    `into -> /elsewhere`.
    """
    target = Path(os.path.normpath(cwd / into))
    base = cwd if target.is_relative_to(cwd) else target.parent
    confined = Confined(base)
    rel = target.relative_to(base)
    confined.mkdir(rel)
    return confined.root.joinpath(*confined.parts(rel)), confined


def _import(
    root: Path, cwd: Path, paths: Sequence[Path], force: bool, namespace: str | None
) -> ImportResult:
    from ..spec.config import build_config
    from ..spec.dialect.parser import parse
    from ..spec.load import load_toml

    existing = (
        build_config(load_toml(root / CONFIG_FILE)) if (root / CONFIG_FILE).is_file() else None
    )
    skip = [root / f for f in _OPGEN_FOLDERS] + ([root / existing.package] if existing else [])
    problems: list[Diagnostic] = []
    found = read_sources(source_files(cwd, paths, skip), problems)
    ops = _parsable_ops(found.ops, problems)
    namespace = _namespace(ops, namespace, existing.namespace if existing else None)
    compiled = [op.language for op in ops if backend_traits(op.language).compiles_cpp]
    backend = compiled[0] if compiled else DEFAULT_BACKEND
    target = found.target or "stable"
    if existing is not None and compiled:
        _check_cpp_target(root, existing.cpp_target, target)
    package = existing.package if existing else _package(root, namespace)
    sources: dict[str, str] = {}
    if existing is None:
        sources[CONFIG_FILE] = _PROJECT_TEMPLATE.format(
            namespace=namespace, package=package, backend=backend
        ).replace('cpp_target = "stable"', f'cpp_target = "{target}"')
    cpp_ops = []
    first: dict[str, dict[str, object]] = {}
    specs = []
    for op in ops:
        op.namespace = namespace
        module = op.name.replace(".", "_")
        args = [(a.name, a.type.family) for a in parse(op.schema).args]
        devices = _devices(op)
        spec = f"{OPS_DIR}/{module}.toml"
        sources[spec] = _spec_text(root, spec, op, devices, force)
        specs.append(spec)
        if backend_traits(op.language).compiles_cpp:
            cpp_ops.append((op, module, args))
            if "cuda" in devices:
                problems.append(_cuda_kernel_not_kept(op, module))
        keep = for_backend(KERNEL_KEEPERS, op.language, "kernel keeper in adopt/kernels.py")
        variables = keep(op, [name for name, _ in args], problems)
        if variables is not None:
            first[python_kernel_path(package, module)] = variables
    kept = cpp_kernels(root, cpp_ops, target, found.functions, problems)
    problems += _bindings_left_out(found, kept.included, package)
    first.update(kept.first)
    for unit, text in kept.units.items():
        if not (root / unit).exists():  # the user's from its first run on
            sources[unit] = text
    root.mkdir(parents=True, exist_ok=True)  # no --into: the current folder or its project
    result = generate(root, sources=sources, replace_sources=force, first=first)
    return ImportResult(root, specs, result, problems, builds_cpp=bool(compiled))


def _parsable_ops(found: list[FoundOp], problems: list[Diagnostic]) -> list[FoundOp]:
    """The ops whose schema parses; each other one is reported and skipped. None left stops the
    import."""
    from ..spec.dialect.parser import SchemaError, parse

    ops = []
    for op in found:
        try:
            parse(op.schema)
        except SchemaError as exc:
            problems.append(
                Diagnostic(
                    op.path,
                    op.line,
                    f"{op.qualname}: {exc.message}",
                    "fix the schema; this op was skipped",
                )
            )
            continue
        ops.append(op)
    if not ops:
        raise OpgenError(
            problems
            or [
                Diagnostic(
                    None,
                    None,
                    "no op registrations found",
                    "pass the C++ files with TORCH_LIBRARY blocks or the Python modules with custom_op",
                )
            ]
        )
    return ops


def _check_cpp_target(root: Path, project: str, target: str) -> None:
    """An extension's C++ goes only into a project that builds against the same C++ API."""
    if project != target:
        raise OpgenError(
            Diagnostic(
                root / CONFIG_FILE,
                None,
                f"the extension's C++ uses the {target} API, this project builds {project}",
                f'set cpp_target = "{target}" in {CONFIG_FILE}, or import into another project with --into',
            )
        )


def _devices(op: FoundOp) -> list[str]:
    """The devices an imported op's spec lists: those it has kernels for (CPU where none)."""
    traits = backend_traits(op.language)
    if traits.uses_triton:  # tested on CUDA, and on CPU under Triton's interpreter
        return list(traits.default_devices)
    return sorted({k.device for k in op.kernels} | set(op.python_kernels)) or ["cpu"]


def _spec_text(root: Path, spec: str, op: FoundOp, devices: list[str], force: bool) -> str:
    """The spec `opgen import` writes for `op`; one already on disk with other text stops the
    import unless `force`."""
    text = _custom_spec(
        op.qualname,
        op.schema,
        devices,
        op.language,
        _doc(op, root),
        _notes(op, root),
    )
    if (root / spec).is_file() and not force and (root / spec).read_text(encoding="utf-8") != text:
        raise OpgenError(
            Diagnostic(
                root / spec,
                None,
                f"{op.qualname} already has a spec, which differs from the one `opgen import` writes",
                "keep yours, or replace it: opgen import --force",
            )
        )
    return text


def _cuda_kernel_not_kept(op: FoundOp, module: str) -> Diagnostic:
    """A C++ op's CUDA kernel is not moved: its .cu file starts as a placeholder."""
    cuda = next(k for k in op.kernels if k.device == "cuda")
    return Diagnostic(
        cuda.path,
        cuda.line,
        f"{op.qualname}'s CUDA kernel {cuda.function} is not kept: csrc/cuda/{module}.cu starts as a placeholder",
        f"move the body of {cuda.function} into csrc/cuda/{module}.cu",
    )


def _bindings_left_out(found: Found, included: tuple[Path, ...], package: str) -> list[Diagnostic]:
    """A note per Python binding of a file the build compiles: it is left out of the library
    (Note [Python bindings of imported files] in build/ninja.py)."""
    notes = []
    for path, line, what in found.python_bindings:
        if path not in included:
            continue
        module = what.startswith("PYBIND11_MODULE")
        notes.append(
            Diagnostic(
                path,
                line,
                f"{what} ({'a pybind11 module' if module else 'a Python module stub'}) is left out "
                "of the library opgen builds: that library is loaded by torch, and the specs "
                "register the ops",
                f"import {package} to load the ops (not the extension's own _C module)"
                + (
                    "; for plain functions that bypass the dispatcher, set pybind = true "
                    "(classic target)"
                    if module
                    else ""
                ),
                "note",
            )
        )
    return notes


def _package(root: Path, namespace: str) -> str:
    """The new project's package: the namespace, unless a module would shadow it or a folder
    of that name is there already (often the extension's own package)."""
    for package in (namespace, f"{namespace}_ops"):
        if package_problem(package) is None and not (root / package).exists():
            return package
    raise OpgenError(
        Diagnostic(
            root / f"{namespace}_ops",
            None,
            "the folder opgen would put the generated package in is taken",
            "import into another folder: --into DIR",
        )
    )


def _where(op: FoundOp, root: Path, path: Path, line: int) -> str:
    try:
        shown = path.resolve().relative_to(root).as_posix()
    except ValueError:
        shown = path.as_posix()
    return f"{shown}:{line}"


def _doc(op: FoundOp, root: Path) -> str:
    return f"Imported from {_where(op, root, op.path, op.line)} by `opgen import`: describe {op.name} here."


def _notes(op: FoundOp, root: Path) -> list[str]:
    notes = [
        f"kernel ({k.device}): {k.function} ({_where(op, root, k.path, k.line)})"
        for k in op.kernels
    ]
    notes += [
        f"kernel ({d}): {f.name} ({_where(op, root, f.path, f.line)})"
        for d, f in sorted(op.python_kernels.items())
    ]
    if op.fake is not None:
        notes.append(
            f"your register_fake function {op.fake.name} ({_where(op, root, op.fake.path, op.fake.line)}) stays there: [fake] below must say the same"
        )
    if op.autograd:
        names = ", ".join(f.name for f in op.autograd)
        notes.append(
            f"your register_autograd functions ({names}, {_where(op, root, op.autograd[0].path, op.autograd[0].line)}) stay there: write them as [grad] formulas"
        )
    return notes + op.notes
