"""Jinja environment: project overrides first, built-in templates last.

Templates receive finished strings from `opgen.api`; they only lay them out.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import Diagnostic, OpgenError

__all__ = ["builtin_templates_dir", "Renderer"]


def builtin_templates_dir() -> Path:
    """Installed wheels carry templates inside the package; a checkout keeps them at the top."""
    packaged = Path(__file__).parent / "templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "templates"


class Renderer:
    def __init__(self, override_dir: Path | None = None):
        import jinja2

        self.override_dir = override_dir
        loaders: list[jinja2.BaseLoader] = []
        if override_dir is not None and override_dir.is_dir():
            loaders.append(jinja2.FileSystemLoader(str(override_dir)))
        loaders.append(jinja2.FileSystemLoader(str(builtin_templates_dir())))
        self.env = jinja2.Environment(
            loader=jinja2.ChoiceLoader(loaders),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            autoescape=False,
        )

    def template_path(self, name: str) -> Path:
        if self.override_dir is not None and (self.override_dir / name).is_file():
            return self.override_dir / name
        return builtin_templates_dir() / name

    def render(self, name: str, context: dict[str, Any]) -> str:
        import jinja2

        try:
            return self.env.get_template(name).render(**context)
        except jinja2.TemplateSyntaxError as exc:
            path = Path(exc.filename) if exc.filename else self.template_path(name)
            raise OpgenError(Diagnostic(path, exc.lineno, f"template syntax error: {exc.message}", "fix the template")) from None
        except jinja2.TemplateNotFound as exc:
            raise OpgenError(Diagnostic(None, None, f"template {exc.name!r} not found", "check the template folder")) from None
        except jinja2.UndefinedError as exc:
            path, line = self.template_path(name), _template_line(exc, name)
            raise OpgenError(
                Diagnostic(path, line, f"template uses an undefined variable: {exc.message}", "see `opgen templates list` for the variables each template receives")
            ) from None


def _template_line(exc: BaseException, name: str) -> int | None:
    tb = exc.__traceback__
    line = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.endswith(name) or "<template>" in code.co_filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
