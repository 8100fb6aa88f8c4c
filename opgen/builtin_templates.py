"""Where opgen's own templates live; a module of its own so a no-op build need not import Jinja."""

from __future__ import annotations

from pathlib import Path

__all__ = ["builtin_templates_dir"]


def builtin_templates_dir() -> Path:
    """Installed wheels carry templates inside the package; a checkout keeps them at the top."""
    packaged = Path(__file__).parent / "templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "templates"
