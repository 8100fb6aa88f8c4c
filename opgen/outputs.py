"""Render and format a project's outputs; those whose key is unchanged are not rendered at all.

Note [Generate cache] in inputs.py says when an output is skipped. A skipped
output is known by the digest of its text; the text itself is read from the
disk (a generated file) or the manifest (a user file's scaffold) only when
the plan needs it, and rendered again only if neither holds it any more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from . import __version__
from .cache import GenerateCache
from .format import format_python
from .fs import ProjectFiles
from .manifest import Manifest, digest
from .render import Renderer
from .stages import Stages
from .targets import Artifact, Owner
from .writer import Rendered

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

    def formatted(self, artifact: Artifact, raw: str, sha: str) -> str:
        """`raw` formatted; the last formatted text when the render is unchanged since."""
        if not artifact.is_python:
            return raw
        previous = self._previous_format(artifact.path, sha)
        if previous is not None:
            known = self.known_text(artifact, previous)
            if known is not None:
                return known
        template = str(self.renderer.template_path(artifact.template))
        with self.stages("format"):
            return format_python(raw, template, artifact.path)

    def _previous_format(self, path: str, sha: str) -> str | None:
        """The digest of the formatted text of the same render, from the cache or the manifest."""
        record = self.cache.outputs.get(path) if self.cache is not None else None
        if record is not None and record.get("render") == sha:
            return record.get("sha")
        entry = self.manifest.files.get(path)
        if entry is not None and entry.render == sha:
            return entry.sha256
        return None

    def render(self, artifact: Artifact) -> Rendered:
        with self.stages("render"):
            raw = self.renderer.render(artifact.template, artifact.context)
            initial = None
            if artifact.make_initial_context is not None:
                initial = self.renderer.render(artifact.template, artifact.make_initial_context())
        sha = render_sha(raw)
        text = self.formatted(artifact, raw, sha)
        if initial is not None and artifact.is_python:
            template = str(self.renderer.template_path(artifact.template))
            with self.stages("format"):
                initial = format_python(initial, template, artifact.path)
        return Rendered(artifact.path, artifact.owner, artifact.source, text, sha, initial)

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
    files: ProjectFiles,
    manifest: Manifest,
    templates: Path | None,
    *,
    keys: Mapping[str, str] | None = None,
    cache: GenerateCache | None = None,
    stages: Stages | None = None,
) -> list[Rendered]:
    """Every artifact rendered and formatted, except those whose key matches the cache's. Reads only."""
    outputs = _Outputs(files, manifest, cache, templates, stages or Stages())
    result: list[Rendered] = []
    for artifact in artifacts:
        record = cache.outputs.get(artifact.path) if cache is not None and keys else None
        fresh = artifact.make_initial_context is not None
        if record is not None and keys is not None and record.get("key") == keys.get(artifact.path):
            if not fresh and isinstance(record.get("sha"), str):
                result.append(outputs.skipped(artifact, record))
                continue
        result.append(outputs.render(artifact))
    return result


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
