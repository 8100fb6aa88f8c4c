"""Package-wide files, and every artifact of a project in one list."""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ..api.context import (
    op_context,
    ops_list,
    package_context,
    project_context,
    siblings,
    spec_path,
)
from ..api.private_torch import private_context
from ..errors import internal_errors
from ..project.load import OPS_DIR, Project
from ..spec.backends import backend_of, for_backend
from ..spec.config import CONFIG_FILE
from ..spec.model import Backend, OpSpec, ProjectConfig
from ..spec.paths import STATE_DIR, Owner
from . import Artifact, Context, header, names_source
from .helpers import helpers_artifact
from .python import (
    module_path,
    op_module_artifact,
    python_kernel_artifact,
    test_artifact,
    test_path,
    vmap_rule_artifact,
)
from .sharding import sharding_artifacts, sharding_generated_paths, sharding_rule_artifact
from .triton import triton_kernel_artifact

_T = TypeVar("_T")

__all__ = [
    "KERNEL_ARTIFACTS",
    "kernel_artifacts",
    "collect_artifacts",
    "package_artifacts",
    "generated_patterns",
    "DeletionRules",
    "with_first",
    "retired_paths",
]


def _package_files(package: str) -> list[tuple[str, str]]:
    """(path, template) of the package-wide generated files; the last only where kernels/ is needed."""
    return [
        (f"{package}/__init__.py", "package/__init__.py.j2"),
        (f"{package}/_generated/__init__.py", "package/empty_init.py.j2"),
        ("tests/conftest.py", "tests/conftest.py.j2"),
        (f"{package}/kernels/__init__.py", "package/empty_init.py.j2"),
    ]


# Run-time helpers copied from opgen/runtime/ into the package (opgen/runtime/__init__.py says
# why), and when an op needs each: its module name there and its path in the package.
_RUNTIME = {"batching": "_batching.py", "autograd": "_autograd.py"}
# Note [Private torch checks] in opgen/runtime/private_torch.py: only for projects that opt in
_PRIVATE_TORCH = "_private_torch.py"
# Files earlier versions of opgen generated and this one does not (Note [Retired outputs]):
# the private-torch bindings, and the test harness that moved into `opgen.testing`.
_RETIRED = ("_runtime.py",) + tuple(
    f"{module}.py"
    for module in (
        "_testing",
        "_testing_pt2",
        "_testing_samples",
        "_testing_transforms",
        "_sharding_testing",
        "_dist_pool",
    )
)


def _runtime_needed(ops: tuple[OpSpec, ...]) -> list[str]:
    from ..api.decisions import decisions

    needed = []
    if any(op.vmap != "none" for op in ops):
        needed.append("batching")
    if any(decisions(op).has_function for op in ops):
        needed.append("autograd")
    return needed


@functools.cache
def _runtime_source(module: str) -> str:
    from importlib.resources import files

    return files("opgen.runtime").joinpath(f"{module}.py").read_text(encoding="utf-8")


def package_artifacts(
    config: ProjectConfig,
    ops: tuple[OpSpec, ...],
    base: Callable[[], Context],
    private: Callable[[], dict[str, Any]],
) -> list[Artifact]:
    """The package's `__init__.py`, its run-time helpers (`_batching.py`, `_autograd.py`)
    and the tests' `conftest.py`."""
    items = _package_files(config.package)
    if not any(backend_of(op).kernel_package or op.vmap == "custom" for op in ops):
        items.pop()

    def context(template: str) -> Context:
        extra = {"private": private()} if template == "package/__init__.py.j2" else {}
        return {**base(), "header": header(CONFIG_FILE), **extra}

    artifacts = [
        Artifact(path, template, Owner.GENERATED, CONFIG_FILE, functools.partial(context, template))
        for path, template in items
    ]
    for module in _runtime_needed(ops):
        artifacts.append(
            Artifact(
                f"{config.package}/{_RUNTIME[module]}",
                "package/runtime.py.j2",
                Owner.GENERATED,
                CONFIG_FILE,
                functools.partial(
                    lambda m: {
                        **base(),
                        "header": header(CONFIG_FILE),
                        "source": _runtime_source(m),
                    },
                    module,
                ),
            )
        )
    if config.private_torch:
        artifacts.append(
            Artifact(
                f"{config.package}/{_PRIVATE_TORCH}",
                "package/_private_torch.py.j2",
                Owner.GENERATED,
                CONFIG_FILE,
                lambda: {
                    **base(),
                    "header": header(CONFIG_FILE),
                    "source": _runtime_source("private_torch"),
                    "private": private(),
                },
            )
        )
    return artifacts


