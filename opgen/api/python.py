"""Python-side names, annotations and literals for an op."""

from __future__ import annotations

from typing import Any

from ..spec.dialect.types import SchemaType, TypeKind
from ..spec.dialect.values import ENUMS
from ..spec.model import NONE_SAMPLE, Arg, OpSpec, Ret, TensorSample, param_list
from .layout import wrapped
from .literals import literal
from .pyexpr import expression

__all__ = [
    "annotation",
    "return_annotation",
    "default_literal",
    "signature",
    "parameters",
    "def_lines",
    "call_arguments",
    "sample_literal",
    "op_handle",
    "fake_outputs",
    "docstring",
    "dict_lines",
]

_BASE_ANNOTATIONS = {
    "Tensor": "Tensor",
    "int": "int",
    "SymInt": "int",
    "float": "float",
    "bool": "bool",
    "str": "str",
    "Scalar": "float | int | bool",
    "ScalarType": "torch.dtype",
    "Layout": "torch.layout",
    "MemoryFormat": "torch.memory_format",
    "Device": "torch.device | str",
}
# what Python receives from a registered op: a ScalarType comes back as its int code
_RETURN_ANNOTATIONS = {
    "Tensor": "Tensor",
    "Tensor?": "Tensor | None",
    "Tensor[]": "list[Tensor]",
    "int": "int",
    "SymInt": "int",
    "float": "float",
    "bool": "bool",
    "str": "str",
    "str[]": "list[str]",
    "int[]": "list[int]",
    "SymInt[]": "list[int]",
    "float[]": "list[float]",
    "bool[]": "list[bool]",
    "ScalarType": "int",
}


def annotation(kind: SchemaType) -> str:
    """The Python annotation of an argument type (`Tensor?[]` -> `Sequence[Tensor | None]`)."""
    if kind.kind is TypeKind.OPTIONAL:
        return f"{annotation(kind.items[0])} | None"
    if kind.kind is TypeKind.LIST:
        return f"Sequence[{annotation(kind.items[0])}]"
    if kind.kind is TypeKind.TUPLE:
        return f"tuple[{', '.join(annotation(m) for m in kind.items)}]"
    try:
        return _BASE_ANNOTATIONS[kind.name]
    except KeyError:
        raise ValueError(f"no Python annotation for schema type {kind}") from None


def return_annotation(rets: tuple[Ret, ...], kernel: bool = False) -> str:
    """The annotation of what the op returns; `kernel`: of what its Python kernel returns.

    Python receives a `ScalarType` return as an int (torch's dtype code), while
    the kernel returns a `torch.dtype`.
    """
    if not rets:
        return "None"
    parts = [
        "torch.dtype" if kernel and r.family == "ScalarType" else _RETURN_ANNOTATIONS[r.family]
        for r in rets
    ]
    return parts[0] if len(parts) == 1 else f"tuple[{', '.join(parts)}]"


def _value_literal(value: object, element: str) -> str:
    if isinstance(value, str) and element == "ScalarType":
        return f"torch.{value}"
    if isinstance(value, int) and element in ENUMS:  # a Layout or MemoryFormat code
        return f"torch.{ENUMS[element][value]}"
    if isinstance(value, str) and element == "Device":
        return f"torch.device({literal(value)})"
    return literal(value)


