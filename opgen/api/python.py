"""Python-side names, annotations and literals for an op."""

from __future__ import annotations

import re

from ..spec.model import Arg, OpSpec, Ret, TensorSample, param_list
from ..spec.types import normalize_type
from .layout import wrapped
from .literals import literal, number
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
    "Device": "torch.device | str",
}


def annotation(type_text: str) -> str:
    type_text = normalize_type(type_text)
    optional = type_text.endswith("?")
    base = type_text.rstrip("?")
    if base.endswith("[]"):
        text = f"Sequence[{_BASE_ANNOTATIONS[base[:-2]]}]"
    else:
        try:
            text = _BASE_ANNOTATIONS[base]
        except KeyError:
            raise ValueError(f"no Python annotation for schema type {type_text}") from None
    return f"{text} | None" if optional else text


def return_annotation(rets: tuple[Ret, ...]) -> str:
    if not rets:
        return "None"
    parts = ["list[Tensor]" if r.type == "Tensor[]" else "Tensor" for r in rets]
    return parts[0] if len(parts) == 1 else f"tuple[{', '.join(parts)}]"


_NUMBER = re.compile(r"-?(\d[\d_]*\.?[\d_]*|\.\d[\d_]*)([eE][+-]?\d+)?\Z")


def default_literal(arg: Arg) -> str | None:
    """The schema default as a Python literal (lists become tuples), spelled as black spells it."""
    if arg.default is None:
        return None
    text = arg.default.strip()
    if text.startswith("[") and text.endswith("]"):
        items = [_default_item(i.strip()) for i in text[1:-1].split(",") if i.strip()]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if text in ("inf", "-inf", "nan"):
        return f"float({literal(text)})"
    return _default_item(text)


def _default_item(text: str) -> str:
    if _NUMBER.match(text):
        return ("-" if text.startswith("-") else "") + number(text.lstrip("-"))
    if text[:1] in "\"'":
        return expression(text)  # a string: black's quotes
    return text


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


def def_lines(op: OpSpec, name: str) -> list[str]:
    """`def name(<annotated parameters>) -> <returns>:` at module level, as black wraps it."""
    return wrapped(
        f"def {name}(", parameters(op), f") -> {return_annotation(op.returns)}:", "", is_def=True
    )


def call_arguments(op: OpSpec) -> str:
    return ", ".join(f"{a.name}={a.name}" if a.kwarg_only else a.name for a in op.args)


def fake_outputs(op: OpSpec) -> tuple[str, ...]:
    """What the fake kernel returns, one expression per output: `x.new_empty(x.shape)` for `like = "x"`."""
    like = tuple(f"{name}.new_empty({name}.shape)" for name in op.fake.like)
    return like or tuple(expression(e) for e in op.fake.expr)


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


def sample_literal(value: object, type_text: str = "") -> str:
    if "ScalarType" in type_text and isinstance(value, str):
        return f"torch.{value}"
    if isinstance(value, TensorSample):
        fields = [literal(value.shape)]
        for key in ("dtype", "low", "high"):
            item = getattr(value, key)
            if item is not None:
                fields.append(f"{key}={literal(item)}")
        if value.noncontiguous:
            fields.append("noncontiguous=True")
        if not value.requires_grad:
            fields.append("requires_grad=False")
        return f"TensorSpec({', '.join(fields)})"
    if isinstance(value, tuple) and value and all(isinstance(v, TensorSample) for v in value):
        return "[" + ", ".join(sample_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        return literal(list(value))
    return literal(value)


def dict_lines(items: list[tuple[str, str]], indent: str) -> list[str]:
    """`{"name": value, ...},` as an item of a list at `indent`: one line, or one line per entry
    when that is over 100 columns (Note [Black-stable output] in pyexpr.py)."""
    entries = [f"{literal(name)}: {value}" for name, value in items]
    line = "{" + ", ".join(entries) + "},"
    if len(indent) + len(line) <= 100:
        return [line]
    return ["{", *(f"    {entry}," for entry in entries), "},"]