def _naming_spec(op: OpSpec, make: Callable[[], _T]) -> Callable[[], _T]:
    """`make` made once; an unexpected exception in it names the op's spec (Note [Internal errors])."""

    def made() -> _T:
        with internal_errors(op.path, f"op {op.qualname}"):
            return make()

    return functools.cache(made)


# A backend's kernel files, given the op's base context and whether its spec is fresh (then
# they start with the starter bodies, Note [Starter bodies]).
KernelArtifacts = Callable[[ProjectConfig, OpSpec, Callable[[], Context], bool], list[Artifact]]


def _python_kernel(
    config: ProjectConfig, op: OpSpec, base: Callable[[], Context], fresh: bool
) -> list[Artifact]:
    return [python_kernel_artifact(config, op, base, fresh)]


def _triton_kernel(
    config: ProjectConfig, op: OpSpec, base: Callable[[], Context], fresh: bool
) -> list[Artifact]:
    return [triton_kernel_artifact(config, op, base, fresh)]


def _cpp_kernels(
    config: ProjectConfig, op: OpSpec, base: Callable[[], Context], fresh: bool
) -> list[Artifact]:
    from .cpp import cpp_op_artifacts  # imported here: as the C++ contexts below

    return cpp_op_artifacts(config, op, base, fresh)


# each backend's kernel files (Note [Backend table] in spec/backends.py)
KERNEL_ARTIFACTS: Mapping[Backend, KernelArtifacts] = {
    Backend.PYTHON: _python_kernel,
    Backend.CPP: _cpp_kernels,
    Backend.TRITON: _triton_kernel,
}


def kernel_artifacts(
    config: ProjectConfig, op: OpSpec, base: Callable[[], Context], fresh: bool
) -> list[Artifact]:
    """The kernel files of an op, as its backend makes them."""
    make = for_backend(KERNEL_ARTIFACTS, op.backend, "kernel files in targets/project.py")
    return make(config, op, base, fresh)


def collect_artifacts(
    project: Project, *, fresh_specs: frozenset[str] = frozenset()
) -> list[Artifact]:
    """Every file the project's specs make, sorted by path.

    Project-wide values (the `project` variables, the library's `cpp`
    variables) are computed once per run; an op's variables when one of its
    templates first needs them. Ops whose spec is in `fresh_specs` (created by
    this run) get starter bodies in their fresh kernel files.
    """
    config, ops = project.config, project.ops
    shared = functools.cache(lambda: project_context(config))
    package = functools.cache(lambda: package_context(config, ops))
    # Formulas call the ops they name through their wrappers; the keys of an op's files
    # cover the specs of every op it names (Note [Generate cache] in incremental/inputs.py).
    callable_ops = functools.cache(lambda: siblings(ops))
    cpp_contexts: dict[str, Callable[[], dict[str, Any]]] = {}
    if any(backend_of(op).compiles_cpp for op in ops):
        # imported here: a project of Python ops never needs the C++ targets (a lighter run)
        from ..api.cpp_context import cpp_op_context, cpp_project_context
        from .cpp import cpp_files, cpp_project_artifacts, library_file

        cpp_contexts = {
            op.module: _naming_spec(
                op, functools.partial(cpp_op_context, op, cpp_files(op, config))
            )
            for op in ops
            if backend_of(op).compiles_cpp
        }

    def op_base(op: OpSpec) -> Callable[[], Context]:
        def build() -> Context:
            context: dict[str, Any] = op_context(op, config, callable_ops())
            if backend_of(op).compiles_cpp:
                context["cpp"] = cpp_contexts[op.module]()
            return {"project": shared(), "op": context}

        return _naming_spec(op, build)

    package_base = functools.cache(lambda: {"project": package(), "ops": ops_list(ops)})
    private = functools.cache(lambda: private_context(config, ops))
    artifacts = package_artifacts(config, ops, package_base, private)
    helpers = helpers_artifact(config, ops, package_base)
    if helpers is not None:
        artifacts.append(helpers)
    artifacts += sharding_artifacts(config, ops, package_base, private)
    if cpp_contexts:
        cpp_ops = [op for op in ops if backend_of(op).compiles_cpp]
        library = functools.cache(
            lambda: {
                **package_base(),
                "cpp": cpp_project_context(
                    config,
                    [(op, cpp_contexts[op.module]()) for op in cpp_ops],
                    library_file(config.cpp_target),
                ),
            }
        )
        artifacts += cpp_project_artifacts(config, ops, library)
    for op in ops:
        base = op_base(op)
        fresh = spec_path(op, config) in fresh_specs
        artifacts.append(op_module_artifact(config, op, base))
        artifacts += kernel_artifacts(config, op, base, fresh)
        if op.vmap == "custom":
            artifacts.append(vmap_rule_artifact(config, op, base))
        artifacts.append(test_artifact(config, op, base))
        if op.sharding is not None and op.sharding.rule == "custom":
            artifacts.append(sharding_rule_artifact(config, op, base))
    return sorted(artifacts, key=lambda a: a.path)


