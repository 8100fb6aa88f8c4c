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
must merge cleanly. Where the user rewrote lines in which the new scaffold
only changed comments, or only added a fence (below), the user's version
stands without a conflict: opgen's comments are advice, and a user who
replaced the lines a fence would hold owns them. An insertion just before (after) the other side's range
goes before (after) it. A conflict keeps both versions between standard
diff3-style markers, so every line the user wrote is in the result: outside
the markers, inside them, or (when both sides made the same edit) once.
Line endings are compared without CR and the result uses the user's style;
a missing final newline on the user's side stays missing.

Note [Placeholder lines]
A scaffold line that ends in the comment `# opgen: placeholder` (Python) or
`// opgen: placeholder` (C++, CUDA) is there to be replaced: the
`raise NotImplementedError(...)` / `STD_TORCH_CHECK(false, ...)` line of a
kernel stub (templates, overrides included, mark them). When the new scaffold
only rewords such a line (a new message, op name or file path) and the user
has changed or deleted it, the user's side wins without a conflict: replacing
the placeholder is the point. A user who left it alone gets the new wording.
A rewording is found inside each range the new scaffold replaced, by aligning
that range again with every placeholder line (at one indentation) counted as
the same line; a placeholder opgen adds or removes is an ordinary edit. Only
marked lines get this: the input checks of a C++ stub name arguments and
dtypes, so a check the user edited and opgen changed is still a conflict.
A conflict block shows the new scaffold with its new placeholders. A scaffold
written before the markers existed has unmarked placeholders: a base line
equal to a marked line of the new scaffold without its marker counts as marked.

Note [Imports the scaffold drops]
A kernel stub imports only the names its signatures and starter use (no
unused import in a fresh file). A user's file can use a name the scaffold has
stopped importing (`torch` in a body that replaced the placeholder), so the
new scaffold never removes a Python import line from an edited file: an edit
of the scaffold that only deletes import lines (and blank lines) is dropped,
and one that also rewrites other lines keeps the imports it would delete.
An untouched stub becomes the new scaffold whole.

Fenced regions (Note [Fenced regions] in api/fences.py) merge as one line
each: before the line diff, each well-formed fence of base, ours and theirs
(one begin and one end line of its name, in that order) becomes a single
marker line; after it, each marker left in the result becomes the new
scaffold's fence, whole. So the lines inside a fence never conflict, and the
user's edits around it merge as usual. When the user's version of a fence
differs from both the new one and the previous one, the user edited inside
it: `MergeResult.replaced` names it, and the writer keeps a backup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from ..spec.fences import FENCE_LINE

__all__ = [
    "merge3",
    "MergeResult",
    "CONFLICT_START",
    "FENCE_MARK",
    "PLACEHOLDER_MARK",
    "has_conflict_markers",
    "is_placeholder",
]

FENCE_MARK = "opgen: begin "  # in every file with a fence: a cheap test before parsing
PLACEHOLDER_MARK = "opgen: placeholder"  # Note [Placeholder lines]

_PLACEHOLDER = re.compile(
    r"[ \t]*(#|//)[ \t]*opgen: placeholder[ \t]*$"
)  # Note [Placeholder lines]

CONFLICT_START = "<<<<<<< "
_BASE_MARK = "||||||| "
_SPLIT_MARK = "======="
_END_MARK = ">>>>>>> "


