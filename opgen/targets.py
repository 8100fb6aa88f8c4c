"""The table of files opgen produces: template, output path and owner.

Note [Ownership]
A "generated" file is rewritten on every run and carries a header saying so.
A "user" file is created once from its template (the scaffold); afterwards
it belongs to the user and opgen only merges scaffold changes into it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .api.context import header, op_context, project_context
from .project import Project
from .spec.config import CONFIG_FILE
from .spec.model import OpSpec

__all__ = ["Artifact", "collect_artifacts", "GENERATED", "USER"]

GENERATED = "generated"
USER = "user"


@dataclass(frozen=True)
class Artifact:
    path: str  # relative to the project root, posix
    template: str
    owner: str
    source: str  # the spec (or opgen.toml) it comes from
    context: dict[str, Any]

    @property
    def is_python(self) -> bool:
        return self.path.endswith(".py")


def _op_artifacts(project: Project, op: OpSpec) -> list[Artifact]:
    config = project.config
    pkg = config.package
    module = op.module
    ctx = op_context(op, config)
    source = ctx["spec_path"]
    base = {"project": project_context(project), "op": ctx}
    out: list[Artifact] = []

    def add(path: str, template: str, owner: str, comment: str = "#", **extra: Any) -> None:
        context = {**base, "header": header(source, comment), **extra}
        out.append(Artifact(path, template, owner, source, context))

    if op.backend == "python":
        add(f"{pkg}/_generated/{module}.py", "python/op.py.j2", GENERATED)
        kernel_file = f"{pkg}/kernels/{module}.py"
        add(kernel_file, "python/kernel.py.j2", USER, kernel_file=kernel_file)
    else:
        from .api.cpp_targets import cpp_op_artifacts

        out.extend(cpp_op_artifacts(project, op, base, add))
    add(f"tests/test_{module}.py", "tests/test_op.py.j2", GENERATED)
    return out


def _project_artifacts(project: Project) -> list[Artifact]:
    pkg = project.config.package
    ops = [{"name": op.name, "module": op.module} for op in project.ops]
    context = {"project": project_context(project), "ops": ops, "header": header(CONFIG_FILE)}
    items = [
        (f"{pkg}/__init__.py", "package/__init__.py.j2"),
        (f"{pkg}/_generated/__init__.py", "package/empty_init.py.j2"),
        (f"{pkg}/_testing.py", "package/_testing.py.j2"),
        ("tests/conftest.py", "tests/conftest.py.j2"),
    ]
    if any(op.backend == "python" for op in project.ops):
        items.append((f"{pkg}/kernels/__init__.py", "package/empty_init.py.j2"))
    out = [Artifact(path, template, GENERATED, CONFIG_FILE, context) for path, template in items]
    if any(op.backend == "cpp" for op in project.ops):
        from .api.cpp_targets import cpp_project_artifacts

        out.extend(cpp_project_artifacts(project, context))
    return out


def collect_artifacts(project: Project) -> list[Artifact]:
    artifacts = _project_artifacts(project)
    for op in project.ops:
        artifacts.extend(_op_artifacts(project, op))
    return sorted(artifacts, key=lambda a: a.path)
