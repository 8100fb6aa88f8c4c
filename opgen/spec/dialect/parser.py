"""A parser of PyTorch's operator schema language, without importing torch.

It reads what `torch._C.parse_schema` (and so `Library.define` and C++
`m.def`) reads, the way torch reads it: any whitespace between tokens, `Tensor!`
and `Tensor!?`, named and numbered alias sets on elements or lists, tuple
types, spaces around `=`, single- or double-quoted strings, dtype names as
defaults. tests/test_schema_dialect.py compares it with torch, argument by
argument, on a corpus of real schemas. What torch reads but then cannot
register or call is refused afterwards, in `rules.py`.

Grammar (after the op name):
    schema  := '(' [param (',' param)*] ')' '->' returns
    param   := '*' | type NAME ['=' default]
    returns := '(' [ret (',' ret)*] ')' | ret
    ret     := type [NAME]
    type    := (NAME | '(' type (',' type)* ')') [alias] (('[' [INT] ']' [alias]) | '?')*
    alias   := '!' | '(' sets ['!'] ['->' sets] ')'     sets := set ('|' set)*     set := NAME | '*'
    default := 'None' | 'True' | 'False' | ['-'] NUMBER | STRING | NAME | '[' [item (',' item)*] ']'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

from .types import AliasSet, Default, DefaultValue, Param, ParsedSchema, SchemaType, TypeKind
from .values import (
    ENUM_DEFAULTS,
    ENUMS,
    FLOAT_MAX,
    INT64_MAX,
    INT64_MIN,
    INT_ENUM_DEFAULTS,
    SCALAR_TYPE_NAMES,
    BadLiteral,
    read_string,
    underflows,
)

__all__ = ["SchemaError", "parse", "TORCH_TYPES", "TORCH_KEYWORDS"]

# Base types torch's schema parser knows (`DeviceIndex` aside, which it reads as int).
TORCH_TYPES = frozenset(
    "Tensor int SymInt float bool str Scalar ScalarType Layout MemoryFormat Device Generator "
    "Storage Stream complex SymBool Any QScheme Capsule".split()
)
# Type constructors torch reads that opgen does not: named so the error can say so.
_TORCH_ONLY_TYPES = frozenset("Dict Future Await RRef Union DeviceIndex".split())
# Words torch's lexer reserves: never a parameter name (torch: "expected ident").
TORCH_KEYWORDS = frozenset(
    "False None True and as assert break class continue def del elif else for global if "
    "import in is not or pass raise return while with".split()
)

_TOKEN = re.compile(
    r"""(?P<space>[ \t\n\r\f\v]+)"""
    r"""|(?P<arrow>->)"""
    r"""|(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""
    r"""|(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"""
    r"""|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"""
    r"""|(?P<ellipsis>\.\.\.)"""
    r"""|(?P<punct>[()\[\],*?!|=\-])"""
)


