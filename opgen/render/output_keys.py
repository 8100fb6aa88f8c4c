"""The key of each output file: a hash of everything that determines it (Note [Generate cache])."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..api.context import spec_path
from ..incremental.inputs import combine
from ..project.load import Project
from ..spec.config import CONFIG_FILE
from ..spec.formulas import called_ops
from ..targets import Artifact

__all__ = ["artifact_keys", "project_digest"]


def project_digest(base: str, digests: Mapping[str, str]) -> str:
    """One digest of the whole project: `base` and every spec. Computed once per run."""
    return combine([base, *(f"{path}:{sha}" for path, sha in sorted(digests.items()))])


def artifact_keys(
    project: Project,
    *,
    artifacts: Sequence[Artifact],
    env: str,
    templates: str,
    fresh_specs: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """Output path -> key.

    An op's files depend on its spec and on the specs of the ops its gradient
    and forward-mode formulas call; package-wide files (whose source is
    opgen.toml) on every spec. All of them depend on `env`, `templates` and opgen.toml.
    """
    digests = project.digests
    base = combine([env, templates, digests.get(CONFIG_FILE, "")])
    everything = project_digest(base, digests)
    by_name: dict[str, list[str]] = {}
    for op in project.ops:
        by_name.setdefault(op.name, []).append(spec_path(op, project.config))
    op_inputs: dict[str, str] = {}
    for op in project.ops:
        source = spec_path(op, project.config)
        callees = sorted({path for name in called_ops(op) for path in by_name.get(name, [])})
        op_inputs[source] = combine(
            [base, *(f"{path}:{digests.get(path, '')}" for path in [source, *callees])]
        )
    keys = {}
    for artifact in artifacts:
        inputs = everything if artifact.source == CONFIG_FILE else op_inputs[artifact.source]
        fresh = "fresh" if artifact.source in fresh_specs else ""
        keys[artifact.path] = combine(
            [inputs, artifact.path, artifact.template, artifact.owner.value, fresh]
        )
    return keys
