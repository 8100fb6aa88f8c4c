"""load -> validate -> render -> format -> plan -> write: one `opgen generate` run.

Work whose inputs did not change is skipped (Note [Generate cache] in
incremental/inputs.py). The modules of validation, rendering and formatting are imported
inside `_regenerate`, not here: a run that replays a settled plan needs none
of them, and `opgen generate` on an unchanged project stays light.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import Diagnostic, OpgenError
from .incremental import settled_plan
from .incremental.generate_cache import GenerateCache
from .incremental.inputs import (
    CONFIG_FILE,
    EJECTED_FILE,
    environment_digest,
    folder_identity,
    templates_digest,
)
from .incremental.template_bytecode import CompiledTemplates
from .spec.paths import Owner
from .stages import Stages
from .targets import Artifact, Context
from .write.apply import apply_changes, needs_writing
from .write.changes import Action, Change, summarize
from .write.manifest import MANIFEST_FILE, Manifest
from .write.plan import Authority, Rendered, plan_changes
from .write.project_files import ProjectFiles

if TYPE_CHECKING:
    from .project.load import Project

__all__ = ["GenerateResult", "generate", "render_all"]


@dataclass
class GenerateResult:
    """One run's changes, per file; `written` is False when the run only planned them.

    `timings`: seconds per stage (load, validate, render, format, write).
    `spec_warnings`: warnings about valid specs (file:line, message, hint), printed
    relative to `root`; a replayed run has them from the run it replays.
    """

    changes: list[Change]
    written: bool
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    spec_warnings: list[Diagnostic] = field(default_factory=list)
    root: Path | None = None

    def counts(self) -> Counter[Action]:
        """How many files each action touched."""
        return Counter(c.action for c in self.changes)

    @property
    def stale(self) -> list[Change]:
        """The files `--check` reports."""
        return [c for c in self.changes if c.action.stale]

    @property
    def failed(self) -> bool:
        return any(c.action.failed for c in self.changes)

    @property
    def stopped(self) -> bool:
        """A file needs a person's decision (an edited generated file, an untracked user file), so the run wrote nothing."""
        return not self.written and any(c.action.stops for c in self.changes)

    def summary(self) -> str:
        """The report's last line: "2 created, 0 updated, ..."."""
        return summarize(c.action for c in self.changes)


def render_all(
    project: Project,
    manifest: Manifest,
    templates: Path | None = None,
    fresh_specs: frozenset[str] = frozenset(),
) -> list[Rendered]:
    """Render and format every artifact of `project`, with no cache. Reads only.

    `fresh_specs`: specs this run creates; their ops' kernel files start with a starter body where opgen has one.
    """
    from .render.outputs import render_outputs
    from .targets.project import collect_artifacts

    return render_outputs(
        collect_artifacts(project, fresh_specs),
        ProjectFiles(project.root),
        manifest,
        templates or project.config.templates,
    )


def generate(
    root: Path,
    *,
    check: bool = False,
    dry_run: bool = False,
    force: bool = False,
    adopt: Iterable[str] = (),
    templates: Path | None = None,
    sources: Mapping[str, str] | None = None,
    replace_sources: bool = False,
    first: Mapping[str, Context] | None = None,
) -> GenerateResult:
    """Regenerate every op of the project at `root`; the library call behind `opgen generate`.

    Everything that can fail without writing runs first: loading and validating
    every spec (all problems raise together as OpgenError), rendering,
    formatting and planning. Only then, and only when something changes, does
    the run take the project lock, plan again against what is on disk now and
    write. `check`/`dry_run` only plan; they create nothing, not even `.opgen/`.
    A file edited by hand (an "edited" change) or a user file whose record is
    lost ("untracked") stops the run before anything is written; `force`
    overwrites edited generated files instead (keeping backups), `adopt`
    (project-relative paths of user files) re-attaches user files to the
    current scaffold (Note [Lost records] in write/plan.py). `templates` replaces
    the project's template folder for this run.

    `sources` are new project files (project-relative path -> text, e.g. a new
    spec and opgen.toml) validated with the project as if they were on disk and
    written by this same run: what `opgen new` hands over. A source that is on
    disk with other text stops the run, unless `replace_sources` (`opgen import
    --force`). `first` gives the first text of user files this run creates
    (Note [Keeping kernels]).

    Work whose inputs did not change is skipped (Note [Generate cache] in
    incremental/inputs.py); `GenerateResult.timings` says where the time went.
    """
    stages = Stages()
    with stages("load"):
        files = ProjectFiles(root.resolve())
        cache = GenerateCache.load(files, folder_identity(files.root), environment_digest())
        manifest = Manifest.load(files)
        adopted = frozenset(Path(p).as_posix() for p in adopt)
        fresh_state = not sources and not adopted and not manifest.damage
        replayed = settled_plan.replay(files, cache, manifest, templates) if fresh_state else None
    if replayed is None:
        run = _Run(
            files,
            cache,
            stages,
            check or dry_run,
            force,
            adopted,
            templates,
            dict(sources or {}),
            replace_sources,
            dict(first or {}),
        )
        return run.regenerate(manifest)
    changes, warnings, spec_warnings = replayed
    written = not (check or dry_run)
    if written and cache.dirty:  # files hashed again: save their stats for the next run
        with stages("write"), files.lock():
            warnings += _save(files, cache)
    return GenerateResult(changes, written, warnings, stages.seconds, spec_warnings, files.root)


def _save(
    files: ProjectFiles, cache: GenerateCache, compiled: CompiledTemplates | None = None
) -> list[str]:
    """Save the cache (and the templates compiled) if it learned something; a warning for what
    could not be saved."""
    problems = [compiled.save()] if compiled is not None else []
    if cache.dirty:
        problems.append(cache.save(files))
    return [p for p in problems if p]


