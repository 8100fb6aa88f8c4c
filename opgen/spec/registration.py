"""How a schema registers: the torch tags it earns, and whether `custom_op` can register it.

Note [Tags of aliasing ops]
A custom op whose return aliases an argument (`(Tensor(a!) x) -> Tensor(a!)`)
works eagerly, but functionalization (opcheck's aot test, torch.compile)
raises "Found a custom (non-ATen) operator whose output has alias
annotations" unless the op carries a tag saying which pattern it follows
(torch/_higher_order_ops/auto_functionalize.py). opgen tags the schemas that
fit one, with torch's own rules (`_validate_inplace_schema` and
`_validate_out_schema` in torch/library.py, which C++ `m.def` does not apply):

- `inplace`: the first positional argument is a written `Tensor`, the only
  return is a `Tensor` written in the same set, and no other argument is written;
- `out`: every written argument is a keyword-only `Tensor`, and the returns are
  those arguments, in order, each in its argument's set.

Ops that return aliases and fit neither (views `Tensor(a)`, mixed returns such as
`-> (Tensor(out!), Tensor)`) register untagged; their generated tests check them
eagerly and assert that documented error from opcheck's aot test and
torch.compile. How the tag reaches torch: Note [Defining tagged ops].
"""

from __future__ import annotations

from .model import Arg, Ret

__all__ = ["derived_tags", "custom_op_refusal", "triton_op_refusal"]


def _written_tensor(arg: Arg) -> bool:
    return arg.mutated and arg.family == "Tensor"


def _same_set(arg: Arg, ret: Ret) -> bool:
    a, r = arg.type.annotation, ret.type.annotation
    return a is not None and r is not None and r.is_write and set(a.before) == set(r.before)


def _fits_inplace(args: tuple[Arg, ...], rets: tuple[Ret, ...]) -> bool:
    if not args or args[0].kwarg_only or not _written_tensor(args[0]):
        return False
    if len(rets) != 1 or rets[0].family != "Tensor" or not _same_set(args[0], rets[0]):
        return False
    return not any(a.mutated for a in args[1:])


def _fits_out(args: tuple[Arg, ...], rets: tuple[Ret, ...]) -> bool:
    written = [a for a in args if a.mutated]
    if not written or any(not a.kwarg_only or not _written_tensor(a) for a in written):
        return False
    return len(rets) == len(written) and all(
        r.family == "Tensor" and _same_set(a, r) for a, r in zip(written, rets, strict=True)
    )


def derived_tags(args: tuple[Arg, ...], rets: tuple[Ret, ...]) -> tuple[str, ...]:
    """`("inplace",)`, `("out",)` or `()` (Note [Tags of aliasing ops])."""
    if _fits_inplace(args, rets):
        return ("inplace",)
    if _fits_out(args, rets):
        return ("out",)
    return ()


def custom_op_refusal(args: tuple[Arg, ...], rets: tuple[Ret, ...], overload: str) -> str | None:
    """Why `torch.library.custom_op` cannot register the schema, or None.

    A Python op whose schema custom_op refuses is registered with
    `torch.library.Library` instead (spec/validate.py).
    """
    if overload:
        return "it is an overload"
    if any(r.aliased for r in rets):
        return "its returns alias arguments"
    if any(a.kwarg_only and a.differentiable for a in args):
        return "it takes keyword-only tensors"
    if not any(a.differentiable for a in args):
        return "it takes no tensor, and custom_op dispatches on a tensor or a Device argument"
    return None


# Note [Schemas of Triton ops]
# torch.library.triton_op takes no schema: it infers one from the function's annotations
# (torch.library.infer_schema), which spells some types its own way. A pasted schema
# registers exactly only where inference can produce it: `int` comes back `SymInt`, a list
# default is refused, returns come back unnamed, and custom_op's own limits apply (no
# overloads, no returned aliases). Those schemas are refused when the spec is read, with
# the alternative: a Python op whose kernel launches the Triton kernel.
_TRITON_ARGUMENTS = frozenset(
    f"{base}{suffix}" for base in ("SymInt", "float", "bool") for suffix in ("", "?", "[]", "[]?")
) | {"Tensor", "Tensor?", "Tensor[]", "Tensor?[]", "str", "str?", "ScalarType", "ScalarType?"}
_TRITON_RETURNS = frozenset({"Tensor", "Tensor[]", "SymInt", "float", "bool"})
_INFERRED_SPELLING = {
    "int": "SymInt",
    "int?": "SymInt?",
    "int[]": "SymInt[]",
    "int[]?": "SymInt[]?",
}


def triton_op_refusal(args: tuple[Arg, ...], rets: tuple[Ret, ...], overload: str) -> str | None:
    """Why torch.library.triton_op cannot register exactly this schema, or None.

    Note [Schemas of Triton ops].
    """
    why = custom_op_refusal(args, rets, overload)
    if why is not None:
        return why
    if rets and any(a.mutated for a in args):
        return "it writes arguments and also returns values"
    for arg in args:
        family = arg.family
        if family in _INFERRED_SPELLING:
            return (
                f"argument {arg.name!r} is {family}, which triton_op infers as "
                f"{_INFERRED_SPELLING[family]} (write {_INFERRED_SPELLING[family]} in the schema "
                "if a symbolic size is what you mean)"
            )
        if family not in _TRITON_ARGUMENTS:
            return f"argument {arg.name!r} has type {family}, which triton_op cannot infer"
        annotation = arg.type.annotation
        if annotation is not None and not (arg.mutated and family == "Tensor"):
            return f"argument {arg.name!r} carries an alias annotation triton_op cannot infer"
        if arg.default is not None and isinstance(arg.default.value, tuple):
            return f"argument {arg.name!r} has a list default, which triton_op refuses"
        if arg.default is not None and arg.default.value is not None and "ScalarType" in family:
            return f"argument {arg.name!r} has a dtype default, which triton_op cannot infer"
    for ret in rets:
        if ret.name:
            return f"return {ret.name!r} is named, and triton_op infers unnamed returns"
        if ret.family not in _TRITON_RETURNS:
            return f"a return has type {ret.family}, which triton_op cannot infer"
    return None
