"""Python-side names, annotations and literals for an op."""

from __future__ import annotations

from ..spec.model import Arg, OpSpec, Ret, TensorSample, join_params
from ..spec.types import normalize_type

__all__ = [
    "annotation",
    "return_annotation",
    "default_literal",
    "signature",
    "call_arguments",
    "sample_literal",
    "op_handle",
    "fake_outputs",
    "docstring",
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


def default_literal(arg: Arg) -> str | None:
    """The schema default as a Python literal (lists become tuples)."""
    if arg.default is None:
        return None
    text = arg.default.strip()
    if text.startswith("[") and text.endswith("]"):
        items = [i.strip() for i in text[1:-1].split(",") if i.strip()]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if text in ("inf", "-inf", "nan"):
        return f"float({text!r})"
    return text


def signature(op: OpSpec, annotate: bool = True) -> str:
    def one(arg: Arg) -> str:
        text = arg.name + (f": {annotation(arg.type)}" if annotate else "")
        default = default_literal(arg)
        if default is not None:
            text += f" = {default}" if annotate else f"={default}"
        return text

    return join_params(op.args, one)


def call_arguments(op: OpSpec) -> str:
    return ", ".join(f"{a.name}={a.name}" if a.kwarg_only else a.name for a in op.args)


def fake_outputs(op: OpSpec) -> tuple[str, ...]:
    """What the fake kernel returns, one expression per output: `x.new_empty(x.shape)` for `like = "x"`."""
    return tuple(f"{name}.new_empty({name}.shape)" for name in op.fake.like) or op.fake.expr


def op_handle(op: OpSpec) -> str:
    return f"torch.ops.{op.namespace}.{op.name}.{op.overload or 'default'}"


def docstring(text: str) -> str:
    """A triple-quoted literal that cannot end early, whatever the spec says."""
    body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if body.endswith('"'):
        body += " "
    return f'"""{body}"""'


def sample_literal(value: object, type_text: str = "") -> str:
    if "ScalarType" in type_text and isinstance(value, str):
        return f"torch.{value}"
    if isinstance(value, TensorSample):
        fields = [repr(value.shape)]
        for key in ("dtype", "low", "high"):
            item = getattr(value, key)
            if item is not None:
                fields.append(f"{key}={item!r}")
        if value.noncontiguous:
            fields.append("noncontiguous=True")
        if not value.requires_grad:
            fields.append("requires_grad=False")
        return f"TensorSpec({', '.join(fields)})"
    if isinstance(value, tuple) and value and all(isinstance(v, TensorSample) for v in value):
        return "[" + ", ".join(sample_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        return repr(list(value))
    return repr(value)
