"""load -> validate -> collect -> render -> format -> plan -> write: one `opgen generate` run.

The file a newcomer opens first: `generate` calls each stage once, by name, in
order (ARCHITECTURE.md draws them). Work whose inputs did not change is
skipped inside the stages, not here: a spec whose key is unchanged is not
validated again, an output whose key is unchanged is not rendered (Note
[Generate cache] in incremental/inputs.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .api.context import spec_path
from .errors import Diagnostic, OpgenError
from .incremental.generate_cache import GenerateCache
from .incremental.inputs import (
    CONFIG_FILE,
    EJECTED_FILE,
    builtin_templates_dir,
    environment_digest,
    folder_identity,
    templates_digest,
)
from .project.load import Project, load_project
from .render.output_keys import artifact_keys
from .render.outputs import remember_outputs, render_outputs
from .render.overrides import override_warnings
from .spec.paths import Owner
from .stages import Stages
from .targets import Context
from .targets.project import DeletionRules, collect_artifacts, with_first
from .write.apply import apply_changes, needs_writing
from .write.changes import Action, Change, summarize
from .write.manifest import MANIFEST_FILE, Manifest
from .write.plan import Authority, Rendered, plan_changes
from .write.project_files import ProjectFiles

__all__ = ["GenerateResult", "generate", "render_all"]


@dataclass
class GenerateResult:
    """One run's changes, per file; `written` is False when the run only planned them.

    `timings`: seconds per stage (load, validate, render, format, write).
    `spec_warnings`: warnings about valid specs (file:line, message, hint), printed
    relative to `root`.
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
    return render_outputs(
        collect_artifacts(project, fresh_specs=fresh_specs),
        files=ProjectFiles(project.root),
        manifest=manifest,
        templates=templates or project.config.templates,
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
    (Note [Keeping kernels]). `GenerateResult.timings` says where the time went.
    """
    stages = Stages()
    sources = dict(sources or {})
    with stages("load"):
        files = ProjectFiles(root.resolve())
        cache = GenerateCache.load(files, folder_identity(files.root), environment_digest())
        manifest = Manifest.load(files)
    with stages("validate"):
        project = load_project(files.root, sources=sources, cache=cache)
    with stages("load"):
        folder = templates or project.config.templates
        warnings = override_warnings(files.root, folder)
        if manifest.damage:
            warnings.append(
                f".opgen/manifest.json {manifest.damage}; opgen keeps what it could read"
            )
        fresh = frozenset(sources)
        artifacts = with_first(collect_artifacts(project, fresh_specs=fresh), first or {})
        keys = artifact_keys(
            project,
            artifacts=artifacts,
            env=cache.env,
            templates=templates_digest(builtin_templates_dir(), folder),
            fresh_specs=fresh,
        )
    rendered = render_outputs(
        artifacts,
        files=files,
        manifest=manifest,
        templates=folder,
        keys=keys,
        cache=cache,
        stages=stages,
    )
    authority = Authority(
        removal_refused=DeletionRules(project.config).refused,
        force=force,
        adopt=_adoptable(rendered, adopt, project.root),
        specs=frozenset({CONFIG_FILE, *(spec_path(op, project.config) for op in project.ops)}),
    )
    with stages("write"):
        plan = _Plan(
            files=files,
            cache=cache,
            rendered=rendered,
            authority=authority,
            sources=sources,
            replace_sources=replace_sources,
        )
        changes = plan.against(manifest)
        written = not (check or dry_run) and not any(c.action.stops for c in changes)
        if written:
            remember_outputs(cache, rendered, keys)
            changes, written = _write(plan, manifest, changes, project, warnings)
    return GenerateResult(
        changes, written, warnings, stages.seconds, list(project.warnings), project.root
    )


@dataclass(frozen=True, kw_only=True)
class _Plan:
    """What a run renders and may do, planned against a manifest (once, then again under the lock)."""

    files: ProjectFiles
    cache: GenerateCache
    rendered: list[Rendered]
    authority: Authority
    sources: dict[str, str]
    replace_sources: bool

    def against(self, manifest: Manifest) -> list[Change]:
        return plan_changes(
            self.rendered,
            files=self.files,
            manifest=manifest,
            authority=self.authority,
            sources=self.sources,
            disk=self.cache.disk(self.files),
            replace_sources=self.replace_sources,
        )


def _write(
    plan: _Plan, manifest: Manifest, changes: list[Change], project: Project, warnings: list[str]
) -> tuple[list[Change], bool]:
    """Apply `changes` under the project lock, the cache saved with them; (changes, written).

    Another run may have written since the first plan: under the lock the run plans again
    against the manifest on disk now, and stops if that plan needs a person's decision.
    """
    files, cache = plan.files, plan.cache
    in_play = {c.path for c in changes} | set(project.digests) | {MANIFEST_FILE, EJECTED_FILE}
    cache.keep_files(in_play)
    if not needs_writing(files, changes, manifest):
        if cache.dirty:
            with files.lock():
                warnings += _save(files, cache)
        return changes, True
    with files.lock():
        cache.forget_texts()
        manifest = Manifest.load(files)
        changes = plan.against(manifest)
        if any(c.action.stops for c in changes):
            return changes, False
        apply_changes(changes, files=files, manifest=manifest, written=cache.wrote)
        warnings += _save(files, cache)
    return changes, True


def _save(files: ProjectFiles, cache: GenerateCache) -> list[str]:
    """Save the cache if it learned something; a warning when it could not be saved."""
    problem = cache.save(files) if cache.dirty else None
    return [problem] if problem else []


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
