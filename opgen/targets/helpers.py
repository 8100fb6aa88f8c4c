"""`<package>/testing_helpers.py`: the user's sample generators and reference functions.

Note [Testing helpers]
What a `[[test.samples]]` table or a reference expression cannot say (valid
overlapping boxes, jagged offsets tied to another input's shape, a reference
with a loop) is plain Python in one user-owned module per project. A spec names
its functions: `[test] samples_from`, `[test] reference_from` and `[bench]
inputs_from`. opgen creates the module with a stub per name, as it creates
kernels, and merges the stubs of names added later into it (diff3, like a
kernel file); it never overwrites a body. A generator is called as
`generator(device, dtype, **size)` (the tests pass no size, `opgen bench` its
size variables) and returns a list of samples (argument name -> value); a
reference is called with the op's arguments.
"""

from __future__ import annotations

from collections.abc import Callable

from ..api import python as py
from ..spec.config import CONFIG_FILE
from ..spec.model import OpSpec, ProjectConfig
from ..spec.paths import Owner
from . import Artifact, Context

__all__ = ["helpers_path", "helpers_artifact"]


def helpers_path(package: str) -> str:
    return f"{package}/testing_helpers.py"


def _functions(ops: tuple[OpSpec, ...]) -> list[dict[str, str]]:
    """One stub per name the specs use, in spec order; a name keeps the role it first had."""
    seen: dict[str, dict[str, str]] = {}
    for op in ops:
        for name in (op.test.samples_from, op.bench.inputs_from):
            if name and name not in seen:
                seen[name] = {"name": name, "kind": "samples", "op": op.qualname}
        name = op.test.reference_from
        if name and name not in seen:
            signature = py.signature(op, annotate=False)
            seen[name] = {
                "name": name,
                "kind": "reference",
                "op": op.qualname,
                "signature": signature,
            }
    return list(seen.values())


def helpers_artifact(
    config: ProjectConfig, ops: tuple[OpSpec, ...], base: Callable[[], Context]
) -> Artifact | None:
    """The module, when some spec names a function of it."""
    functions = _functions(ops)
    if not functions:
        return None
    path = helpers_path(config.package)
    return Artifact(
        path,
        "package/testing_helpers.py.j2",
        Owner.USER,
        CONFIG_FILE,
        lambda: {**base(), "functions": functions},
    )
