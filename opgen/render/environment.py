"""Jinja environment: project overrides first, built-in templates last.

Templates receive finished strings from `opgen.api`; they only lay them out.

Note [Sandboxed templates]
Every template renders in Jinja's `ImmutableSandboxedEnvironment`: no
attribute or item starting with `_` (so no `__globals__`, `__class__` or
`__subclasses__` escape), no calls that change the values a template
receives. Template overrides come with the checkout, so `opgen generate
--check` on a pull request must not run the pull request's code; the
built-in templates render the same way, one environment for all (the
sandbox costs nothing measurable here: a template only lays out strings).
Overrides are read through the confined path (Note [Confined writes]): a
symlink in the override folder is refused, so a template cannot pull a file
from outside the project into generated code. The environment is that
sandbox bounded in time and size (`BoundedSandbox`, Note [Bounded rendering]
in render/sandbox.py): an override that never ends, or builds gigabytes, stops with
a diagnostic at its line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jinja2
import jinja2.exceptions
import jinja2.sandbox

from ..errors import Diagnostic, OpgenError
from ..incremental.inputs import builtin_templates_dir
from ..write.confined import Confined
from .budget import RenderBudget, RenderLimitExceeded, RenderLimits
from .sandbox import BoundedSandbox, bounded_render

__all__ = ["builtin_templates_dir", "Renderer"]


class _OverrideLoader(jinja2.BaseLoader):
    """A project's template folder, read through the confined path (no symlinks, regular files)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files = Confined(folder)

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        rel = "/".join(jinja2.loaders.split_template_path(template))
        data = self.files.read_bytes(rel)
        if data is None:
            raise jinja2.TemplateNotFound(template)
        path = self.folder / rel
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise OpgenError(
                Diagnostic(path, None, f"template is not UTF-8: {exc}", "save it as UTF-8")
            ) from None
        return text, str(path), lambda: True  # one environment per run: never stale


class Renderer:
    """Renders opgen's templates, a project's overrides first (Note [Sandboxed templates])."""

    def __init__(self, override_dir: Path | None = None) -> None:
        self.override_dir = override_dir
        loaders: list[jinja2.BaseLoader] = []
        if override_dir is not None and override_dir.is_dir():
            loaders.append(_OverrideLoader(override_dir))
        loaders.append(jinja2.FileSystemLoader(str(builtin_templates_dir())))
        self.limits = RenderLimits.from_environment()
        self._trusted = RenderBudget(self.limits, checked=False)
        self.env = BoundedSandbox(
            builtin_templates_dir(),
            loader=jinja2.ChoiceLoader(loaders),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            autoescape=False,
        )
        self._builtin: dict[str, bool] = {}

    def is_builtin(self, name: str) -> bool:
        """Whether `name` renders from built-in sources only: no override of it or of any
        template it includes or imports (their output is black-stable: opgen/render/format.py)."""
        if self.override_dir is None or not os.path.lexists(self.override_dir):
            return True  # no override folder: nothing to look for
        if name not in self._builtin:
            self._builtin[name] = self._overrides_none_of(name, set())
        return self._builtin[name]

    def _overrides_none_of(self, name: str, seen: set[str]) -> bool:
        import jinja2.meta

        if name in seen:
            return True
        seen.add(name)
        if self.override_dir is not None and os.path.lexists(self.override_dir / name):
            return False  # an override (or anything in its place: the loader judges it)
        source = (builtin_templates_dir() / name).read_text(encoding="utf-8")
        referenced = jinja2.meta.find_referenced_templates(self.env.parse(source))
        return all(ref is not None and self._overrides_none_of(ref, seen) for ref in referenced)

    def template_path(self, name: str) -> Path:
        if self.override_dir is not None and (self.override_dir / name).is_file():
            return self.override_dir / name
        return builtin_templates_dir() / name

    def render(self, name: str, context: Mapping[str, Any]) -> str:
        """Render one template; any error in it becomes a diagnostic at the template's file:line.

        A render that involves an override is bounded in time and size (Note [Bounded
        rendering] in render/sandbox.py); every render's text is checked once it is whole.
        """
        try:
            if self.is_builtin(name):  # opgen's own templates are trusted: no timer, no checks
                self.env.budget = self._trusted
                text = self.env.get_template(name).render(**context)
            else:
                with bounded_render(self.env, self.limits):
                    text = self.env.get_template(name).render(**context)
            self._trusted.check_output(len(text))
            return text
        except OpgenError:
            raise
        except RenderLimitExceeded as exc:
            where, line, via = self._locate(exc, name)
            raise OpgenError(Diagnostic(where, line, f"{exc.message}{via}", exc.hint)) from None
        except jinja2.exceptions.SecurityError as exc:
            where, line, via = self._locate(exc, name)
            raise OpgenError(
                Diagnostic(
                    where,
                    line,
                    f"template tried something the sandbox forbids: {exc}{via}",
                    "templates only lay out the variables they receive (docs/templates.md): "
                    "no attributes starting with `_`, no calls that change a value",
                )
            ) from None
        except jinja2.TemplateSyntaxError as exc:
            path = Path(exc.filename) if exc.filename else self.template_path(name)
            raise OpgenError(
                Diagnostic(
                    path, exc.lineno, f"template syntax error: {exc.message}", "fix the template"
                )
            ) from None
        except jinja2.TemplateNotFound as exc:
            where, line, via = self._locate(exc, name)
            hint = "check the name; `opgen templates list` shows every template"
            raise OpgenError(
                Diagnostic(where, line, f"template {exc.name!r} not found{via}", hint)
            ) from None
        except jinja2.UndefinedError as exc:
            where, line, via = self._locate(exc, name)
            hint = "docs/templates.md lists the variables each template receives"
            raise OpgenError(
                Diagnostic(
                    where, line, f"template uses an undefined variable: {exc.message}{via}", hint
                )
            ) from None
        except (
            Exception
        ) as exc:  # a template calling something wrongly: still name the template and line
            where, line, via = self._locate(exc, name)
            raise OpgenError(
                Diagnostic(
                    where,
                    line,
                    f"template failed: {type(exc).__name__}: {exc}{via}",
                    "fix the template",
                )
            ) from None

    def _locate(self, exc: BaseException, name: str) -> tuple[Path, int | None, str]:
        """The innermost template frame of `exc` (file, line) and the frames that led there."""
        roots = [d.resolve() for d in (self.override_dir, builtin_templates_dir()) if d is not None]
        frames: list[tuple[Path, int]] = []
        tb = exc.__traceback__
        while tb is not None:
            filename = tb.tb_frame.f_code.co_filename
            path = Path(filename)
            if path.is_absolute() and any(path.resolve().is_relative_to(r) for r in roots):
                if not frames or frames[-1] != (path, tb.tb_lineno):
                    frames.append((path, tb.tb_lineno))
            tb = tb.tb_next
        if not frames:
            return self.template_path(name), None, ""
        path, line = frames[-1]
        via = "".join(f" (from {p}:{n})" for p, n in reversed(frames[:-1]) if p != path)
        return path, line, via
