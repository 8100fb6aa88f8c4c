"""load -> validate -> render -> format -> plan -> write: one `opgen generate` run."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .api.context import spec_path
from .changes import Action, Change, summarize
from .errors import Diagnostic, OpgenError
from .format import format_python
from .fs import ProjectFiles
from .manifest import Manifest, digest
from .overrides import override_warnings
from .plan import Authority, Rendered, plan_changes
from .project import Project, load_project
from .render import Renderer
from .spec.config import CONFIG_FILE
from .targets import Artifact, Context, Owner
from .targets.project import collect_artifacts, removal_refused
from .writer import apply_changes, needs_writing

__all__ = ["GenerateResult", "generate", "render_all"]


@dataclass
class GenerateResult:
    """One run's changes, per file; `written` is False when the run only planned them."""

    changes: list[Change]
    written: bool
    warnings: list[str] = field(default_factory=list)

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


def _render_one(
    renderer: Renderer,
    artifact: Artifact,
    manifest: Manifest,
    files: ProjectFiles,
    first: Mapping[str, Context],
) -> Rendered:
    raw = renderer.render(artifact.template, artifact.context)
    render_sha = digest(f"{__version__}\0{raw}")
    initial = None
    if artifact.owner is Owner.USER and artifact.path in first:
        # Note [Keeping kernels]: an imported op's kernel file calls the user's function.
        initial = renderer.render(artifact.template, {**artifact.context, **first[artifact.path]})
    elif artifact.make_initial_context is not None:
        initial = renderer.render(artifact.template, artifact.make_initial_context())
    if initial is not None and artifact.is_python:
        initial = format_python(
            initial, str(renderer.template_path(artifact.template)), artifact.path
        )
    previous = manifest.files.get(artifact.path)
    if artifact.is_python:
        if previous is not None and previous.render == render_sha:
            # Same render as last time: reuse the formatted text instead of running black again.
            if previous.base is not None:
                return Rendered(
                    artifact.path,
                    artifact.owner,
                    artifact.source,
                    previous.base,
                    render_sha,
                    initial,
                )
            text = files.read_text(artifact.path)
            if text is not None:
                if digest(text) == previous.sha256:
                    return Rendered(
                        artifact.path, artifact.owner, artifact.source, text, render_sha, initial
                    )
        raw = format_python(raw, str(renderer.template_path(artifact.template)), artifact.path)
    return Rendered(artifact.path, artifact.owner, artifact.source, raw, render_sha, initial)


def render_all(
    project: Project,
    manifest: Manifest,
    templates: Path | None = None,
    fresh_specs: frozenset[str] = frozenset(),
    first: Mapping[str, Context] | None = None,
) -> list[Rendered]:
    """Render and format every artifact of `project`. Reads only.

    `fresh_specs`: specs this run creates; their ops' kernel files start with a starter body where opgen has one.
    `first`: for user files this run creates, template variables that replace the starter's.
    """
    renderer = Renderer(templates or project.config.templates)
    files = ProjectFiles(project.root)
    return [
        _render_one(renderer, a, manifest, files, first or {})
        for a in collect_artifacts(project, fresh_specs)
    ]


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
    current scaffold (Note [Lost records] in plan.py). `templates` replaces
    the project's template folder for this run.

    `sources` are new project files (project-relative path -> text, e.g. a new
    spec and opgen.toml) validated with the project as if they were on disk and
    written by this same run: what `opgen new` hands over. A source that is on
    disk with other text stops the run, unless `replace_sources` (`opgen import
    --force`). `first` gives the first text of user files this run creates
    (Note [Keeping kernels]).
    """
    sources = dict(sources or {})
    project = load_project(root, sources)
    files = ProjectFiles(project.root)
    folder = templates or project.config.templates
    warnings = override_warnings(files.root, folder)
    manifest = Manifest.load(files)
    rendered = render_all(project, manifest, folder, frozenset(sources), first)
    authority = Authority(
        functools.partial(removal_refused, project.config),
        force,
        _adoptable(rendered, adopt, project.root),
        frozenset({CONFIG_FILE, *(spec_path(op, project.config) for op in project.ops)}),
    )
    changes = plan_changes(files, rendered, manifest, authority, sources, replace_sources)
    if manifest.damage:
        warnings.append(f".opgen/manifest.json {manifest.damage}; opgen keeps what it could read")
    if check or dry_run or any(c.action.stops for c in changes):
        return GenerateResult(changes, written=False, warnings=warnings)
    if not needs_writing(files, changes, manifest):
        return GenerateResult(changes, written=True, warnings=warnings)
    with files.lock():
        # Another run may have written since the plan above: plan again under the lock.
        manifest = Manifest.load(files)
        changes = plan_changes(files, rendered, manifest, authority, sources, replace_sources)
        if any(c.action.stops for c in changes):
            return GenerateResult(changes, written=False, warnings=warnings)
        apply_changes(files, changes, manifest)
    return GenerateResult(changes, written=True, warnings=warnings)


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
