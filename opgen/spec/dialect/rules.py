"""What torch's schema parser reads but then refuses, breaks on, or silently misreads.

Each rule names a schema `torch._C.parse_schema` either refuses with an
unhelpful message (`INTERNAL ASSERT FAILED`) or accepts and then fails at
`define`, at the first call or under torch.compile, or registers with another
meaning (tests/test_schema_dialect.py pins each against torch 2.13). They are
reported at generate time, each at its argument, with what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .types import Default, Param, ParsedSchema, TypeKind
from .values import ENUMS, INT64_MAX, INT64_MIN

__all__ = ["Problem", "schema_problems", "MAX_ARGUMENTS"]

MAX_ARGUMENTS = (
    64  # torch: "The function schema has 65 arguments but this PyTorch build only supports 64"
)

_DEVICE = re.compile(
    r"(cpu|cuda|ipu|xpu|mkldnn|opengl|opencl|ideep|hip|ve|fpga|maia|xla|lazy|vulkan|mps|meta|hpu"
    r"|mtia|privateuseone)(:(0|[1-9][0-9]*))?\Z"
)


@dataclass(frozen=True)
class Problem:
    """One refusal: `offset` into the schema text (for the line), what is wrong, what to write."""

    offset: int
    message: str
    hint: str


def schema_problems(schema: ParsedSchema) -> list[Problem]:
    """Every problem of a parsed schema, in the order of the text."""
    problems: list[Problem] = []
    if len(schema.args) > MAX_ARGUMENTS:
        problems.append(
            Problem(
                0,
                f"the schema has {len(schema.args)} arguments; torch registers at most {MAX_ARGUMENTS}",
                "pass related values together (a Tensor[] or an int[] argument) or split the op",
            )
        )
    problems += _duplicate_names(schema.args)
    problems += _default_order(schema.args)
    for arg in schema.args:
        problems += _default_problems(arg)
    for arg in schema.args:
        problems += _alias_problems(arg, f"argument {arg.name!r}")
    for index, ret in enumerate(schema.returns):
        problems += _alias_problems(ret, f"return {index + 1}")
    return sorted(problems, key=lambda p: p.offset)


def _duplicate_names(args: tuple[Param, ...]) -> list[Problem]:
    problems = []
    first: dict[str, int] = {}
    for index, arg in enumerate(args):
        if arg.name in first:
            problems.append(
                Problem(
                    arg.offset,
                    f"arguments {first[arg.name] + 1} and {index + 1} are both named {arg.name!r}; "
                    "torch accepts this, but a call cannot pass both by name and Python cannot define the function",
                    f"rename the second {arg.name!r} (e.g. {arg.name}_{index + 1}); callers that pass it "
                    "by position are unaffected",
                )
            )
        first.setdefault(arg.name, index)
    return problems


def _default_order(args: tuple[Param, ...]) -> list[Problem]:
    defaulted: Param | None = None
    problems = []
    for arg in args:
        if arg.kwarg_only:
            break
        if arg.default is not None:
            defaulted = defaulted or arg
        elif defaulted is not None:
            problems.append(
                Problem(
                    arg.offset,
                    f"argument {arg.name!r} has no default but follows {defaulted.name!r}, which has one "
                    "(torch: Non-default positional argument follows default argument)",
                    f"give {arg.name!r} a default, move it before {defaulted.name!r}, or make it "
                    "keyword-only by putting it after `*`",
                )
            )
    return problems


def _default_problems(arg: Param) -> list[Problem]:
    default = arg.default
    if default is None:
        return []
    if default.value is None:
        found = _none_default(arg)
    else:
        found = (
            _refused_default(arg, default)
            or _list_default_shape(arg, default)
            or _default_items(arg, default)
        )
    if found is None:
        return []
    message, hint = found
    return [Problem(arg.offset, f"argument {arg.name!r}: {message}", hint)]


# (what is wrong, what to write), or None when nothing is
_Found = tuple[str, str] | None


def _none_default(arg: Param) -> _Found:
    """A None default needs an optional type."""
    kind = arg.type
    if kind.is_optional:
        return None
    if kind.family == "Tensor":
        return (
            "a Tensor defaults to None only when it is optional; torch registers "
            f"`Tensor {arg.name}=None` and then fails every call that leaves it out",
            f"write Tensor? {arg.name}=None",
        )
    return (
        f"the default None needs an optional type ({kind.spelling}?)",
        f"write {kind.spelling}? {arg.name}=None, or give a {kind.spelling} default",
    )


def _refused_default(arg: Param, default: Default) -> _Found:
    """A default other than None on a type torch reads it wrong for, or takes none for."""
    kind, value = arg.type, default.value
    inner = kind.unwrapped
    if kind.is_optional and inner.kind is TypeKind.LIST:
        return (
            "an optional list can only default to None (torch cannot read a list default here)",
            f"write {kind.spelling} {arg.name}=None, or drop the ? to keep the list default",
        )
    if kind.is_optional and inner.kind is TypeKind.BASE and inner.name == "float":
        if isinstance(value, int) and not isinstance(value, bool):
            return (
                f"torch stores the default {default.text} of a float? as an integer",
                f"write {float(value)!r}",
            )
    if inner.kind is TypeKind.TUPLE:
        return (
            "a tuple type can only default to None",
            f"write {kind.spelling} {arg.name}=None",
        )
    if inner.element in ("Tensor", "Generator") or inner.element not in _VALUE_CHECKS:
        return (
            f"{kind.spelling} takes no default other than None",
            f"write {kind.spelling}? {arg.name}=None, or remove the default",
        )
    return None


def _list_default_shape(arg: Param, default: Default) -> _Found:
    """A list type's default is a list of its size (or one value to repeat); another type's is
    one value."""
    kind, value = arg.type, default.value
    inner = kind.unwrapped
    if inner.kind is not TypeKind.LIST:
        if isinstance(value, tuple):
            return (
                f"the default {default.text} is a list but {kind.spelling} is not",
                "write a single value",
            )
        return None
    if not isinstance(value, tuple):
        return (
            f"the default {default.text} of an unsized list must be a list",
            f"write {arg.name}=[{default.text}] (a size, as in int[2], repeats one value)",
        )
    if inner.size is not None and len(value) != inner.size:
        return (
            f"the default {default.text} has {len(value)} items but the type {kind.spelling} has {inner.size}",
            f"give {inner.size} items, or one value to repeat ({arg.name}={value[0] if value else 0})",
        )
    return None


def _default_items(arg: Param, default: Default) -> _Found:
    """Each value of the default (each item of a list's) is one the element type holds."""
    value = default.value
    items: tuple[object, ...] = value if isinstance(value, tuple) else (value,)
    check, wanted = _VALUE_CHECKS[arg.type.unwrapped.element]
    for item in items:
        if not check(item):
            return (
                f"the default {default.text} is not {wanted[0]} (torch accepts it, then "
                f"{'misreads it' if isinstance(item, str) else 'fails when the default is used'})",
                f"write {wanted[0]}, e.g. {wanted[1]}",
            )
    return None


def _is_int(value: object) -> bool:
    return (
        isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX
    )


def _is_code(kind: str) -> Callable[[object], bool]:
    """Whether a value is the code of one of torch's `kind` values (Layout, MemoryFormat)."""
    return lambda value: _is_int(value) and 0 <= value < len(ENUMS[kind])  # type: ignore[operator]


# element type -> (check, (what it must be, an example))
_VALUE_CHECKS: dict[str, tuple[Callable[[object], bool], tuple[str, str]]] = {
    "int": (_is_int, ("an integer", "1")),
    "SymInt": (_is_int, ("an integer", "1")),
    "float": (lambda v: isinstance(v, float), ("a number with a decimal point", "1.0")),
    "bool": (lambda v: isinstance(v, bool), ("True or False", "False")),
    "Scalar": (lambda v: isinstance(v, (int, float)), ("a number or True/False", "1")),
    "str": (lambda v: isinstance(v, str), ("a quoted string", "'mean'")),
    "ScalarType": (lambda v: isinstance(v, str), ("a dtype name", "float32")),
    "Layout": (_is_code("Layout"), ("strided or a layout's code, 0 to 7", "strided")),
    "MemoryFormat": (
        _is_code("MemoryFormat"),
        ("contiguous_format or a memory format's code, 0 to 3", "contiguous_format"),
    ),
    "Device": (
        lambda v: isinstance(v, str) and bool(_DEVICE.match(v)),
        ("a device torch knows", '"cpu" or "cuda:0"'),
    ),
}


def _alias_problems(param: Param, what: str) -> list[Problem]:
    problems = []
    for node in param.type.walk():
        alias = node.alias
        if alias is None:
            continue
        if "*" in alias.before or len(alias.before) > 1 or alias.after is not None:
            problems.append(
                Problem(
                    param.offset,
                    f"{what}: the alias annotation {alias} (wildcards, unions or set transitions) is not supported by opgen",
                    "annotate with one set: Tensor(a!) for a tensor the op writes, Tensor(a) for a view",
                )
            )
        elif node.kind is not TypeKind.BASE or node.name != "Tensor":
            if node.kind is TypeKind.LIST and node.element == "Tensor":
                continue  # Tensor[](a!): a list the op writes into
            note = (
                "torch.compile and opcheck's aot test then fail (functionalization handles only "
                "mutable Tensor and Tensor[] arguments)"
                if alias.is_write
                else "only tensors can alias"
            )
            problems.append(
                Problem(
                    param.offset,
                    f"{what}: {node.spelling} carries the alias annotation {alias}; {note}",
                    f"remove the annotation ({param.type.spelling}); return the value instead "
                    "if the op computes it",
                )
            )
    return problems
