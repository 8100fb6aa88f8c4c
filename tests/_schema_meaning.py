"""Compare two schemas as torch reads them, argument by argument (used in a subprocess too).

`differences(a, b)` takes two `torch._C.FunctionSchema`s and lists what differs in
meaning: names, types (by `kind()`: `str()` prints SymInt as int), list sizes,
defaults (value and type), keyword-only, and alias annotations (is_write and the
number of sets; the names too, except torch's made-up `$0` for a bare `!`).
"""

from __future__ import annotations

from typing import Any


def type_spelling(kind: Any) -> str:
    name = kind.kind()
    if name == "OptionalType":
        return type_spelling(kind.getElementType()) + "?"
    if name == "ListType":
        return type_spelling(kind.getElementType()) + "[]"
    if name == "TupleType":
        return "(" + ", ".join(type_spelling(e) for e in kind.elements()) + ")"
    return {
        "SymIntType": "SymInt",
        "SymBoolType": "SymBool",
        "NumberType": "Scalar",
        "TensorType": "Tensor",
        "DeviceObjType": "Device",
    }.get(name, str(kind))


def _alias(info: Any) -> tuple[bool, int, frozenset[str]] | None:
    if info is None:
        return None
    names = frozenset(str(n) for n in info.before_set)
    made_up = any(n.startswith("$") for n in names)
    return info.is_write, len(names), frozenset() if made_up else names


def _same_alias(a: Any, b: Any) -> bool:
    x, y = _alias(a), _alias(b)
    if x is None or y is None:
        return x is y
    return x[:2] == y[:2] and (not x[2] or not y[2] or x[2] == y[2])


def differences(first: Any, second: Any) -> list[str]:
    out = []
    for label, ours, theirs in (
        ("argument", first.arguments, second.arguments),
        ("return", first.returns, second.returns),
    ):
        if len(ours) != len(theirs):
            out.append(f"{len(ours)} != {len(theirs)} {label}s")
            continue
        for a, b in zip(ours, theirs, strict=True):
            where = f"{label} {a.name or b.name}"
            if a.name != b.name:
                out.append(f"{where}: name {a.name!r} != {b.name!r}")
            if type_spelling(a.real_type) != type_spelling(b.real_type) or a.N != b.N:
                out.append(f"{where}: type {a.real_type}[{a.N}] != {b.real_type}[{b.N}]")
            if not _same_alias(a.alias_info, b.alias_info):
                out.append(f"{where}: alias {a.alias_info} != {b.alias_info}")
            if label == "argument":
                if a.kwarg_only != b.kwarg_only:
                    out.append(f"{where}: kwarg_only")
                if a.has_default_value() != b.has_default_value():
                    out.append(f"{where}: default presence")
                elif a.has_default_value():
                    x, y = a.default_value, b.default_value
                    if x != y or type(x) is not type(y):
                        out.append(f"{where}: default {x!r} != {y!r}")
    return out
