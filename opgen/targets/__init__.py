"""The files opgen produces: for each, its template, output path and owner.

This package is the one place that knows where outputs go and which template
makes them: `python.py` (the Python side of every op), `cpp.py` (C++ sources,
the compiled library and its glue), `project/load.py` (package-wide files, and
`collect_artifacts`, the whole list). `opgen.api` computes what the templates
print; it knows no paths.

Who owns each file: Note [Ownership] in spec/paths.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..spec.paths import GENERATED_MARK, Owner

__all__ = ["Artifact", "header", "names_source"]


def header(source: str, comment: str = "#") -> str:
    """The first line of a generated file, in its comment syntax."""
    return f"{comment} {GENERATED_MARK} from {source}. Do not edit: change the spec and run `opgen generate`."


def names_source(text: str, source: str) -> bool:
    """Whether `text` begins with the generated header naming `source` (`#` or `//` comments)."""
    first = text.split("\n", 1)[0].rstrip("\r")
    return first in (header(source, "#"), header(source, "//"))


Context = Mapping[str, Any]


@dataclass(frozen=True)
class Artifact:
    """One output file. Its template context is computed on first use (and only then)."""

    path: str  # relative to the project root, posix
    template: str
    owner: Owner
    source: str  # the spec (or opgen.toml) it comes from
    make_context: Callable[[], Context] = field(repr=False, compare=False)
    # A fresh user file's first text comes from the same template with this context
    # instead (Note [Starter bodies] in api/starter.py); the scaffold stays the merge base.
    make_initial_context: Callable[[], Context] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def context(self) -> Context:
        return self.make_context()

    @property
    def is_python(self) -> bool:
        return self.path.endswith(".py")
