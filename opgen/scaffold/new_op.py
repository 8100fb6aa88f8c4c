"""`opgen new` as a library call: compose a new op's spec and generate it in one run."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import Diagnostic, OpgenError
from ..generate import GenerateResult, generate
from ..spec.paths import Owner
from ..write.changes import Action
from ..write.merge import PLACEHOLDER_MARK
from .texts import compose_new_op

__all__ = ["NewResult", "new_op"]


@dataclass(frozen=True)
class NewResult:
    """The project the op went into, its new spec, its backend, and the generate run that wrote it all."""

    root: Path
    spec: str  # the new spec, project-relative
    backend: str
    generated: GenerateResult

    @property
    def kernels(self) -> list[str]:
        """The op's kernel files this run created, project-relative."""
        return [
            c.path
            for c in self.generated.changes
            if c.action is Action.CREATE
            and c.entry is not None
            and c.entry.owner is Owner.USER
            and c.entry.source == self.spec
        ]

    @property
    def to_fill(self) -> list[str]:
        """The kernels that still hold a placeholder (no starter body for this schema)."""
        return [
            c.path
            for c in self.generated.changes
            if c.path in self.kernels and c.new is not None and PLACEHOLDER_MARK in c.new
        ]


def new_op(
    cwd: Path,
    qualname: str,
    schema: str | None = None,
    backend: str | None = None,
    devices: Sequence[str] = (),
) -> NewResult:
    """Create op `qualname` ("namespace::op"), and the project when `cwd` is in none, then generate it.

    The new spec (and opgen.toml) go to generate's writer with the generated
    files: they are validated with the rest of the project first, so a failing
    call writes nothing. Without `schema` the op is an elementwise sine whose
    kernel starts with a working body (Note [Starter bodies]). Raises
    OpgenError with every problem found.
    """
    plan = compose_new_op(cwd.resolve(), qualname, schema, backend, devices)
    try:
        result = generate(plan.root, sources=plan.sources)
    except OpgenError as exc:
        raise OpgenError(
            [_unwritten(d, plan.root, plan.sources) for d in exc.diagnostics]
        ) from None
    if plan.int_arguments:
        # The schema is the user's: say what SymInt would change, never rewrite it.
        names = ", ".join(plan.int_arguments)
        result.spec_warnings.append(
            Diagnostic(
                plan.root / plan.spec,
                plan.sources[plan.spec].count("\n", 0, plan.sources[plan.spec].index("schema")) + 1,
                f"{names}: an int argument that sets an output size makes torch.compile(dynamic=True) "
                "compile again for every new value, and torch.export specialize it",
                "if it is a size, declare it SymInt in the schema (the kernel still receives an "
                "integer); the generated dynamic-shape test fails while it recompiles",
                level="warning",
            )
        )
    return NewResult(plan.root, plan.spec, plan.backend, result)


def _unwritten(diagnostic: Diagnostic, root: Path, sources: dict[str, str]) -> Diagnostic:
    """A diagnostic about a file `opgen new` composed but, failing, did not write: it names no
    file the user could open, only the line as it would have been written."""
    if diagnostic.path is None or os.path.lexists(diagnostic.path):
        return diagnostic  # a file on disk (a symlink in the way, a project file)
    for relative, text in sources.items():
        if diagnostic.path == root / relative:
            lines = text.splitlines()
            line = diagnostic.line
            where = relative
            if line is not None and 0 < line <= len(lines):
                where = f"{relative} line {line}, `{lines[line - 1].strip()}`"
            return Diagnostic(
                None,
                None,
                f"{diagnostic.message} (in {where}, as `opgen new` would have written it: "
                "nothing was written)",
                diagnostic.hint,
                diagnostic.level,
            )
    return diagnostic
