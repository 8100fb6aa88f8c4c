"""The files of ops with a `[sharding]` rule: the rules module and their distributed tests.

Note [Lazy sharding rules]
Importing `torch.distributed.tensor` costs about half of `import torch`, so the
rules live in their own module, `<package>/sharding.py`, which the package
imports only when `torch.distributed.tensor` is already loaded (the user works
with DTensors) and which users import otherwise. The checks that need DTensor
(`opgen.testing.check_sharded`) import it inside the functions the distributed
ranks run, never at collection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..api.context import spec_path
from ..spec.config import CONFIG_FILE
from ..spec.model import OpSpec, ProjectConfig
from ..spec.paths import Owner
from . import Artifact, Context, header

__all__ = [
    "SHARDING_TEST",
    "sharding_artifacts",
    "sharding_generated_paths",
    "sharding_rule_artifact",
]

SHARDING_TEST = "tests/test_sharding.py"


def sharding_generated_paths(pkg: str) -> tuple[str, str, str]:
    """The generated files of sharded projects: the rules module, the test, custom rules' `__init__`."""
    return f"{pkg}/sharding.py", SHARDING_TEST, f"{pkg}/sharding_rules/__init__.py"


def sharding_artifacts(
    config: ProjectConfig,
    ops: Sequence[OpSpec],
    base: Callable[[], Context],
    private: Callable[[], Context],
) -> list[Artifact]:
    """`<package>/sharding.py` and `tests/test_sharding.py`; none without rules."""
    if all(op.sharding is None for op in ops):
        return []
    # imported here: a project without sharding rules (the usual one) never needs it
    from ..api.sharding import sharded_ops, sharding_context, sharding_test_context

    sharded = sharded_ops(ops)
    pkg = config.package

    def plain() -> Context:
        return {**base(), "header": header(CONFIG_FILE)}

    def rules() -> Context:
        return {**plain(), "sharding": sharding_context(ops), "private": private()}

    def tests() -> Context:
        return {**plain(), "tests": [sharding_test_context(op) for op in sharded]}

    module, tested, custom = sharding_generated_paths(pkg)
    items = [
        (module, "package/sharding.py.j2", rules),
        (tested, "tests/test_sharding.py.j2", tests),
    ]
    if any(op.sharding is not None and op.sharding.rule == "custom" for op in sharded):
        items.append((custom, "package/empty_init.py.j2", plain))
    return [
        Artifact(path, template, Owner.GENERATED, CONFIG_FILE, make)
        for path, template, make in items
    ]


def sharding_rule_artifact(
    config: ProjectConfig, op: OpSpec, base: Callable[[], Context]
) -> Artifact:
    """`<package>/sharding_rules/<op>.py`: the user's function of a `custom` rule."""
    from ..api.sharding import rule_module  # here: see sharding_artifacts

    source = spec_path(op, config)
    path = f"{config.package}/{rule_module(op).replace('.', '/')}.py"
    return Artifact(
        path,
        "python/sharding_rule.py.j2",
        Owner.USER,
        source,
        lambda: {**base(), "header": header(source)},
    )
