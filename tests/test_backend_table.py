"""The backend table (Note [Backend table] in opgen/spec/backends.py).

Every stage reads each backend's record instead of comparing names: the tables
cover every Backend, a backend missing from them is refused at every site that
reads one (never sent down another backend's path), and no module outside the
tables names a particular backend.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

from opgen.adopt.kernels import KERNEL_KEEPERS
from opgen.api.build_settings import setup_settings
from opgen.api.context import op_context, package_context
from opgen.api.decisions import decide
from opgen.api.imports import testing_imports as _testing_imports  # not a test
from opgen.api.starter import starter
from opgen.bench.overhead import kind_of
from opgen.build.ninja import plan_build
from opgen.build.run import run_build
from opgen.build.toolchain.settings import project_settings
from opgen.errors import InternalError
from opgen.project.checks import cpp_problems
from opgen.project.load import Project
from opgen.spec.backends import (
    BACKEND_TABLE,
    UnknownBackendError,
    backend_of,
    backend_traits,
    for_backend,
    registers_custom_op,
)
from opgen.spec.model import BACKENDS, Backend, OpSpec
from opgen.targets.project import KERNEL_ARTIFACTS, collect_artifacts, kernel_artifacts
from opgen.targets.python import op_module_artifact

from _specs import CONFIG, op_from_toml, simple_op

PACKAGE = Path(__file__).resolve().parent.parent / "opgen"


class _FourthBackend(StrEnum):
    """A backend opgen does not know: what a new Backend member is before its record exists."""

    TILE = "tile"


@pytest.mark.parametrize(
    "table",
    [BACKEND_TABLE, KERNEL_ARTIFACTS, KERNEL_KEEPERS],
    ids=["records", "kernel files", "import keepers"],
)
def test_every_backend_table_covers_every_backend(table: Any) -> None:
    assert set(table) == set(Backend)


def test_the_spec_choices_are_the_backends() -> None:
    assert BACKENDS == ("python", "cpp", "triton")
    assert [backend_traits(b).label for b in BACKENDS] == ["Python", "C++", "Triton"]


def _ops() -> tuple[OpSpec, OpSpec, OpSpec]:
    """A functional op, an op that writes its argument, and `opgen new`'s sine (it gets a starter)."""
    functional = simple_op("(Tensor x) -> Tensor")
    writes = simple_op("(Tensor(a!) x) -> ()", fake="")
    sine = op_from_toml(
        'name = "mylib::sine"\nschema = "(Tensor x) -> Tensor"\n[fake]\nlike = "x"\n'
        '[test]\nreference = "torch.sin(x)"\n[[test.samples]]\nx = {shape = [2]}\n'
    )
    return functional, writes, sine


def _base() -> dict[str, Any]:
    return {}


# Every place that depends on an op's backend, called with an op of a backend no table knows.
_SITES: dict[str, Callable[[OpSpec, OpSpec, OpSpec], object]] = {
    "record": lambda op, writes, sine: backend_of(op),
    "generated module template": lambda op, w, s: op_module_artifact(CONFIG, op, _base),
    "kernel files": lambda op, w, s: kernel_artifacts(CONFIG, op, _base, False),
    "every artifact": lambda op, w, s: collect_artifacts(Project(CONFIG, (op,))),
    "package variables": lambda op, w, s: package_context(CONFIG, [op]),
    "op variables": lambda op, w, s: op_context(op, CONFIG, {}),
    "tests' imports": lambda op, w, s: _testing_imports(op, ()),
    "registration": lambda op, w, s: registers_custom_op(op),
    "version bumps": lambda op, writes, s: decide(writes).wrapper_bumps_versions,
    "mutation fallbacks": lambda op, writes, s: decide(writes).cpp_mutation_fallbacks,
    "starter bodies": lambda op, w, sine: starter(sine),
    "setup.py settings": lambda op, w, s: setup_settings(CONFIG, [op]),
    "build settings": lambda op, w, s: project_settings(Project(CONFIG, (op,))),
    "ninja plan": lambda op, w, s: plan_build(Project(CONFIG, (op,)), None),  # type: ignore[arg-type]
    "build": lambda op, w, s: run_build(Project(CONFIG, (op,)), stamp=False),
    "C++ project checks": lambda op, w, s: cpp_problems([op], "stable"),
    "bench labels": lambda op, w, s: kind_of(op),
    "import keepers": lambda op, w, s: for_backend(KERNEL_KEEPERS, op.backend, "kernel keeper"),
}


@pytest.mark.parametrize("site", sorted(_SITES))
def test_a_backend_missing_from_the_tables_is_refused_at_every_site(site: str) -> None:
    """A fourth Backend member without its records is an internal error naming it, never the
    C++ (or any other) path."""
    ops = tuple(dataclasses.replace(op, backend=_FourthBackend.TILE) for op in _ops())
    with pytest.raises((UnknownBackendError, InternalError)) as raised:
        _SITES[site](*ops)
    # inside an op's decisions the refusal reaches the user as an internal error naming the spec
    refusal = raised.value if isinstance(raised.value, UnknownBackendError) else raised.value.__cause__
    assert isinstance(refusal, UnknownBackendError), raised.value
    assert str(refusal).startswith("internal error: backend 'tile' has no "), refusal


@pytest.mark.parametrize("site", sorted(_SITES))
def test_every_site_reads_the_known_backends(site: str) -> None:
    """The same calls pass for the backends the tables know (the refusal above is the backend's)."""
    for backend in Backend:
        ops = tuple(dataclasses.replace(op, backend=backend) for op in _ops())
        if site == "ninja plan" or (site == "build" and backend_traits(backend).compiles_cpp):
            continue  # these go on to use a compiler
        _SITES[site](*ops)


def test_the_unknown_backend_error_names_where_to_register_it() -> None:
    with pytest.raises(UnknownBackendError) as caught:
        backend_traits("tile")
    assert "opgen/spec/backends.py" in str(caught.value)


# The modules that may name a particular backend: the enum, the tables (Note [Backend table]).
_TABLE_MODULES = {
    "spec/model.py",
    "spec/backends.py",
    "targets/project.py",
    "adopt/kernels.py",
}


def _backend_names(tree: ast.AST) -> list[int]:
    """Lines naming one backend: `Backend.CPP`, or a backend compared with a string literal
    (`op.backend == "cpp"`, `values["backend"] != "python"`, `op.language == "triton"`)."""

    def is_backend(node: ast.expr) -> bool:
        if isinstance(node, ast.Attribute):
            return node.attr in ("backend", "language")
        if isinstance(node, ast.Subscript):
            return isinstance(node.slice, ast.Constant) and node.slice.value == "backend"
        return isinstance(node, ast.Name) and node.id == "backend"

    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "Backend"
            and node.attr.isupper()
        ):
            lines.append(node.lineno)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            literals = [
                s for s in sides if isinstance(s, ast.Constant) and s.value in BACKENDS
            ]
            if literals and any(is_backend(s) for s in sides):
                lines.append(node.lineno)
    return lines


def test_no_module_outside_the_tables_names_a_backend() -> None:
    """Adding a backend touches its records, templates and own modules (docs/development.md,
    "Adding a backend"), not comparisons scattered through opgen."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        lines = _backend_names(ast.parse(path.read_text(encoding="utf-8")))
        if lines and relative not in _TABLE_MODULES:
            found[relative] = lines
    assert found == {}


def test_the_guard_sees_a_scattered_comparison() -> None:
    code = 'if op.backend == "cpp":\n    pass\nx = Backend.TRITON\nif values["backend"] != "python": pass\n'
    assert _backend_names(ast.parse(code)) == [1, 3, 4]