# Note [Deletion authority]
# The manifest is data, not authority: a checkout can carry a crafted one. A
# file is removed only when its path is one a generated file of this project
# can have (the patterns below, from the same functions that place the
# outputs), it is outside the state, spec and version-control folders, and
# its first line is the generated header naming the spec the manifest says it
# came from. Anything else the manifest lists is left alone and reported.
_NEVER_REMOVED = (OPS_DIR, STATE_DIR, ".git")


# Note [Retired outputs]
# Files an earlier opgen generated and this one does not (`_RETIRED`): a project
# generated then still lists them in its manifest. They stay paths opgen may
# remove (Note [Deletion authority]), so that the next run deletes them as it
# deletes the files of a removed spec; one edited by hand stops the run and is
# kept, as any edited generated file is.
def retired_paths(package: str) -> list[str]:
    """The paths of generated files that opgen no longer makes."""
    return [f"{package}/{name}" for name in _RETIRED]


def generated_patterns(config: ProjectConfig) -> list[str]:
    """Every path a generated file of this project can have; `*` stands for an op's name."""
    from .cpp import generated_cpp_patterns  # here: see collect_artifacts

    package = config.package
    patterns = [path for path, _ in _package_files(package)]
    patterns += [f"{package}/{name}" for name in (*_RUNTIME.values(), _PRIVATE_TORCH)]
    patterns += [module_path(package, "*"), test_path("*"), *generated_cpp_patterns(package)]
    patterns += [*sharding_generated_paths(package), *retired_paths(package)]
    return sorted(set(patterns))


def _matches(path: str, pattern: str) -> bool:
    parts, wanted = path.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(map(fnmatch.fnmatchcase, parts, wanted))


@dataclass(frozen=True)
class DeletionRules:
    """Which files a run of this project may remove (Note [Deletion authority])."""

    config: ProjectConfig

    def refused(self, path: str, text: str, source: str) -> str | None:
        """Why opgen may not remove `path` (holding `text`, said to come from `source`); None if it may."""
        if path == CONFIG_FILE or path.split("/")[0] in _NEVER_REMOVED:
            return "opgen never removes the project file, specs, its state or version control"
        if not any(_matches(path, p) for p in generated_patterns(self.config)):
            return "opgen generates no file at this path"
        if not names_source(text, source):
            return f"its first line is not the header of a file generated from {source}"
        return None


def with_first(artifacts: list[Artifact], first: Mapping[str, Context]) -> list[Artifact]:
    """`artifacts`, the user files named in `first` starting from these template variables
    instead of the starter's (Note [Keeping kernels]: an imported op's kernel calls the user's)."""
    return [
        (
            dataclasses.replace(
                a,
                make_initial_context=functools.partial(_first_context, a, first[a.path]),
            )
            if a.owner is Owner.USER and a.path in first
            else a
        )
        for a in artifacts
    ]


def _first_context(artifact: Artifact, extra: Context) -> Context:
    return {**artifact.context, **extra}
