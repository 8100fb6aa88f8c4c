"""What a template's operators, filters and method calls would build, checked before they run.

Note [Bounded rendering] in render/sandbox.py: an operation that can multiply sizes
(`'a' * 10**10`, `'x'|center(10**10)`, `sep.join(items)`) is measured here
and refused through `RenderBudget.need` before it allocates anything. The
estimates are from above where that is cheap; what is built is counted
after in any case.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from string import Formatter
from typing import Any

from .budget import ITEM, RenderBudget

__all__ = [
    "FILTER_CHECKS",
    "METHOD_CHECKS",
    "TEXT_FILTERS",
    "format_size",
    "percent_size",
    "power_size",
    "repeat_size",
]

# A call's positional and keyword arguments, and what a check returns: (value, args, kwargs)
Args = tuple[Any, ...]
Kwargs = dict[str, Any]
Call = tuple[Any, Args, Kwargs]
Check = Callable[[RenderBudget, Any, Args, Kwargs], Call]  # a filter's
MethodCheck = Callable[[RenderBudget, Any, Args, Kwargs], tuple[Args, Kwargs]]  # a str method's


# -- operators and str.format ----------------------------------------------------------------


def repeat_size(budget: RenderBudget, left: Any, right: Any) -> None:
    """`left * right`: a text or list repeated, or two integers multiplied."""
    for seq, count in ((left, right), (right, left)):
        if isinstance(seq, (str, bytes, list, tuple)) and isinstance(count, int):
            text = isinstance(seq, (str, bytes))
            size = len(seq) * (1 if text else ITEM) * max(count, 0)
            what = _count(len(seq), "character" if text else "item")
            budget.need(size, f"repeating a {'text' if text else 'list'} of {what} {count} times")
            return
    if isinstance(left, int) and isinstance(right, int):
        budget.bits(left.bit_length() + right.bit_length(), "multiplying")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def power_size(budget: RenderBudget, base: Any, exponent: Any) -> None:
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        budget.bits(base.bit_length() * exponent, f"raising to the power {exponent}")


_PERCENT = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[-#0 +]*(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?[hlL]?(?P<type>[a-zA-Z%])"
)


def percent_size(budget: RenderBudget, template: str, args: Any) -> int:
    """What `template % args` builds, from above: each conversion's value or width."""
    values = args if isinstance(args, tuple) else (args,)
    position = 0
    total = len(template)
    for match in _PERCENT.finditer(template):
        if match.group("type") == "%":
            continue
        widths = []
        for part in ("width", "prec"):
            text = match.group(part)
            if text == "*":
                star = values[position] if position < len(values) else 0
                position += 1
                widths.append(star if isinstance(star, int) else 0)
            elif text:
                widths.append(int(text))
        key = match.group("key")
        if key is not None and isinstance(args, Mapping):
            value = args.get(key, "")
        else:
            value = values[position] if position < len(values) else ""
            position += 1
        total += max([budget.measure(value), *widths])
    budget.need(total, "formatting with %")
    return total


def format_size(budget: RenderBudget, template: str, args: Args, kwargs: Mapping[str, Any]) -> None:
    """What `template.format(*args, **kwargs)` builds, from above (str.format, format_map)."""
    total = 0
    automatic = 0
    try:
        fields = list(Formatter().parse(template))
    except ValueError:
        return  # str.format raises the same error
    for literal, name, spec, _ in fields:
        total += len(literal)
        if name is None:
            continue
        first = re.split(r"[.\[]", name, maxsplit=1)[0]
        if first == "":
            first, automatic = str(automatic), automatic + 1
        value = args[int(first)] if first.isdigit() and int(first) < len(args) else None
        if value is None and not first.isdigit():
            value = kwargs.get(first)
        numbers = [int(n) for n in re.findall(r"\d+", spec or "")]
        if "{" in (spec or ""):  # a width from an argument: any integer argument may be it
            numbers += [v for v in (*args, *kwargs.values()) if isinstance(v, int)]
        total += max([budget.measure(value), *numbers])
    budget.need(total, "formatting with str.format")