class SchemaError(ValueError):
    """A schema torch cannot read, or opgen refuses; `offset` is where in the text."""

    def __init__(self, message: str, offset: int, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.hint = hint


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    offset: int

    @property
    def end(self) -> int:
        return self.offset + len(self.text)


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i = 0
    while i < len(text):
        match = _TOKEN.match(text, i)
        if match is None:
            char = text[i]
            what = "an unterminated string" if char in "\"'" else f"the character {char!r}"
            raise SchemaError(
                f"the schema has {what} where torch expects a token",
                i,
                "names are ASCII letters, digits and _; strings need a closing quote",
            )
        if match.lastgroup != "space":
            out.append(_Token(match.lastgroup or "", match.group(), i))
        i = match.end()
    out.append(_Token("end", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.index = 0
        self.fresh = 0  # bare `!` seen so far: torch numbers them $0, $1, ...

    # -- tokens ------------------------------------------------------------
    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def take(self) -> _Token:
        token = self.peek()
        self.index += 1
        return token

    def accept(self, text: str) -> bool:
        token = self.peek()
        if token.kind in ("punct", "arrow", "ellipsis") and token.text == text:
            self.index += 1
            return True
        return False

    def expect(self, text: str, what: str, hint: str = "") -> None:
        if not self.accept(text):
            self.fail(f"expected {what}, found {self._shown(self.peek())}", hint=hint)

    def fail(self, message: str, token: _Token | None = None, hint: str = "") -> NoReturn:
        token = token or self.peek()
        raise SchemaError(message, token.offset, hint)

    @staticmethod
    def _shown(token: _Token) -> str:
        return "the end of the schema" if token.kind == "end" else repr(token.text)

    # -- schema ------------------------------------------------------------
    def schema(self) -> ParsedSchema:
        self.expect("(", "'(' opening the argument list")
        args = self.arguments()
        if self.peek().kind != "arrow":
            self.fail(
                f"expected '->' after the arguments, found {self._shown(self.peek())}",
                hint='add the returns: "-> Tensor", or "-> ()" when the op returns nothing',
            )
        self.take()
        returns = self.returns()
        if self.peek().kind != "end":
            self.fail(f"unexpected {self._shown(self.peek())} after the returns")
        return ParsedSchema(tuple(args), tuple(returns), self.text)

    def arguments(self) -> list[Param]:
        """The arguments after '(', up to and with the ')' that closes them; those after a '*'
        are keyword-only."""
        args: list[Param] = []
        kwarg_only = False
        if self.accept(")"):
            return args
        while True:
            star = self.peek()
            if self.accept("*"):
                if kwarg_only:
                    self.fail("the schema has two '*' markers", star, "keep one")
                kwarg_only = True
            else:
                args.append(self.param(kwarg_only))
            if self.accept(")"):
                return args
            if self.peek().kind == "arrow":
                self.fail(
                    "expected ')' closing the argument list, found '->'",
                    hint="add ')' before '->'",
                )
            self.expect(",", "',' or ')' after an argument")
            if self.peek().text == ")" and self.peek().kind == "punct":
                self.fail("the argument list ends with a comma", hint="remove the trailing ','")

    def returns(self) -> list[Param]:
        """The returns after '->': one, or a parenthesised list (maybe empty)."""
        if not (self.peek().text == "(" and self.peek().kind == "punct"):
            return [self.ret()]
        self.take()
        returns: list[Param] = []
        if self.accept(")"):
            return returns
        while True:
            returns.append(self.ret())
            if self.accept(")"):
                return returns
            self.expect(",", "',' or ')' between returns")

    def name(self, what: str, where: str = "") -> _Token:
        token = self.peek()
        if token.kind != "name":
            self.fail(f"expected {what}{where}, found {self._shown(token)}")
        if token.text in TORCH_KEYWORDS:
            self.fail(
                f"{token.text!r} cannot be {what}: torch's schema parser reserves the word",
                token,
                "choose another name",
            )
        return self.take()

    def param(self, kwarg_only: bool) -> Param:
        start = self.peek().offset
        kind = self.type()
        name = self.name("an argument name", " after the type")
        default = None
        if self.accept("="):
            default = self.default(kind)
        end = self.tokens[self.index - 1].end
        return Param(name.text, kind, default, kwarg_only, self.text[start:end], start)

    def ret(self) -> Param:
        start = self.peek().offset
        kind = self.type()
        name = ""
        if self.peek().kind == "name":
            name = self.name("a return name").text
        end = self.tokens[self.index - 1].end
        return Param(name, kind, None, False, self.text[start:end], start)

    # -- types -------------------------------------------------------------
    def type(self) -> SchemaType:
        token = self.peek()
        if token.kind == "punct" and token.text == "(":
            self.take()
            members = [self.type()]
            while self.accept(","):
                members.append(self.type())
            self.expect(")", "')' closing the tuple type")
            node = SchemaType(TypeKind.TUPLE, items=tuple(members))
        elif token.kind == "ellipsis":
            self.fail(
                "torch's varargs '...' are not supported by opgen",
                token,
                "list the arguments",
            )
        else:
            if token.kind != "name":
                self.fail(f"expected a type, found {self._shown(token)}")
            self.take()
            if token.text in _TORCH_ONLY_TYPES:
                self.fail(
                    f"the type {token.text} is not supported by opgen",
                    token,
                    "use Tensor, int, SymInt, float, bool, str, Scalar, ScalarType, Device, "
                    "their lists ([]) and optionals (?)",
                )
            if token.text not in TORCH_TYPES:
                self.fail(
                    f"unknown type {token.text!r}",
                    token,
                    "torch's types are Tensor, int, SymInt, float, bool, str, Scalar, ScalarType, "
                    "Device, ..., with [] for lists and ? for optionals",
                )
            node = SchemaType.base(token.text)
        node = self.annotated(node)
        while True:
            token = self.peek()
            if token.kind == "punct" and token.text == "[":
                self.take()
                size = None
                if self.peek().kind == "number":
                    digits = self.take()
                    if not digits.text.isdigit():
                        self.fail("a list size must be a whole number", digits)
                    size = int(digits.text)
                self.expect("]", "']' closing the list type")
                node = self.annotated(node.list(size))
            elif self.accept("?"):
                node = node.optional()
            else:
                return node

    def annotated(self, node: SchemaType) -> SchemaType:
        alias = self.alias()
        if alias is None:
            return node
        return SchemaType(node.kind, node.name, node.items, node.size, alias)

    def alias(self) -> AliasSet | None:
        if self.accept("!"):
            self.fresh += 1
            return AliasSet((f"${self.fresh - 1}",), None, True, fresh=self.fresh - 1)
        opening, first = self.peek(), self.peek(1)
        if not (
            opening.kind == "punct"
            and opening.text == "("
            and (first.kind == "name" or first.text == "*")
        ):
            return None
        self.take()
        before = self.sets()
        write = self.accept("!")
        after = None
        if self.peek().kind == "arrow":
            self.take()
            after = self.sets()
        self.expect(")", "')' closing the alias annotation", "e.g. Tensor(a!) x")
        return AliasSet(before, after, write)

    def sets(self) -> tuple[str, ...]:
        names = []
        while True:
            if self.accept("*"):
                names.append("*")
            else:
                names.append(self.name("an alias set name").text)
            if not self.accept("|"):
                return tuple(names)

    # -- defaults ----------------------------------------------------------
    def default(self, kind: SchemaType) -> Default:
        start = self.peek().offset
        value = self.default_value(kind)
        end = self.tokens[self.index - 1].end
        return Default(self.text[start:end], value)

    def default_value(self, kind: SchemaType) -> DefaultValue:
        token = self.peek()
        element = kind.element
        if token.kind == "name" and token.text in ("None", "True", "False"):
            self.take()
            return {"None": None, "True": True, "False": False}[token.text]
        if token.kind == "string":
            self.take()
            try:
                return read_string(token.text)
            except BadLiteral as exc:
                raise SchemaError(exc.message, token.offset + exc.offset, exc.hint) from None
        if token.kind == "punct" and token.text == "[":
            self.take()
            return self.list_default(element)
        if token.kind == "name":
            self.take()
            return self.named_default(token, kind)
        # torch makes an int a float for `float` and `float[]`, but keeps it an int in a `float?`
        value = self.number("" if kind.is_optional else element)
        list_type = kind.unwrapped
        if list_type.kind is TypeKind.LIST and list_type.size is not None:
            return (value,) * list_type.size  # int[2] s=1 means [1, 1]
        return value

    def list_default(self, element: str) -> tuple[bool | int | float, ...]:
        """The numbers of a list default after its '[', up to and with its ']'."""
        if self.accept("]"):
            return ()
        items: list[bool | int | float] = []
        while True:
            items.append(self.number(element, "write the list's items as numbers, e.g. [0, 1]"))
            if self.accept("]"):
                return tuple(items)
            self.expect(",", "',' or ']' in the list default")

    def named_default(self, token: _Token, kind: SchemaType) -> str | int:
        """A default written as a name (taken): a dtype, or an enum value torch reads by name."""
        element = kind.element
        if element == "ScalarType" and token.text in SCALAR_TYPE_NAMES:
            return token.text
        if element in ("int", "SymInt") and token.text in INT_ENUM_DEFAULTS:
            return INT_ENUM_DEFAULTS[token.text]
        if token.text in ENUM_DEFAULTS.get(element, {}):
            return ENUM_DEFAULTS[element][token.text]
        hint = {
            "ScalarType": "write a dtype name such as float32 or long",
            **{
                kind: f"torch reads {' or '.join(ENUM_DEFAULTS[kind])} by name; write "
                f"another {kind} as its code: "
                + ", ".join(f"{code} for {name}" for code, name in enumerate(names))
                for kind, names in ENUMS.items()
            },
            "str": "quote the string: 'mean' or \"mean\"",
            "float": "write a finite number such as 1.0 (torch reads no inf or nan default)",
        }.get(element, "write a number, a quoted string, True, False, None or a list [...]")
        self.fail(
            f"{token.text!r} is not a default torch can read for {kind.spelling}", token, hint
        )

    def number(self, element: str, hint: str = "write a number") -> bool | int | float:
        token = self.peek()
        if token.kind == "name" and token.text in ("True", "False"):
            self.take()
            return token.text == "True"
        negative = self.accept("-")
        token = self.peek()
        if token.kind != "number":
            if token.text in ("inf", "nan"):
                hint = "torch reads no inf or nan default; choose a finite value"
            self.fail(f"expected a number, found {self._shown(token)}", hint=hint)
        self.take()
        glued = self.peek()
        if glued.kind in ("name", "number") and glued.offset == token.end:
            self.fail(
                f"{token.text + glued.text!r} is not a number torch reads correctly",
                token,
                "write a plain decimal number (torch reads 0x10 as 0)",
            )
        if any(c in token.text for c in ".eE"):
            value = float(token.text)
            if value > FLOAT_MAX:
                self.fail(
                    f"the default {token.text} is out of range for a float",
                    token,
                    "write a finite value",
                )
            if underflows(token.text):
                self.fail(
                    f"the default {token.text} is below the smallest normal double "
                    "(2.2250738585072014e-308), which torch's schema parser refuses "
                    "(a C++ extension defining it aborts at import)",
                    token,
                    "write 0.0 or a value of at least 2.2250738585072014e-308",
                )
            value = -value if negative else value
        else:
            value = -int(token.text) if negative else int(token.text)
            if not INT64_MIN <= value <= INT64_MAX:
                self.fail(
                    f"the default {'-' if negative else ''}{token.text} does not fit in a 64-bit integer",
                    token,
                    f"write a value from {INT64_MIN} to {INT64_MAX}",
                )
        if element == "float" and not isinstance(value, bool):
            return float(
                value
            )  # torch stores `float f=0` as 0.0 (not in a `float?`: see default_value)
        return value


def parse(text: str) -> ParsedSchema:
    """Parse the schema after the op name (`(Tensor x) -> Tensor`); raises SchemaError."""
    return _Parser(text).schema()
