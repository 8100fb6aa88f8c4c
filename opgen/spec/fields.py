"""Small checks shared by the validators: key sets, value types, suggestions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import DiagnosticSink
from .load import LoadedToml

__all__ = ["suggest", "check_keys", "typed", "string_list", "where", "shown", "TYPE_NAMES"]

TYPE_NAMES = {
    str: "a string",
    bool: "true or false",
    list: "a list",
    dict: "a table",
    int: "an integer",
}


def suggest(word: str, choices: tuple[str, ...] | list[str], label: str = "known keys") -> str:
    """'did you mean ...?' for a near miss, else the list of what is allowed."""
    import difflib

    match = difflib.get_close_matches(word, list(choices), n=1)
    return f"did you mean {match[0]!r}?" if match else f"{label}: {', '.join(choices) or 'none'}"


def shown(value: Any, limit: int = 60) -> str:
    """repr() of a user's value, cut short so one bad value cannot flood the terminal."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def where(path: tuple[Any, ...]) -> str:
    """A key path as the user would write it: test.samples[1].x (samples count from 1)."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part + 1}]"
        else:
            text += ("." if text else "") + str(part)
    return text


def check_keys(
    sink: DiagnosticSink,
    doc: LoadedToml,
    table: dict[str, Any],
    allowed: Iterable[str],
    prefix: tuple[str | int, ...],
) -> None:
    for key in table:
        if key not in allowed:
            sink.error(
                doc.line(*prefix, key),
                f"unknown key {where(prefix + (key,))!r}",
                suggest(key, tuple(allowed)),
            )


def typed(sink: DiagnosticSink, doc: LoadedToml, value: Any, kind: type, *path: Any) -> bool:
    if isinstance(value, kind) and not (kind is not bool and isinstance(value, bool)):
        return True
    example = {str: '"..."', bool: "true", list: "[...]", dict: "{...}", int: "1"}.get(kind, "...")
    sink.error(
        doc.line(*path),
        f"{where(path)} must be {TYPE_NAMES.get(kind, kind.__name__)}, not {shown(value)}",
        f"write {where(path).rsplit('.', 1)[-1]} = {example}",
    )
    return False


def string_list(
    sink: DiagnosticSink, doc: LoadedToml, value: Any, *path: Any
) -> tuple[str, ...] | None:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    sink.error(
        doc.line(*path),
        f"{where(path)} must be a string or a list of strings, not {shown(value)}",
        f'e.g. {path[-1]} = ["..."]',
    )
    return None
