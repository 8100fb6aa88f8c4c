"""The user's file of a `backend = "triton"` op: its Triton kernel and launcher.

Note [Triton ops] in api/triton.py says how the generated module reaches it. The
file lives where a Python op's kernel does (`<package>/kernels/<op>.py`) and has the
same ownership (Note [Ownership]): created once, then the user's; a schema change
merges the launcher's new signature into it.
"""

from __future__ import annotations

from collections.abc import Callable

from ..api.context import spec_path
from ..api.names import kernel_raise
from ..spec.model import OpSpec, ProjectConfig
from ..spec.paths import Owner
from . import Artifact, Context, header
from .python import kernel_path

__all__ = ["triton_kernel_artifact"]


def triton_kernel_artifact(
    config: ProjectConfig, op: OpSpec, base: Callable[[], Context], fresh: bool = False
) -> Artifact:
    """`<package>/kernels/<op>.py`: the `@triton.jit` kernel and `launch_<op>`.

    `fresh`: the op's spec is being created; the file starts with a working kernel where
    opgen has one (Note [Starter bodies] in api/starter.py).
    """
    source = spec_path(op, config)
    path = kernel_path(config.package, op.module)

    def context() -> Context:
        exception, where = kernel_raise(op, path)
        return {
            **base(),
            "header": header(source),
            "kernel_file": path,
            "kernel_exception": exception,
            "kernel_source": where,
            "starter": None,
            "imported": None,
        }

    initial = None
    if fresh:
        # imported here: the starters serve only new specs
        from ..api.starter_triton import triton_starter

        body = triton_starter(op)
        if body is not None:
            initial = lambda: {**context(), "starter": body}  # noqa: E731
    return Artifact(path, "python/triton_kernel.py.j2", Owner.USER, source, context, initial)