@dataclass(frozen=True)
class MergeResult:
    text: str
    conflicts: int
    replaced: tuple[str, ...] = ()  # fences the user had edited, now the new scaffold's again


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
    return [
        _Edit(i1, i2, tuple(other[j1:j2]), side)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _is_import(line: str) -> bool:
    text = line.strip()
    return text.startswith("import ") or (text.startswith("from ") and " import " in text)


def _keeping_imports(edit: _Edit, base: list[str]) -> _Edit | None:
    """The scaffold's edit without its deletions of import lines. Note [Imports the scaffold drops]."""
    replaced = base[edit.start : edit.end]
    dropped = [line for line in replaced if _is_import(line) and line not in edit.lines]
    if not dropped:
        return edit
    if not edit.lines and all(_is_import(line) or not line.strip() for line in replaced):
        return None
    return _Edit(edit.start, edit.end, tuple(dropped) + edit.lines, edit.side)


def is_placeholder(line: str) -> bool:
    """Whether a scaffold line is meant to be replaced. Note [Placeholder lines]."""
    return _PLACEHOLDER.search(line.rstrip("\r\n")) is not None


def _unmarked(line: str) -> str | None:
    """A placeholder line without its marker; None for any other line. Note [Placeholder lines]."""
    found = _PLACEHOLDER.search(line.rstrip("\n"))
    return line[: found.start()] + "\n" if found else None


def _scaffold_edits(base: list[str], theirs: list[str]) -> tuple[list[_Edit], list[_Edit]]:
    """The new scaffold's edits, and separately its one-line rewordings of placeholders. Note [Placeholder lines]."""
    legacy = {_unmarked(line) for line in theirs} - {None}

    def key(line: str) -> str:
        if _unmarked(line) is None and line not in legacy:
            return line
        return line[: len(line) - len(line.lstrip())] + "\0placeholder"

    edits: list[_Edit] = []
    rewordings: list[_Edit] = []
    for edit in _edits(base, theirs, "theirs"):
        old, new = [key(line) for line in base[edit.start : edit.end]], [
            key(line) for line in edit.lines
        ]
        if not (old and new and set(old) & set(new)):
            edits.append(edit)
            continue
        # a replaced range: look inside it for placeholders that are only reworded
        for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            start = edit.start + i1
            if tag != "equal":
                edits.append(_Edit(start, edit.start + i2, edit.lines[j1:j2], "theirs"))
                continue
            for k in range(i2 - i1):
                if base[start + k] != edit.lines[j1 + k]:
                    rewordings.append(
                        _Edit(start + k, start + k + 1, (edit.lines[j1 + k],), "theirs")
                    )
    kept = [_keeping_imports(edit, base) for edit in edits]
    return [edit for edit in kept if edit is not None], rewordings


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


def _fences(lines: list[str]) -> dict[str, tuple[int, int]]:
    """Well-formed fences: name -> (begin line, end line); a name seen twice or unclosed is plain text."""
    seen: dict[str, list[tuple[str, int]]] = {}
    for index, line in enumerate(lines):
        found = FENCE_LINE.match(line)
        if found:
            seen.setdefault(found["name"], []).append((found["kind"], index))
    fences = {
        name: (marks[0][1], marks[1][1])
        for name, marks in seen.items()
        if [kind for kind, _ in marks] == ["begin", "end"]
    }
    spans = sorted(fences.values())
    if any(a[1] >= b[0] for a, b in zip(spans, spans[1:], strict=False)):  # nested or overlapping
        return {}
    return fences


def _fold(lines: list[str], fences: dict[str, tuple[int, int]]) -> list[str]:
    """Each fence as one marker line (its begin line's indentation, then NUL and its name)."""
    out = list(lines)
    for name, (start, end) in sorted(fences.items(), key=lambda item: -item[1][0]):
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        out[start : end + 1] = [f"{indent}\0fence {name}\n"]
    return out


def _unfold(lines: list[str], blocks: list[dict[str, list[str]]]) -> list[str]:
    """Marker lines back into fences, from the first of `blocks` that has the name."""
    out: list[str] = []
    for line in lines:
        name = line.strip().removeprefix("\0fence ") if "\0fence " in line else None
        block = next((b[name] for b in blocks if name in b), None) if name else None
        out.extend(block if block is not None else [line])
    return out


def merge3(
    base: str, ours: str, theirs: str, ours_label: str = "yours", theirs_label: str = "opgen"
) -> MergeResult:
    if ours == base or ours == theirs:
        return MergeResult(theirs, 0)
    b, o, t = _split(base), _split(ours), _split(theirs)
    fences = [_fences(b), _fences(o), _fences(t)]
    blocks = [
        {name: lines[start : end + 1] for name, (start, end) in found.items()}
        for lines, found in zip((b, o, t), fences, strict=True)
    ]
    replaced = tuple(
        sorted(
            name
            for name, mine in blocks[1].items()
            if name in blocks[2] and mine != blocks[2][name] and mine != blocks[0].get(name)
        )
    )
    if theirs == base and not replaced:
        return MergeResult(ours, 0)
    b, o, t = (_fold(lines, found) for lines, found in zip((b, o, t), fences, strict=True))
    merged, conflicts = (o, 0) if t == b else _merge_lines(b, o, t, ours_label, theirs_label)
    text = "".join(_unfold(merged, [blocks[2], blocks[1], blocks[0]]))
    return MergeResult(_restore_style(text, ours), conflicts, replaced)


def _merge_lines(
    b: list[str], o: list[str], t: list[str], ours_label: str, theirs_label: str
) -> tuple[list[str], int]:
    """Note [Merge rules] over lines: the merged lines and the number of conflicts."""
    mine_edits = _edits(b, o, "ours")
    theirs_edits, rewordings = _scaffold_edits(b, t)
    # a rewording of a placeholder the user changed yields to the user (it still shows in a conflict)
    yielded = [r for r in rewordings if any(e.start <= r.start < e.end for e in mine_edits)]
    theirs_edits += [r for r in rewordings if r not in yielded]
    # sides sort stably: at one start, an insertion sorts before a range
    edits = sorted(mine_edits + theirs_edits, key=lambda e: (e.start, e.end))
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
        shown = [e for e in group if e.side == "theirs"] + [
            r for r in yielded if start <= r.start < end
        ]
        new = _apply(b, start, end, sorted(shown, key=lambda e: e.start))
        if len({e.side for e in group}) == 1:
            out.extend(mine if group[0].side == "ours" else new)
        elif mine == new:
            out.extend(mine)
        elif all(_advisory(e, b) for e in shown):
            out.extend(mine)  # the user rewrote these lines: opgen's comments and new fences yield
        else:
            conflicts += 1
            out.extend(_conflict(mine, b[start:end], new, ours_label, theirs_label))
        position = end
    out.extend(b[position:])
    return out, conflicts


def _comment(line: str) -> bool:
    text = line.strip()
    return not text or text.startswith("//") or text == "#" or text.startswith("# ")


def _advisory(edit: _Edit, base: list[str]) -> bool:
    """A scaffold edit that yields to the user's rewrite of the same lines. Note [Merge rules].

    Comment lines (blank lines among them), or a fence where the previous scaffold had none (the
    user rewrote the lines it would fence: they own them now).
    """
    old = base[edit.start : edit.end]
    if any("\0fence " in line for line in old):
        return False
    if len(edit.lines) == 1 and "\0fence " in edit.lines[0]:
        return True
    lines = (*old, *edit.lines)
    return all(_comment(line) and "\0fence " not in line for line in lines) and any(
        line.strip() for line in lines
    )


def _conflict(
    mine: list[str], base: list[str], new: list[str], ours_label: str, theirs_label: str
) -> list[str]:
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