def split_size(text: Any, sep: Any) -> int:
    """The items `text.split(sep)` (or splitlines) can give, from above, in characters."""
    if isinstance(sep, type(text)) and sep:
        parts = text.count(sep) + 1
    else:  # runs of whitespace (or line breaks) separate the parts
        spaces = " \t\n\r\x0b\x0c"
        parts = sum(text.count(c if isinstance(text, str) else c.encode()) for c in spaces) + 1
    return int(parts) * ITEM


# -- filters --------------------------------------------------------------------------------


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _items(budget: RenderBudget, value: Any) -> list[Any]:
    """An iterable taken as a list (a generator is read once), counted as built."""
    return value if isinstance(value, list) else budget.build_value(list(value), "reading items")


def _join_size(budget: RenderBudget, items: list[Any], sep: str) -> int:
    sizes = sum(len(i) if type(i) is str else budget.measure(i) for i in items)
    return sizes + len(sep) * max(len(items) - 1, 0)


def _replace_size(text: str, old: str, new: str, count: Any) -> int:
    hits = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(text) + hits * max(len(new) - len(old), 0)


def _check_center(budget: RenderBudget, value: Any, args: Args, kwargs: Kwargs) -> Call:
    width = args[0] if args else kwargs.get("width", 80)
    if isinstance(width, int):
        budget.need(max(width, 0), f"padding to width {width}")
    return value, args, kwargs


def _check_indent(budget: RenderBudget, value: Any, args: Args, kwargs: Kwargs) -> Call:
    width = args[0] if args else kwargs.get("width", 4)
    prefix = width if isinstance(width, int) else len(_as_text(width))
    text = _as_text(value)
    budget.need(len(text) + (text.count("\n") + 1) * prefix, "indenting")
    return value, args, kwargs


def _check_join(budget: RenderBudget, value: Any, args: Args, kwargs: Kwargs) -> Call:
    sep = _as_text(args[0] if args else kwargs.get("d", ""))
    attribute = args[1] if len(args) > 1 else kwargs.get("attribute")
    items = _items(budget, value)
    if attribute is None:
        budget.need(_join_size(budget, items, sep), "joining")
    else:
        budget.need(len(sep) * len(items), "joining")
    return items, args, kwargs


def _check_replace(budget: RenderBudget, value: Any, args: Args, kwargs: Kwargs) -> Call:
    old = _as_text(args[0] if args else kwargs.get("old", ""))
    new = _as_text(args[1] if len(args) > 1 else kwargs.get("new", ""))
    count = args[2] if len(args) > 2 else kwargs.get("count")
    budget.need(_replace_size(_as_text(value), old, new, count), "replacing")
    return value, args, kwargs


def _check_wordwrap(budget: RenderBudget, value: Any, args: Args, kwargs: Kwargs) -> Call:
    width = args[0] if args else kwargs.get("width", 79)
    wrap = args[2] if len(args) > 2 else kwargs.get("wrapstring")
    text = _as_text(value)
    lines = len(text.split()) + text.count("\n") + 1
    if isinstance(width, int) and width > 0:
        lines += len(text) // width
    budget.need(len(text) + lines * len(_as_text(wrap or "\n")), "wrapping")
    return value, args, kwargs


def _check_format(budget: RenderBudget, value: Any, args: Args, kwargs: Kwargs) -> Call:
    percent_size(budget, _as_text(value), kwargs or args)
    return value, args, kwargs


def _check_fill(budget: RenderBudget, value: Any, args: Args, kwargs: Kwargs) -> Call:
    count = args[0] if args else kwargs.get("linecount", kwargs.get("slices", 1))
    if isinstance(count, int):
        budget.need(count * 8, f"splitting into groups of {count}")
    return value, args, kwargs


def _check_tojson(budget: RenderBudget, value: Any, args: Args, kwargs: Kwargs) -> Call:
    indent = args[0] if args else kwargs.get("indent")
    width = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
    size = budget.measure(value)
    budget.need(6 * size + size * max(width, 0) * 8, "writing JSON")
    return value, args, kwargs


def _check_urlize(budget: RenderBudget, value: Any, args: Args, kwargs: Kwargs) -> Call:
    text = _as_text(value)
    extra = sum(len(_as_text(kwargs.get(key) or "")) for key in ("target", "rel"))
    budget.need(3 * len(text) + len(text.split()) * (extra + 64), "making links")
    return value, args, kwargs


