"""What a run does to each file: the `Action` it takes and the `Change` the writer applies.

Each action carries its meaning, so the writer, `opgen generate`, `opgen build`
and the command line's report all read the same answers: does it write the
file, is the file stale (for `--check`), did the run fail, how is it shown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from .manifest import Entry

__all__ = ["Action", "Change", "summarize"]


class Action(StrEnum):
    """What a run does to one file; the manifest and the report use the values."""

    CREATE = "create"  # a file opgen makes for the first time
    UPDATE = "update"  # a generated file (or an untouched user file) gets the new render
    UNCHANGED = "unchanged"
    MERGE = "merge"  # a user file gets the scaffold's changes merged into the user's edits
    CONFLICT = "conflict"  # merged with conflict markers; the user's version is backed up
    UNRESOLVED = "unresolved"  # a user file still holds conflict markers from an earlier run
    EDITED = "edited"  # a generated file was edited by hand: the run writes nothing
    OVERWRITE = "overwrite"  # such a file, overwritten because of --force
    REMOVE = "remove"  # a generated file whose spec is gone
    KEEP = "keep"  # a user file opgen leaves as it is (its spec is gone, or it is not opgen's)
    SPARE = "spare"  # listed as generated, but not a file opgen may remove: left as it is
    ATTACH = "attach"  # a user file whose record was lost, merged again from now on
    UNTRACKED = (
        "untracked"  # no record of the file, and it differs from the render: a person decides
    )

    @property
    def writes(self) -> bool:
        """Whether applying the change writes the file."""
        return self in _WRITES

    @property
    def stale(self) -> bool:
        """Whether `--check` reports the file: the run would change it, or a person must look at it."""
        return self not in (Action.UNCHANGED, Action.KEEP)

    @property
    def failed(self) -> bool:
        """Whether the run exits 1 because of this file."""
        return self in (Action.CONFLICT, Action.UNRESOLVED, Action.EDITED, Action.UNTRACKED)

    @property
    def stops(self) -> bool:
        """Whether the run writes nothing at all because of this file (a person must decide first)."""
        return self in (Action.EDITED, Action.UNTRACKED)

    @property
    def to_stderr(self) -> bool:
        """Reported as a problem (stderr) rather than as progress."""
        return self.failed or self is Action.SPARE

    @property
    def label(self) -> str:
        """The report's word for a change that was applied."""
        return _LABELS[self]

    @property
    def planned_label(self) -> str:
        """The report's words for a change that was only planned (`--check`, `--dry-run`, a stopped run)."""
        if self is Action.CONFLICT:
            return "would conflict"
        return f"would be {self.label}" if self.writes or self is Action.REMOVE else self.label

    @property
    def summary_label(self) -> str:
        """How the summary line counts it ("3 created")."""
        return _SUMMARY.get(self, self.label)


_WRITES = frozenset({Action.CREATE, Action.UPDATE, Action.MERGE, Action.CONFLICT, Action.OVERWRITE})
_LABELS = {
    Action.CREATE: "created",
    Action.UPDATE: "updated",
    Action.UNCHANGED: "unchanged",
    Action.MERGE: "merged",
    Action.CONFLICT: "conflict",
    Action.UNRESOLVED: "unresolved",
    Action.EDITED: "edited",
    Action.OVERWRITE: "overwritten",
    Action.REMOVE: "removed",
    Action.KEEP: "kept",
    Action.SPARE: "not removed",
    Action.ATTACH: "re-attached",
    Action.UNTRACKED: "untracked",
}
_SUMMARY = {Action.CONFLICT: "conflicts", Action.EDITED: "edited by hand"}
# the summary always shows these counts, the others only when not zero
_SUMMARY_ALWAYS = (Action.CREATE, Action.UPDATE, Action.MERGE, Action.UNCHANGED, Action.CONFLICT)
_SUMMARY_IF_ANY = (
    Action.REMOVE,
    Action.KEEP,
    Action.UNRESOLVED,
    Action.EDITED,
    Action.OVERWRITE,
    Action.SPARE,
    Action.ATTACH,
    Action.UNTRACKED,
)


def summarize(actions: Iterable[Action]) -> str:
    """One line counting a run's actions: "2 created, 0 updated, 0 merged, 5 unchanged, 0 conflicts"."""
    counts = Counter(actions)
    parts = [f"{counts[a]} {a.summary_label}" for a in _SUMMARY_ALWAYS]
    parts += [f"{counts[a]} {a.summary_label}" for a in _SUMMARY_IF_ANY if counts[a]]
    return ", ".join(parts)


@dataclass(frozen=True)
class Change:
    """What one run does to one file."""

    path: str
    action: Action
    old: str | None
    new: str | None
    entry: Entry | None  # manifest entry after the change; None removes it
    note: str = ""
    backup: bool = False  # the writer saves `old` under .opgen/backup/ before changing the file

    @property
    def writes(self) -> bool:
        return self.action.writes
