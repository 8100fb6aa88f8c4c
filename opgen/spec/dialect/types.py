"""What a parsed schema is made of: types as structures, alias annotations, defaults.

Note [Schema model]
A schema is kept as the user wrote it, losslessly: every type is a tree
(`Tensor(a!)?` is an optional around a Tensor carrying the alias `(a!)`), each
annotation stays on the node it was written after (`Tensor(a!)[]` and
`Tensor[](a!)` are different trees with the same meaning to torch), a default
keeps its source text next to the value torch reads from it, and every
parameter keeps its own text and offset for diagnostics. `str()` of a type
prints it back in the dialect; `opgen.spec.dialect.printer` prints a whole
schema for registration.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from enum import StrEnum

__all__ = ["TypeKind", "AliasSet", "SchemaType", "Default", "Param", "ParsedSchema", "DefaultValue"]


class TypeKind(StrEnum):
    BASE = "base"
    OPTIONAL = "optional"
    LIST = "list"
    TUPLE = "tuple"


@dataclass(frozen=True)
class AliasSet:
    """An alias annotation as written: `!` (`fresh`), `(a)`, `(a!)`, `(a|b -> *)`."""

    before: tuple[str, ...] = ()
    after: tuple[str, ...] | None = None  # None when no `->` was written
    is_write: bool = False
    fresh: int | None = None  # a bare `!`: torch names it $<fresh>, counting in the schema's order

    def __str__(self) -> str:
        if self.fresh is not None:
            return "!"
        text = "|".join(self.before) + ("!" if self.is_write else "")
        if self.after is not None:
            text += " -> " + "|".join(self.after)
        return f"({text})"

    @property
    def after_sets(self) -> tuple[str, ...]:
        """The sets after the op ran, as torch stores them (a bare `!` has none)."""
        if self.fresh is not None:
            return ()
        return self.before if self.after is None else self.after


@dataclass(frozen=True)
class SchemaType:
    """One node of a type tree; `alias` is the annotation written right after it."""

    kind: TypeKind
    name: str = ""  # BASE: Tensor, int, SymInt, ...
    items: tuple[SchemaType, ...] = ()  # OPTIONAL/LIST: one element; TUPLE: its members
    size: int | None = None  # LIST: the N of `int[N]`
    alias: AliasSet | None = None

    @staticmethod
    def base(name: str) -> SchemaType:
        return SchemaType(TypeKind.BASE, name)

    def optional(self) -> SchemaType:
        return SchemaType(TypeKind.OPTIONAL, items=(self,))

    def list(self, size: int | None = None) -> SchemaType:
        return SchemaType(TypeKind.LIST, items=(self,), size=size)

    def __str__(self) -> str:
        return self._text(aliases=True, sizes=True)

    def _text(self, aliases: bool, sizes: bool) -> str:
        alias = str(self.alias) if aliases and self.alias is not None else ""
        if self.kind is TypeKind.BASE:
            text = self.name
        elif self.kind is TypeKind.OPTIONAL:
            # an alias written before `?` belongs to the element: Tensor(a!)? prints as written
            return self.items[0]._text(aliases, sizes) + "?" + alias
        elif self.kind is TypeKind.LIST:
            size = str(self.size) if sizes and self.size is not None else ""
            text = f"{self.items[0]._text(aliases, sizes)}[{size}]"
        else:
            text = "(" + ", ".join(t._text(aliases, sizes) for t in self.items) + ")"
        return text + alias

    @property
    def spelling(self) -> str:
        """The type without alias annotations, sizes kept: `Tensor?[]`, `int[2]`, `(int, int)?`."""
        return self._text(aliases=False, sizes=True)

    @property
    def family(self) -> str:
        """The spelling without list sizes (`int[2]` -> `int[]`): one table entry covers them all."""
        return self._text(aliases=False, sizes=False)

    @property
    def element(self) -> str:
        """The innermost base name (`Tensor` for `Tensor?[]`); "" for a tuple."""
        node = self
        while node.kind in (TypeKind.OPTIONAL, TypeKind.LIST):
            node = node.items[0]
        return node.name if node.kind is TypeKind.BASE else ""

    @property
    def is_optional(self) -> bool:
        return self.kind is TypeKind.OPTIONAL

    @property
    def unwrapped(self) -> SchemaType:
        """The type inside any `?`."""
        node = self
        while node.kind is TypeKind.OPTIONAL:
            node = node.items[0]
        return node

    def walk(self) -> Iterator[SchemaType]:
        yield self
        for item in self.items:
            yield from item.walk()

    def aliases(self) -> Iterator[AliasSet]:
        return (node.alias for node in self.walk() if node.alias is not None)

    @property
    def is_write(self) -> bool:
        """Whether any annotation of the type writes (`Tensor(a!)`, `Tensor!?`, `Tensor(a!)[]`)."""
        return any(a.is_write for a in self.aliases())

    @property
    def annotation(self) -> AliasSet | None:
        """The annotation torch attaches to the argument (`alias_info`).

        torch reads an annotation on the element of a list (`Tensor(a!)[]`) as an
        unnamed write annotation of the whole list, and one written on the element
        of an optional as the optional's.
        """
        node = self.unwrapped
        if node.alias is not None:
            return node.alias
        if node.kind is TypeKind.LIST:
            inner = node.items[0].unwrapped
            if inner.alias is not None:
                return AliasSet((), (), inner.alias.is_write)
        return None

    def with_alias(self, alias: AliasSet) -> SchemaType:
        """The type with `alias` on its innermost base (`Tensor?` -> `Tensor(a!)?`, `Tensor[]` -> `Tensor(a!)[]`)."""
        if self.kind is TypeKind.BASE:
            return replace(self, alias=alias)
        if self.kind in (TypeKind.OPTIONAL, TypeKind.LIST):
            return replace(self, items=(self.items[0].with_alias(alias),))
        return self

    def renamed_aliases(self, names: dict[int, str]) -> SchemaType:
        """The type with each bare `!` (keyed by its `fresh` number) written as the set `(name!)`."""
        alias = self.alias
        if alias is not None and alias.fresh is not None and alias.fresh in names:
            alias = AliasSet((names[alias.fresh],), None, True)
        items = tuple(i.renamed_aliases(names) for i in self.items)
        return replace(self, alias=alias, items=items)


DefaultValue = None | bool | int | float | str | tuple[bool | int | float, ...]


@dataclass(frozen=True)
class Default:
    """A default as written (`text`) and the value torch reads from it.

    Lists are tuples; `int[2] s=1` reads as (1, 1); a float type reads `0` as 0.0;
    a ScalarType default is its dtype name (`float32`, `long`).
    """

    text: str
    value: DefaultValue


@dataclass(frozen=True)
class Param:
    """One argument or return. A return has no default and may have no name ("")."""

    name: str
    type: SchemaType
    default: Default | None = None
    kwarg_only: bool = False
    text: str = ""  # the parameter's own text in the schema
    offset: int = 0  # where it starts in the schema text


@dataclass(frozen=True)
class ParsedSchema:
    args: tuple[Param, ...]
    returns: tuple[Param, ...]
    text: str
