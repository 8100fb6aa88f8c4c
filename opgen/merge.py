"""Three-way merge of a user-owned file with its new scaffold.

base = the scaffold opgen generated last time, ours = the user's file,
theirs = the new scaffold. See Note [Merge rules].

Note [Merge rules]
Each side's edits are the non-equal opcodes of a line diff against base: a
replaced range of base lines, or an insertion at a point. Edits of the two
sides conflict only when they really touch the same base lines:
  * two ranges that share a base line, or
  * an insertion strictly inside the other side's range, or
  * two different insertions at the same point.
Adjacent edits do not conflict (unlike `git merge-file`): the usual flow is
"opgen changed the `def` line, the user replaced the line under it", and that
must merge cleanly. An insertion just before (after) the other side's range
goes before (after) it. A conflict keeps both versions between standard
diff3-style markers, so every line the user wrote is in the result: outside
the markers, inside them, or (when both sides made the same edit) once.
Line endings are compared without CR and the result uses the user's style;
a missing final newline on the user's side stays missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

__all__ = ["merge3", "MergeResult", "CONFLICT_START", "has_conflict_markers"]

CONFLICT_START = "<<<<<<< "
_BASE_MARK = "||||||| "
_SPLIT_MARK = "======="
_END_MARK = ">>>>>>> "


@dataclass(frozen=True)
class MergeResult:
    text: str
    conflicts: int


@dataclass(frozen=True)
class _Edit:
    start: int  # base range [start, end) is replaced by `lines`
    end: int
    lines: tuple[str, ...]
    side: str  # "ours" or "theirs"


def has_conflict_markers(text: str, ours_label: str = "yours", theirs_label: str = "opgen") -> bool:
    """True when `text` still holds a conflict block that `merge3` wrote with these labels."""
    start, end = f"{CONFLICT_START}{ours_label}", f"{_END_MARK}{theirs_label}"
    opened = False
    for line in text.splitlines():
        if line.rstrip() == start:
            opened = True
        elif opened and line.startswith(end):
            return True
    return False


def _split(text: str) -> list[str]:
    """Lines without CR, each ending in LF (a missing final newline is added)."""
    parts = text.replace("\r\n", "\n").split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1] + "\n")
    return lines


def _edits(base: list[str], other: list[str], side: str) -> list[_Edit]:
    matcher = SequenceMatcher(None, base, other, autojunk=False)
    return [_Edit(i1, i2, tuple(other[j1:j2]), side) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _joins(edit: _Edit, start: int, end: int) -> bool:
    """Does `edit` (sorted after the group [start, end)) conflict with the group? Note [Merge rules]."""
    if edit.start < end:
        return True
    return edit.start == edit.end == start == end  # two insertions at one point


def _apply(base: list[str], start: int, end: int, edits: list[_Edit]) -> list[str]:
    result: list[str] = []
    position = start
    for edit in edits:
        result.extend(base[position : edit.start])
        result.extend(edit.lines)
        position = edit.end
    result.extend(base[position:end])
    return result


def merge3(base: str, ours: str, theirs: str, ours_label: str = "yours", theirs_label: str = "opgen") -> MergeResult:
    if ours == base or ours == theirs:
        return MergeResult(theirs, 0)
    if theirs == base:
        return MergeResult(ours, 0)
    b, o, t = _split(base), _split(ours), _split(theirs)
    # sides sort stably: at one start, an insertion sorts before a range
    edits = sorted(_edits(b, o, "ours") + _edits(b, t, "theirs"), key=lambda e: (e.start, e.end))
    out: list[str] = []
    conflicts = 0
    position = 0
    index = 0
    while index < len(edits):
        group = [edits[index]]
        start, end = group[0].start, group[0].end
        index += 1
        while index < len(edits) and _joins(edits[index], start, end):
            end = max(end, edits[index].end)
            group.append(edits[index])
            index += 1
        out.extend(b[position:start])
        mine = _apply(b, start, end, [e for e in group if e.side == "ours"])
        new = _apply(b, start, end, [e for e in group if e.side == "theirs"])
        if len({e.side for e in group}) == 1:
            out.extend(mine if group[0].side == "ours" else new)
        elif mine == new:
            out.extend(mine)
        else:
            conflicts += 1
            out.extend(_conflict(mine, b[start:end], new, ours_label, theirs_label))
        position = end
    out.extend(b[position:])
    return MergeResult(_restore_style("".join(out), ours), conflicts)


def _conflict(mine: list[str], base: list[str], new: list[str], ours_label: str, theirs_label: str) -> list[str]:
    """Markers around the differing middle; lines both sides agree on stay outside (as zdiff3)."""
    head = 0
    while head < min(len(mine), len(new)) and mine[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(mine), len(new)) - head and mine[-1 - tail] == new[-1 - tail]:
        tail += 1
    return [
        *mine[:head],
        f"{CONFLICT_START}{ours_label}\n",
        *mine[head : len(mine) - tail],
        f"{_BASE_MARK}previous scaffold\n",
        *base,
        f"{_SPLIT_MARK}\n",
        *new[head : len(new) - tail],
        f"{_END_MARK}{theirs_label}\n",
        *mine[len(mine) - tail :],
    ]


def _restore_style(text: str, ours: str) -> str:
    """Give the merged text the user's line endings and final-newline choice."""
    if ours and not ours.endswith(("\n", "\r")) and text.endswith("\n"):
        last = ours.replace("\r\n", "\n").rsplit("\n", 1)[-1]
        if text[:-1].endswith(last):
            text = text[:-1]
    if "\r\n" in ours and ours.count("\r\n") * 2 >= ours.count("\n"):
        text = text.replace("\n", "\r\n")
    return text