def _check_sum(budget: RenderBudget, value: Any, args: Args, kwargs: Kwargs) -> Call:
    start = args[1] if len(args) > 1 else kwargs.get("start", 0)
    if isinstance(start, (list, tuple, str)):  # sequences add up in quadratic time
        items = _items(budget, value)
        sizes = [len(item) if isinstance(item, (list, tuple)) else 1 for item in items]
        budget.need(len(items) * sum(sizes) * 8, "adding up sequences")
        return items, args, kwargs
    return value, args, kwargs


def _check_list(budget: RenderBudget, value: Any, args: Args, kwargs: Kwargs) -> Call:
    if isinstance(value, (str, bytes, list, tuple, dict, range)):
        budget.need(len(value) * 8, "making a list")
    return value, args, kwargs


FILTER_CHECKS: dict[str, Check] = {
    "list": _check_list,
    "center": _check_center,
    "indent": _check_indent,
    "join": _check_join,
    "replace": _check_replace,
    "wordwrap": _check_wordwrap,
    "format": _check_format,
    "batch": _check_fill,
    "slice": _check_fill,
    "tojson": _check_tojson,
    "urlize": _check_urlize,
    "sum": _check_sum,
}
# filters that print their value: how much larger than it their text can be (escapes)
TEXT_FILTERS = {
    **dict.fromkeys(("capitalize", "lower", "string", "striptags", "trim", "truncate"), 1),
    **dict.fromkeys(("wordcount", "center", "indent", "replace", "wordwrap", "format"), 1),
    **dict.fromkeys(("upper", "title"), 3),
    **dict.fromkeys(("e", "escape", "forceescape", "xmlattr"), 6),
    **dict.fromkeys(("urlencode", "urlize", "pprint"), 3),
}


# -- methods of str, bytes and int ----------------------------------------------------------


def _method_center(
    budget: RenderBudget, text: Any, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    width = args[0] if args else 0
    if isinstance(width, int):
        budget.need(max(width, len(text)), f"padding to width {width}")
    return args, kwargs


def _method_expandtabs(
    budget: RenderBudget, text: Any, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    size = args[0] if args else kwargs.get("tabsize", 8)
    if isinstance(size, int):
        budget.need(len(text) + text.count("\t" if isinstance(text, str) else b"\t") * size, "tabs")
    return args, kwargs


def _method_join(budget: RenderBudget, sep: Any, args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    if args:
        items = _items(budget, args[0])
        budget.need(
            sum(len(i) if isinstance(i, (str, bytes)) else 0 for i in items)
            + len(sep) * len(items),
            "joining",
        )
        args = (items, *args[1:])
    return args, kwargs


def _method_replace(
    budget: RenderBudget, text: Any, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    if len(args) >= 2 and all(isinstance(a, type(text)) for a in args[:2]):
        count = args[2] if len(args) > 2 else kwargs.get("count", -1)
        budget.need(_replace_size(text, args[0], args[1], count), "replacing")
    return args, kwargs


def _method_translate(
    budget: RenderBudget, text: Any, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    table = args[0] if args else None
    if isinstance(table, Mapping):
        longest = max((len(v) for v in table.values() if isinstance(v, (str, bytes))), default=1)
        budget.need(len(text) * max(longest, 1), "translating")
    return args, kwargs


def _method_split(
    budget: RenderBudget, text: Any, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    budget.need(split_size(text, args[0] if args else kwargs.get("sep")), "splitting")
    return args, kwargs


def _method_to_bytes(
    budget: RenderBudget, number: Any, args: Args, kwargs: Kwargs
) -> tuple[Args, Kwargs]:
    length = args[0] if args else kwargs.get("length", 1)
    if isinstance(length, int):
        budget.need(length, f"writing {length} bytes")
    return args, kwargs


METHOD_CHECKS: dict[str, MethodCheck] = {
    **dict.fromkeys(("center", "ljust", "rjust", "zfill"), _method_center),
    "expandtabs": _method_expandtabs,
    "join": _method_join,
    "replace": _method_replace,
    "translate": _method_translate,
    **dict.fromkeys(("split", "rsplit", "splitlines"), _method_split),
    "to_bytes": _method_to_bytes,
}
