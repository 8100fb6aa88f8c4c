"""`opgen bench`."""

from __future__ import annotations


def register(app) -> None:
    """Not registered yet."""
