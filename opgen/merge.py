"""Three-way merge of a user-owned file with its new scaffold.

base = the scaffold opgen generated last time, ours = the user's file,
theirs = the new scaffold. Lines changed on one side only are taken from that
side; lines changed on both sides differently become a conflict with the
standard markers, so no user line is ever dropped.
"""

from __future__ import annotations

from difflib import SequenceMatcher

__all__ = ["merge3", "MergeResult"]


class MergeResult:
    def __init__(self, text: str, conflicts: int):
        self.text = text
        self.conflicts = conflicts


def _changes(base: list[str], other: list[str]) -> list[tuple[int, int, list[str]]]:
    """Regions of `base` that `other` replaces: (start, end, replacement)."""
    matcher = SequenceMatcher(None, base, other, autojunk=False)
    return [(i1, i2, other[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def merge3(base: str, ours: str, theirs: str, ours_label: str = "yours", theirs_label: str = "opgen") -> MergeResult:
    if ours == base or ours == theirs:
        return MergeResult(theirs, 0)
    if theirs == base:
        return MergeResult(ours, 0)
    b, o, t = base.splitlines(True), ours.splitlines(True), theirs.splitlines(True)
    for lines in (b, o, t):
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
    ours_changes = [(s, e, r, "o") for s, e, r in _changes(b, o)]
    theirs_changes = [(s, e, r, "t") for s, e, r in _changes(b, t)]
    events = sorted(ours_changes + theirs_changes, key=lambda c: (c[0], c[1]))
    out: list[str] = []
    conflicts = 0
    position = 0
    index = 0
    while index < len(events):
        start, end, _, _ = events[index]
        group = [events[index]]
        index += 1
        # changes touching or overlapping the same base region form one hunk
        while index < len(events) and (events[index][0] < end or (events[index][0] == end == start) or events[index][0] == start):
            end = max(end, events[index][1])
            group.append(events[index])
            index += 1
        out.extend(b[position:start])
        sides = {side for *_, side in group}
        if len(sides) == 1:
            out.extend(_apply(b, start, end, group))
        else:
            mine = _apply(b, start, end, [g for g in group if g[3] == "o"])
            new = _apply(b, start, end, [g for g in group if g[3] == "t"])
            if mine == new:
                out.extend(mine)
            else:
                conflicts += 1
                out.append(f"<<<<<<< {ours_label}\n")
                out.extend(mine)
                out.append("||||||| previous scaffold\n")
                out.extend(b[start:end])
                out.append("=======\n")
                out.extend(new)
                out.append(f">>>>>>> {theirs_label}\n")
        position = end
    out.extend(b[position:])
    return MergeResult("".join(out), conflicts)


def _apply(base: list[str], start: int, end: int, changes: list) -> list[str]:
    result: list[str] = []
    position = start
    for s, e, replacement, _ in sorted(changes, key=lambda c: (c[0], c[1])):
        result.extend(base[position:s])
        result.extend(replacement)
        position = max(position, e)
    result.extend(base[position:end])
    return result
