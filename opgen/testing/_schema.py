"""An op's arguments in schema order, read from its schema string.

The checks that call an op positionally (opcheck, torch.vmap, DTensor's
rules) need the order of its arguments and which are keyword-only. The
generated tests hold the schema the op was registered with; parsing it is
public (`torch._C.parse_schema`), while reading it back from the registered
op is not.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

__all__ = ["bind", "overload", "parse", "positional", "positional_names", "registered_name"]


@functools.lru_cache(maxsize=256)
def parse(schema: str) -> Any:
    """The FunctionSchema of `ns::name[.overload](...) -> ...`."""
    return torch._C.parse_schema(schema)


def bind(schema: str, kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Positional arguments in schema order up to the first one the sample omits; the rest
    by keyword."""
    kwargs = dict(kwargs)
    args = []
    for argument in parse(schema).arguments:
        if argument.kwarg_only or argument.name not in kwargs:
            break
        args.append(kwargs.pop(argument.name))
    return args, kwargs


def positional_names(schema: str, kwargs: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The sample's arguments that can go by position (in schema order) and the rest
    (keyword-only)."""
    names = [a.name for a in parse(schema).arguments if not a.kwarg_only and a.name in kwargs]
    return names, {k: v for k, v in kwargs.items() if k not in names}


def positional(schema: str, kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The sample's arguments by position up to the last one it gives (left-out ones as their
    default), and its keyword-only ones."""
    rest = dict(kwargs)
    arguments = [a for a in parse(schema).arguments if not a.kwarg_only]
    given = [i for i, a in enumerate(arguments) if a.name in rest]
    args = [
        rest.pop(a.name) if a.name in rest else a.default_value
        for a in arguments[: max(given, default=-1) + 1]
    ]
    return args, rest


def overload(schema: str) -> Any:
    """The registered op the schema names: `torch.ops.<ns>.<name>.<overload or default>`."""
    parsed = parse(schema)
    namespace, name = parsed.name.split("::")
    packet = getattr(getattr(torch.ops, namespace), name)
    return getattr(packet, parsed.overload_name or "default")


def registered_name(schema: str) -> str:
    """`ns::name[.overload]`, as torch.library registers the op."""
    parsed = parse(schema)
    return f"{parsed.name}.{parsed.overload_name}" if parsed.overload_name else str(parsed.name)
