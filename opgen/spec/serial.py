"""A validated `OpSpec` as JSON data and back, for the generate cache (Note [Generate cache]).

The encoding is data only: dataclasses of `spec.model` and of the schema types
(`spec.dialect.types`), and the enums of the latter, are rebuilt by name from
those modules alone, so a damaged or crafted cache can at worst fail to decode
(then the spec is validated again); it cannot run code, as a pickle could.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from pathlib import Path
from typing import Any

from . import model
from .dialect import types
from .model import OpSpec

__all__ = ["op_to_json", "op_from_json"]

# the dataclasses an OpSpec is made of (every one of `spec.model` and `spec.dialect.types` but
# OpSpec itself): a new part of the model is stored without being listed here
_CLASSES: dict[str, type] = {
    name: cls
    for module in (model, types)
    for name, cls in vars(module).items()
    if isinstance(cls, type)
    and dataclasses.is_dataclass(cls)
    and cls.__module__ == module.__name__
    and cls is not OpSpec
}
# the enums of the model and the schema types (Backend, TypeKind, ...): stored by member name,
# since a StrEnum is also a str and would come back as a plain one
_ENUMS: dict[str, type[Enum]] = {
    name: cls
    for module in (model, types)
    for name, cls in vars(module).items()
    if isinstance(cls, type) and issubclass(cls, Enum) and cls.__module__ == module.__name__
}
# the OpSpec fields stored as-is or rebuilt by hand rather than by `_encode`
_PATH, _LINES = "path", "lines"


def _encode(value: Any) -> Any:
    if value is model.NONE_SAMPLE:  # the one instance samples compare with by identity
        return {"n": None}
    if isinstance(value, Enum) and type(value).__name__ in _ENUMS:
        return {"e": type(value).__name__, "v": value.name}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if value is model.NONE_SAMPLE:  # `x = {none = true}` in a sample: the one instance
        return {"none": True}
    if isinstance(value, tuple):
        return {"t": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"d": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and type(value).__name__ in _CLASSES:
        fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"c": type(value).__name__, "f": fields}
    raise TypeError(f"cannot store {type(value).__name__} in the generate cache")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "t" in value:
        return tuple(_decode(v) for v in value["t"])
    if "d" in value:
        return {_decode(k): _decode(v) for k, v in value["d"]}
    if "n" in value:
        return model.NONE_SAMPLE
    if "e" in value:
        return _ENUMS[value["e"]][value["v"]]
    if "none" in value:
        return model.NONE_SAMPLE
    cls = _CLASSES[value["c"]]
    return cls(**{name: _decode(v) for name, v in value["f"].items()})


def op_to_json(op: OpSpec, root: Path) -> dict[str, Any]:
    """The op as JSON data; its spec path is stored relative to the project `root`."""
    fields = {
        f.name: _encode(getattr(op, f.name))
        for f in dataclasses.fields(op)
        if f.name not in (_PATH, _LINES)
    }
    return {
        _PATH: op.path.relative_to(root).as_posix(),
        _LINES: dict(op.lines),
        "f": fields,
    }


def op_from_json(data: dict[str, Any], root: Path) -> OpSpec:
    """The op that `op_to_json` stored. Raises (KeyError, TypeError, ValueError) on damaged data."""
    lines = data[_LINES]
    if not isinstance(lines, dict) or not all(isinstance(v, int) for v in lines.values()):
        raise TypeError("damaged line table")
    fields = {name: _decode(value) for name, value in data["f"].items()}
    return OpSpec(path=root / data[_PATH], lines=dict(lines), **fields)