def default_literal(arg: Arg) -> str | None:
    """The schema default as a Python value (lists become tuples, dtype names torch dtypes),
    spelled as black spells it.

    Python kernels need every default spelled out: the dispatcher leaves out
    trailing arguments equal to their default, even when the caller passed them.
    """
    if arg.default is None:
        return None
    value, element = arg.default.value, arg.type.element
    if isinstance(value, tuple):
        items = [_value_literal(v, element) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return _value_literal(value, element)


def signature(op: OpSpec, annotate: bool = True) -> str:
    return ", ".join(parameters(op, annotate))


def parameters(op: OpSpec, annotate: bool = True) -> list[str]:
    """The Python parameters, one item each (`*` included), for `signature` and `def_lines`."""

    def one(arg: Arg) -> str:
        text = arg.name + (f": {annotation(arg.type)}" if annotate else "")
        default = default_literal(arg)
        if default is not None:
            text += f" = {default}" if annotate else f"={default}"
        return text

    return param_list(op.args, one)


def def_lines(op: OpSpec, name: str, kernel: bool = False) -> list[str]:
    """`def name(<annotated parameters>) -> <returns>:` at module level, as black wraps it;
    `kernel`: of a Python kernel (`return_annotation`)."""
    returns = return_annotation(op.returns, kernel=kernel)
    return wrapped(f"def {name}(", parameters(op), f") -> {returns}:", "", is_def=True)


def call_arguments(op: OpSpec) -> str:
    return ", ".join(f"{a.name}={a.name}" if a.kwarg_only else a.name for a in op.args)


def _aliased_argument(op: OpSpec, ret: Ret) -> str | None:
    """The argument a return is written into (`-> Tensor(a!)` returns the argument in set a)."""
    alias = ret.type.annotation
    if alias is None or not alias.is_write:
        return None
    for arg in op.args:
        own = arg.type.annotation
        if own is not None and own.is_write and set(own.before) & set(alias.before):
            return arg.name
    return None


def fake_outputs(op: OpSpec) -> tuple[str, ...] | None:
    """What the fake kernel returns, one expression per output; None when the spec gives no rule.

    `like = "x"` gives `x.new_empty(x.shape)`; a return written into an argument
    is that argument, whatever the rule says. Expressions are printed as black prints them.
    """
    like = tuple(f"{n}.new_empty({n}.shape)" for n in op.fake.like)
    given = like or tuple(expression(e) for e in op.fake.expr)
    outputs = []
    for index, ret in enumerate(op.returns):
        argument = _aliased_argument(op, ret)
        if argument is not None:
            outputs.append(argument)
        elif index < len(given):
            outputs.append(given[index])
        else:
            return None
    return tuple(outputs)


def op_handle(op: OpSpec) -> str:
    return f"torch.ops.{op.namespace}.{op.name}.{op.overload or 'default'}"


def docstring(text: str, indent: str = "    ") -> str:
    """A triple-quoted literal that cannot end early, whatever the spec says, laid out as black
    lays out a docstring at `indent`: later lines indented, trailing spaces dropped."""
    body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines = [line.rstrip() for line in body.split("\n")]
    lines = [lines[0].strip()] + _reindented(lines[1:], indent)
    body = "\n".join(lines)
    if body.startswith('"'):
        body = " " + body
    if body.endswith('"'):
        body += " "
    return f'"""{body}"""'


def _reindented(lines: list[str], indent: str) -> list[str]:
    """Lines after a docstring's first: their common indentation replaced by `indent` (PEP 257)."""
    expanded = [_expand_leading_tabs(line) for line in lines]
    depth = min((len(line) - len(line.lstrip()) for line in expanded if line.strip()), default=0)
    return [indent + line[depth:] if line.strip() else "" for line in expanded]


def _expand_leading_tabs(line: str) -> str:
    stripped = line.lstrip()
    return line[: len(line) - len(stripped)].expandtabs(4) + stripped


def _nested_list(value: Any) -> Any:
    return [_nested_list(v) for v in value] if isinstance(value, tuple) else value


def sample_literal(value: object, kind: SchemaType | None = None) -> str:
    element = kind.element if kind is not None else ""
    if element in ("ScalarType", *ENUMS) and isinstance(value, str):
        return f"torch.{value}"
    if isinstance(value, TensorSample):
        return _tensor_spec_literal(value)
    if value is NONE_SAMPLE:
        return "None"
    if (
        isinstance(value, tuple)
        and value
        and all(isinstance(v, TensorSample) or v is NONE_SAMPLE for v in value)
    ):
        return "[" + ", ".join(sample_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        if kind is not None and kind.unwrapped.kind is TypeKind.TUPLE:
            return literal(value)
        return literal(list(value))
    return literal(value)


def _tensor_spec_literal(value: TensorSample) -> str:
    """`TensorSpec(shape, ...)` with the fields the sample sets, defaults left out."""
    fields = [literal(value.shape)]
    for key in ("dtype", "low", "high"):
        item = getattr(value, key)
        if item is not None:
            fields.append(f"{key}={literal(item)}")
    if value.values is not None:
        fields.append(f"values={literal(_nested_list(value.values))}")
    for flag in ("noncontiguous", "offsets", "sorted"):
        if getattr(value, flag):
            fields.append(f"{flag}=True")
    if not value.requires_grad:
        fields.append("requires_grad=False")
    return f"TensorSpec({', '.join(fields)})"


def dict_lines(items: list[tuple[str, str]], indent: str) -> list[str]:
    """`{"name": value, ...},` as an item of a list at `indent`: one line, or one line per entry
    when that is over 100 columns (Note [Black-stable output] in pyexpr.py)."""
    entries = [f"{literal(name)}: {value}" for name, value in items]
    line = "{" + ", ".join(entries) + "},"
    if len(indent) + len(line) <= 100:
        return [line]
    return ["{", *(f"    {entry}," for entry in entries), "},"]
