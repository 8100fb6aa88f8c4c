"""Format generated Python with black, once, just before writing."""

from __future__ import annotations

from .errors import Diagnostic, OpgenError

__all__ = ["format_python"]

_MODE = None


def format_python(text: str, template: str, path: str) -> str:
    global _MODE
    import black

    if _MODE is None:
        _MODE = black.Mode(line_length=100)
    try:
        return black.format_str(text, mode=_MODE)
    except black.InvalidInput as exc:
        raise OpgenError(
            Diagnostic(
                None,
                None,
                f"template {template} produced invalid Python for {path}: {exc}",
                "this is a template bug: check the template (or your override of it)",
            )
        ) from None
