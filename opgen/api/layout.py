"""Calls and `def` lines wrapped as black wraps them (Note [Black-stable output] in pyexpr.py).

For the generated statements that often run past 100 columns (a fake
kernel's `torch._check`, a wrapper's or kernel stub's signature) opgen writes
black's layout itself: the whole statement on one line if it fits; else the
arguments on one line of their own between the opening and the closing line;
else one argument per line, with a trailing comma. A `def` whose one
parameter does not fit takes the last form (black adds the comma). Any line
still over 100 columns leaves the file to black.
"""

from __future__ import annotations

__all__ = ["wrapped", "condition", "LINE_LENGTH"]

LINE_LENGTH = 100


def wrapped(
    head: str, items: list[str], tail: str, indent: str, *, is_def: bool = False
) -> list[str]:
    """`head` + items joined by ", " + `tail`, as the lines black makes of it at `indent`.

    `head` ends with the opening bracket and `tail` starts with the closing
    one; the lines returned are relative to `indent` (the template adds it).
    """
    body = ", ".join(items)
    if len(indent) + len(head) + len(body) + len(tail) <= LINE_LENGTH:
        return [head + body + tail]
    fits = len(indent) + 4 + len(body) <= LINE_LENGTH
    if fits and not (is_def and len(items) == 1):
        return [head, "    " + body, tail]
    return [head, *(f"    {item}," for item in items), tail]


def condition(keyword: str, operands: list[str], operator: str, indent: str) -> list[str]:
    """`if a or b or c:` as black lays it out at `indent`: one line if it fits; else the
    condition on its own line between `if (` and `):`; else one operand per line."""
    body = f" {operator} ".join(operands)
    if len(indent) + len(keyword) + 1 + len(body) + 1 <= LINE_LENGTH:
        return [f"{keyword} {body}:"]
    if len(indent) + 4 + len(body) <= LINE_LENGTH:
        return [f"{keyword} (", "    " + body, "):"]
    return [
        f"{keyword} (",
        "    " + operands[0],
        *(f"    {operator} {o}" for o in operands[1:]),
        "):",
    ]
