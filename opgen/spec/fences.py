"""Fenced regions: the lines opgen owns inside a file the user owns.

Note [Fenced regions]
Some lines of a kernel stub are opgen's, not the user's: the input checks
and the dtype guard, which follow the spec. They sit between two labelled
comment lines,
    // opgen: begin checks (regenerated from ops/foo.toml; edit the spec, not these lines)
    ...
    // opgen: end checks
and every `opgen generate` rewrites what is between them from the spec, in
place, while the rest of the file stays the user's and merges as usual
(Note [Merge rules] in write/merge.py). So a new dtype, `[grad]` (float64 for
gradcheck) or a new tensor argument changes the checks without a conflict
with the user's edits around them. A user who edits inside a fence gets it
back as the spec says, the edited version saved as a backup and reported; a
user who deletes a whole fence (both lines) opts out of it, and opgen leaves
it out from then on.
"""

from __future__ import annotations

import re

__all__ = ["FENCE_LINE", "fence_lines", "CHECKS"]

CHECKS = "checks"

# `<indent>// opgen: begin NAME (...)` or `<indent># opgen: end NAME`
FENCE_LINE = re.compile(
    r"[ \t]*(?:#|//)[ \t]*opgen: (?P<kind>begin|end) (?P<name>[a-z_]+)\b.*\n?\Z"
)


def fence_lines(name: str, source: str, comment: str = "//") -> tuple[str, str]:
    """The begin and end lines of fence `name` of a file made from spec `source`."""
    return (
        f"{comment} opgen: begin {name} (regenerated from {source}; edit the spec, not these lines)",
        f"{comment} opgen: end {name}",
    )
