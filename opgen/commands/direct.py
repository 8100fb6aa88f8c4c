"""The commands that run without typer: `opgen generate` with on/off flags, a no-op `opgen build`.

Note [Direct generate] in cli.py says why: typer's import and parsing cost
more than opgen's own work in these runs. Each answers here exactly as its
typer command would (same output, same exit code); anything else, a
`--help` or a typo included, goes to typer.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ._output import echo, err, no_project, print_diagnostics, report

__all__ = ["answer", "run_generate", "UP_TO_DATE", "FAST_BUILD_FLAGS"]

UP_TO_DATE = "opgen: up to date: nothing changed since the last build"
# `opgen build` options that do not change what an up-to-date build is
FAST_BUILD_FLAGS = frozenset({"-v", "--verbose", "--generate", "--no-generate", "--check-cuda"})
# the on/off flags of `opgen generate`
_GENERATE_FLAGS = frozenset({"--check", "--dry-run", "--force", "--timings"})


def answer(argv: list[str]) -> int | None:
    """The exit code of the command `argv` when it runs here, without typer; None when typer must."""
    if argv[:1] == ["build"]:
        return 0 if answer_up_to_date(argv) else None
    flags = argv[1:]
    if argv[:1] == ["generate"] and set(flags) <= _GENERATE_FLAGS:
        if len(set(flags)) == len(flags):
            try:
                return run_generate(
                    check="--check" in flags,
                    dry_run="--dry-run" in flags,
                    force="--force" in flags,
                    timings="--timings" in flags,
                )
            except (EOFError, KeyboardInterrupt):
                err("Aborted!")  # what click prints
                return 1
    return None


def run_generate(
    check: bool = False,
    dry_run: bool = False,
    force: bool = False,
    adopt: list[Path] | None = None,
    templates: Path | None = None,
    timings: bool = False,
) -> int:
    """`opgen generate` in the current folder: report the run; its exit code."""
    from ..errors import OpgenError
    from ..generate import generate
    from ..incremental.inputs import find_root
    from ..stages import Stages
    from ..write.apply import unified_diff
    from ..write.changes import Action

    start = Path.cwd().resolve()
    root = find_root(start)
    if root is None:
        err(no_project(start))
        return 1
    # --adopt paths are relative to the folder the command runs in, like any path argument
    adopted = [os.path.relpath(os.path.abspath(p), root) for p in adopt or []]
    try:
        result = generate(
            root, check=check, dry_run=dry_run, force=force, adopt=adopted, templates=templates
        )
    except OpgenError as exc:
        print_diagnostics(exc, root)
        return 1
    if dry_run:
        for change in result.stale:
            if change.action is not Action.EDITED:
                echo(unified_diff(change), nl=False)
    report(result, check=check, dry_run=dry_run)
    if timings:
        err(f"opgen: {Stages.line_of(result.timings)}")
    if check and result.stale:
        err("error: generated files are out of date; run `opgen generate`")
        return 1
    return 1 if result.failed else 0


def answer_up_to_date(argv: list[str]) -> bool:
    """Answer a no-op `opgen build` (`argv`: the command line after `opgen`); whether it did.

    typer's argument coercion imports pydantic (~0.4 s, most of a no-op
    build). Anything but `build` with the flags above (and -j N) goes to
    typer, as does a build that is stale (Note [Build stamp] in build/stamp.py).
    """
    if not argv or argv[0] != "build":
        return False
    rest = argv[1:]
    check_cuda = False
    while rest:
        arg = rest.pop(0)
        if arg in ("-j", "--jobs") and rest and rest[0].isdigit():
            rest.pop(0)
        elif re.fullmatch(r"-j\d+|--jobs=\d+", arg):
            continue
        elif arg in FAST_BUILD_FLAGS:
            check_cuda = check_cuda or arg == "--check-cuda"
        else:
            return False
    from ..build.stamp import stale_reason

    here = Path.cwd().resolve()
    root = next((d for d in (here, *here.parents) if (d / "opgen.toml").is_file()), None)
    if root is None or stale_reason(root, check_cuda) is not None:
        return False
    echo(UP_TO_DATE)
    return True
