"""Render and format a project's outputs; those whose key is unchanged are not rendered at all.

Note [Generate cache] in incremental/inputs.py says when an output is skipped. A skipped
output is known by the digest of its text; the text itself is read from the
disk (a generated file) or the manifest (a user file's scaffold) only when
the plan needs it, and rendered again only if neither holds it any more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..errors import internal_errors
from ..incremental.generate_cache import GenerateCache
from ..spec.paths import Owner
from ..stages import Stages
from ..targets import Artifact
from ..write.manifest import Manifest, digest
from ..write.plan import Rendered
from ..write.project_files import ProjectFiles
from .format import FormatJob, format_many, is_black_stable

if TYPE_CHECKING:
    from .environment import Renderer

__all__ = ["render_outputs", "remember_outputs", "render_sha"]


def render_sha(raw: str) -> str:
    """The digest of an unformatted render: formatted output is reused while it is unchanged."""
    return digest(f"{__version__}\0{raw}")


class _Outputs:
    """One run's rendering: the Jinja environment is made (jinja2 imported) on first use."""

    def __init__(
        self,
        files: ProjectFiles,
        manifest: Manifest,
        cache: GenerateCache | None,
        templates: Path | None,
        stages: Stages,
    ) -> None:
        self.files = files
        self.manifest = manifest
        self.cache = cache
        self.templates = templates
        self.stages = stages
        self._renderer: Renderer | None = None

    @property
    def renderer(self) -> Renderer:
        if self._renderer is None:
            from .environment import Renderer  # jinja2: only when something renders

            self._renderer = Renderer(self.templates)
        return self._renderer

    def _read(self, rel: str) -> str | None:
        if self.cache is not None:
            return self.cache.read(self.files, rel)
        return self.files.read_text(rel)

    def known_text(self, artifact: Artifact, sha: str) -> str | None:
        """The text with digest `sha` that this output had when last written, if still at hand."""
        if artifact.owner is Owner.GENERATED:
            text = self._read(artifact.path)
        else:
            entry = self.manifest.files.get(artifact.path)
            text = entry.base if entry is not None else None
        return text if text is not None and digest(text) == sha else None

    def _previous_format(self, path: str, sha: str) -> str | None:
        """The digest of the formatted text of the same render, from the cache or the manifest."""
        record = self.cache.outputs.get(path) if self.cache is not None else None
        if record is not None and record.get("render") == sha:
            return record.get("sha")
        entry = self.manifest.files.get(path)
        if entry is not None and entry.render == sha:
            return entry.sha256
        return None

    def _unformatted(self, artifact: Artifact, raw: str, sha: str) -> str | None:
        """`raw` as it is written when black need not run on it; None when it must.

        Not Python: as it is. The same render as last time: the text formatted
        then. A built-in template's output with no line over 100 columns:
        as it is (Note [Black-stable output] in api/pyexpr.py).
        """
        if not artifact.is_python:
            return raw
        previous = self._previous_format(artifact.path, sha)
        if previous is not None:
            known = self.known_text(artifact, previous)
            if known is not None:
                return known
        if self.renderer.is_builtin(artifact.template) and is_black_stable(raw):
            return raw
        return None

    def render_all(self, artifacts: Sequence[Artifact]) -> list[Rendered]:
        """Render `artifacts`; those that need black are formatted together (in parallel if many)."""
        with self.stages("render"):
            raws = [self._raw(a) for a in artifacts]
        jobs: list[FormatJob] = []
        decided = []
        for artifact, (raw, initial) in zip(artifacts, raws, strict=True):
            template = str(self.renderer.template_path(artifact.template))
            sha = render_sha(raw)
            text = self._unformatted(artifact, raw, sha)
            if text is None:
                jobs.append(FormatJob(raw, template, artifact.path))
            initial_needs_black = (
                initial is not None
                and artifact.is_python
                and not (self.renderer.is_builtin(artifact.template) and is_black_stable(initial))
            )
            if initial is not None and initial_needs_black:
                jobs.append(FormatJob(initial, template, artifact.path))
            decided.append((artifact, sha, text, initial, initial_needs_black))
        with self.stages("format"):
            formatted = iter(format_many(jobs))
        result = []
        for artifact, sha, text, initial, initial_needs_black in decided:
            text = next(formatted) if text is None else text
            initial = next(formatted) if initial_needs_black else initial
            result.append(
                Rendered(artifact.path, artifact.owner, artifact.source, text, sha, initial)
            )
        return result

    def _raw(self, artifact: Artifact) -> tuple[str, str | None]:
        # Note [Internal errors]: a bug computing the variables names the spec they come from
        with internal_errors(self.files.root / artifact.source, artifact.path):
            context = artifact.context
            make_initial = artifact.make_initial_context
            initial_context = make_initial() if make_initial is not None else None
        raw = self.renderer.render(artifact.template, context)
        initial = None
        if initial_context is not None:
            initial = self.renderer.render(artifact.template, initial_context)
        return raw, initial

    def render(self, artifact: Artifact) -> Rendered:
        """One artifact rendered and formatted."""
        return self.render_all([artifact])[0]

    def skipped(self, artifact: Artifact, record: Mapping[str, str]) -> Rendered:
        """An output whose key is unchanged: its text is loaded only if the plan needs it."""
        sha = record["sha"]

        def load() -> str:
            known = self.known_text(artifact, sha)
            return known if known is not None else self.render(artifact).content

        return Rendered(
            artifact.path,
            artifact.owner,
            artifact.source,
            render_sha=record.get("render", ""),
            sha=sha,
            load=load,
        )


def render_outputs(
    artifacts: Sequence[Artifact],
    *,
    files: ProjectFiles,
    manifest: Manifest,
    templates: Path | None,
    keys: Mapping[str, str] | None = None,
    cache: GenerateCache | None = None,
    stages: Stages | None = None,
) -> list[Rendered]:
    """Every artifact rendered and formatted, except those whose key matches the cache's. Reads only."""
    outputs = _Outputs(files, manifest, cache, templates, stages or Stages())
    skipped: dict[str, Rendered] = {}
    for artifact in artifacts:
        record = cache.outputs.get(artifact.path) if cache is not None and keys else None
        fresh = artifact.make_initial_context is not None
        if record is not None and keys is not None and record.get("key") == keys.get(artifact.path):
            if not fresh and isinstance(record.get("sha"), str):
                skipped[artifact.path] = outputs.skipped(artifact, record)
    rendered = iter(outputs.render_all([a for a in artifacts if a.path not in skipped]))
    return [skipped[a.path] if a.path in skipped else next(rendered) for a in artifacts]


def remember_outputs(
    cache: GenerateCache, rendered: Sequence[Rendered], keys: Mapping[str, str]
) -> None:
    """Record each output's key and digests for the next run."""
    records = {
        item.path: {"key": keys[item.path], "sha": item.sha, "render": item.render_sha}
        for item in rendered
        if item.path in keys
    }
    if records != cache.outputs:
        cache.outputs = records
        cache.dirty = True