@dataclass
class _Run:
    """A run where something may have changed: validate, render what changed, plan, write."""

    files: ProjectFiles
    cache: GenerateCache
    stages: Stages
    plan_only: bool
    force: bool
    adopt: frozenset[str]
    templates: Path | None
    sources: dict[str, str]
    replace_sources: bool = False
    first: dict[str, Context] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.compiled = CompiledTemplates(self.files, self.cache)

    def regenerate(self, manifest: Manifest) -> GenerateResult:
        files, cache, stages = self.files, self.cache, self.stages
        with stages("load"):
            # Imported here: a run that replays a settled plan needs none of this (see the docstring).
            from .api.context import spec_path
            from .project.load import load_project
            from .render.environment import builtin_templates_dir
            from .render.output_keys import artifact_keys
            from .render.outputs import remember_outputs, render_outputs
            from .render.overrides import override_warnings
            from .targets.project import collect_artifacts, removal_refused

        with stages("validate"):
            project = load_project(files.root, self.sources, cache)
        spec_warnings = list(project.warnings)

        def result(changes: list[Change], written: bool) -> GenerateResult:
            return GenerateResult(
                changes, written, warnings, stages.seconds, spec_warnings, project.root
            )

        with stages("load"):
            folder = self.templates or project.config.templates
            warnings = override_warnings(files.root, folder)
            template_digest = templates_digest(builtin_templates_dir(), folder)
            fresh = frozenset(self.sources)
            artifacts = with_first(collect_artifacts(project, fresh), self.first)
            keys = artifact_keys(project, artifacts, cache.env, template_digest, fresh)
        rendered = render_outputs(
            artifacts,
            files,
            manifest,
            folder,
            keys=keys,
            cache=cache,
            stages=stages,
            compiled=self.compiled,
        )
        authority = Authority(
            functools.partial(removal_refused, project.config),
            self.force,
            _adoptable(rendered, self.adopt, project.root),
            frozenset({CONFIG_FILE, *(spec_path(op, project.config) for op in project.ops)}),
        )
        plan = functools.partial(self._plan, rendered, authority)
        with stages("write"):
            changes = plan(manifest)
            if manifest.damage:
                warnings.append(
                    f".opgen/manifest.json {manifest.damage}; opgen keeps what it could read"
                )
            if self.plan_only or any(c.action.stops for c in changes):
                return result(changes, False)
            remember_outputs(cache, rendered, keys)
            settle = functools.partial(
                self._settle, project.digests, warnings, spec_warnings, template_digest, folder
            )
            if not needs_writing(files, changes, manifest):
                settle(changes, manifest)
                if cache.dirty or self.compiled.changed:
                    with files.lock():
                        warnings += _save(files, cache, self.compiled)
                return result(changes, True)
            with files.lock():
                # Another run may have written since the plan above: plan again under the lock.
                cache.forget_texts()
                manifest = Manifest.load(files)
                changes = plan(manifest)
                if any(c.action.stops for c in changes):
                    return result(changes, False)
                apply_changes(files, changes, manifest, cache.wrote)
                if not self.sources and not self.adopt:
                    # what the next run plans, unless something changes meanwhile
                    settle(plan(manifest), manifest)
                warnings += _save(files, cache, self.compiled)
        return result(changes, True)

    def _settle(
        self,
        digests: Mapping[str, str],
        warnings: list[str],
        spec_warnings: list[Diagnostic],
        template_digest: str,
        folder: Path | None,
        plan: list[Change],
        manifest: Manifest,
    ) -> None:
        """Record `plan` for the next run to replay, if it writes nothing; forget files out of play."""
        specs = {path: sha for path, sha in digests.items() if path != CONFIG_FILE}
        replayable = not self.sources and not self.adopt and not manifest.damage
        if replayable and not needs_writing(self.files, plan, manifest):
            settled_plan.record(
                self.files,
                self.cache,
                plan,
                warnings,
                spec_warnings,
                specs,
                template_digest,
                folder,
                self.templates,
            )
        in_play = {c.path for c in plan} | set(digests) | {MANIFEST_FILE, EJECTED_FILE}
        self.cache.keep_files(in_play)

    def _plan(
        self, rendered: list[Rendered], authority: Authority, manifest: Manifest
    ) -> list[Change]:
        return plan_changes(
            self.files,
            rendered,
            manifest,
            authority,
            self.sources,
            self.cache.disk(self.files),
            replace_sources=self.replace_sources,
        )


def with_first(artifacts: list[Artifact], first: Mapping[str, Context] | None) -> list[Artifact]:
    """`artifacts`, the user files named in `first` starting from these template variables
    instead of the starter's (Note [Keeping kernels]: an imported op's kernel calls the user's)."""
    if not first:
        return artifacts
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


def _adoptable(rendered: list[Rendered], adopt: Iterable[str], root: Path) -> frozenset[str]:
    """The `--adopt` paths, checked: each must be a user-owned file of the project."""
    users = {r.path for r in rendered if r.owner is Owner.USER}
    wanted = frozenset(Path(p).as_posix() for p in adopt)
    unknown = sorted(wanted - users)
    if unknown:
        raise OpgenError(
            [
                Diagnostic(
                    root / path,
                    None,
                    "--adopt takes a file that is yours and that opgen merges into (a kernel or setup.py)",
                    "files it can adopt: " + (", ".join(sorted(users)) or "none"),
                )
                for path in unknown
            ]
        )
    return wanted
