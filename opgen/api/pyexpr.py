"""Spec expressions printed the way black prints them.

Note [Black-stable output]
Generated Python is formatted by black, which costs 30-60 ms a file: most of
a full regeneration. So the templates and `opgen.api` write what black would:
fixed text already formatted, literals with black's quotes (`literals.py`),
and the expressions of a spec (formulas, shape rules, references) printed
from their syntax tree with black's spacing (`expression`): one space around
binary operators, none inside brackets, spaces around `:` in slices with
non-trivial bounds, `**` hugging simple operands by black's own token rule,
the parentheses black adds (`-(x**2)`, `(1.0).real`) and its spelling of
numbers. Line breaks are left to black: a file with a line over 100 columns
is still formatted (`format.is_black_stable`). `tests/test_black_stable.py`
runs black over every template case, the reference set and random spec
expressions, and fails if black would change an output opgen does not run
it on.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .literals import number, string

__all__ = ["expression", "unparse"]

# binding strength, weakest first (as in the Python grammar)
_TUPLE, _TEST, _OR, _AND, _NOT, _CMP, _BOR, _BXOR, _BAND, _SHIFT, _ARITH, _TERM = range(1, 13)
_FACTOR, _POWER, _PRIMARY = 13, 14, 16

_BINARY = {
    ast.BitOr: ("|", _BOR),
    ast.BitXor: ("^", _BXOR),
    ast.BitAnd: ("&", _BAND),
    ast.LShift: ("<<", _SHIFT),
    ast.RShift: (">>", _SHIFT),
    ast.Add: ("+", _ARITH),
    ast.Sub: ("-", _ARITH),
    ast.Mult: ("*", _TERM),
    ast.MatMult: ("@", _TERM),
    ast.Div: ("/", _TERM),
    ast.FloorDiv: ("//", _TERM),
    ast.Mod: ("%", _TERM),
    ast.Pow: ("**", _POWER),
}
_UNARY = {ast.UAdd: "+", ast.USub: "-", ast.Invert: "~"}
_COMPARE = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}
# token kinds, as black's hugging rule for `**` reads them
_NAME, _NUMBER, _OTHER, _DOT, _OPEN, _CLOSE, _OPEN_SQUARE, _CLOSE_SQUARE = range(8)
_POW = 8


@dataclass
class _Token:
    kind: int
    text: str  # empty: a parenthesis black adds but does not print (it still counts)
    space: bool = False  # a space before it


def expression(text: str) -> str:
    """A valid spec expression (single line, no comprehensions, lambdas or f-strings) as black prints it."""
    source = text.strip()
    return unparse(ast.parse(source, mode="eval").body, source)


def unparse(node: ast.AST, source: str = "") -> str:
    """`node` (a spec expression's tree, maybe rewritten) printed black's way.

    `source`, the text `node` was parsed from, keeps numbers as the user spelled them.
    """
    if isinstance(node, ast.Expression):
        node = node.body
    tokens = _Printer(source).expr(node, _TUPLE)
    _hug_powers(tokens)
    return "".join((" " if t.space and i else "") + t.text for i, t in enumerate(tokens))


def _spaced(tokens: list[_Token]) -> list[_Token]:
    """`tokens` with a space before their first printed token."""
    for token in tokens:
        if token.text:
            token.space = True
            break
    return tokens


def _joined(items: list[list[_Token]]) -> list[_Token]:
    """Items separated by `, `."""
    out: list[_Token] = []
    for index, item in enumerate(items):
        if index:
            out.append(_Token(_OTHER, ","))
            _spaced(item)
        out += item
    return out


class _Printer:
    def __init__(self, source: str) -> None:
        self.source = source

    def expr(self, node: ast.AST, level: int) -> list[_Token]:
        tokens = self._bare(node)
        if _strength(node) < level:
            return self._parenthesized(tokens)
        if isinstance(node, ast.IfExp):
            # black wraps every conditional expression in invisible parentheses
            return [_Token(_OPEN, ""), *tokens, _Token(_CLOSE, "")]
        return tokens

    @staticmethod
    def _parenthesized(inner: list[_Token]) -> list[_Token]:
        return [_Token(_OPEN, "("), *inner, _Token(_CLOSE, ")")]

    def _sole(self, node: ast.AST) -> list[_Token]:
        """The only item between brackets: a conditional expression there gets no invisible ones."""
        return self._bare(node) if isinstance(node, ast.IfExp) else self._element(node)

    def _bare(self, node: ast.AST) -> list[_Token]:
        printer = _PRINTERS.get(type(node))
        if printer is None:
            raise ValueError(f"cannot print {type(node).__name__} in a spec expression")
        return printer(self, node)

    def _name(self, node: ast.Name) -> list[_Token]:
        return [_Token(_NAME, node.id)]

    def _constant_node(self, node: ast.Constant) -> list[_Token]:
        return [self._constant(node)]

    def _attribute(self, node: ast.Attribute) -> list[_Token]:
        base = self.expr(node.value, _PRIMARY)
        if _wrapped_number(node.value, base):
            base = self._parenthesized(base)  # black's; `1.real` would not even parse
        return [*base, _Token(_DOT, "."), _Token(_NAME, node.attr)]

    def _call(self, node: ast.Call) -> list[_Token]:
        return [*self.expr(node.func, _PRIMARY), *self._arguments(node)]

    def _subscript(self, node: ast.Subscript) -> list[_Token]:
        index = self._index(node.slice)
        return [
            *self.expr(node.value, _PRIMARY),
            _Token(_OPEN_SQUARE, "["),
            *index,
            _Token(_CLOSE_SQUARE, "]"),
        ]

    def _bool(self, node: ast.BoolOp) -> list[_Token]:
        word, own = ("and", _AND) if isinstance(node.op, ast.And) else ("or", _OR)
        out = self.expr(node.values[0], own + 1)
        for operand in node.values[1:]:
            out += [_Token(_NAME, word, True), *_spaced(self.expr(operand, own + 1))]
        return out

    def _compare(self, node: ast.Compare) -> list[_Token]:
        out = self.expr(node.left, _CMP + 1)
        for op, right in zip(node.ops, node.comparators, strict=True):
            for word in _COMPARE[type(op)].split():
                out.append(_Token(_NAME if word.isalpha() else _OTHER, word, True))
            out += _spaced(self.expr(right, _CMP + 1))
        return out

    def _if(self, node: ast.IfExp) -> list[_Token]:
        return [
            *self.expr(node.body, _TEST + 1),
            _Token(_NAME, "if", True),
            *_spaced(self.expr(node.test, _TEST + 1)),
            _Token(_NAME, "else", True),
            *_spaced(self.expr(node.orelse, _TEST)),
        ]

    def _dict(self, node: ast.Dict) -> list[_Token]:
        items = []
        for key, entry in zip(node.keys, node.values, strict=True):
            if key is None:
                items.append([_Token(_OTHER, "**"), *self.expr(entry, _BOR)])
            else:
                key_tokens = self.expr(key, _TEST)
                items.append([*key_tokens, _Token(_OTHER, ":"), *_spaced(self.expr(entry, _TEST))])
        return [_Token(_OTHER, "{"), *_joined(items), _Token(_OTHER, "}")]

    def _starred(self, node: ast.Starred) -> list[_Token]:
        return [_Token(_OTHER, "*"), *self.expr(node.value, _BOR)]

    def _arguments(self, node: ast.Call) -> list[_Token]:
        items = [self._element(a) for a in node.args]
        for keyword in node.keywords:
            value = self.expr(keyword.value, _TEST)
            if keyword.arg is None:
                items.append([_Token(_OTHER, "**"), *value])
            else:
                items.append([_Token(_NAME, keyword.arg), _Token(_OTHER, "="), *value])
        if len(items) == 1 and not node.keywords and isinstance(node.args[0], ast.IfExp):
            items = [self._sole(node.args[0])]
        return [_Token(_OPEN, "("), *_joined(items), _Token(_CLOSE, ")")]

    def _element(self, node: ast.AST) -> list[_Token]:
        if isinstance(node, ast.Starred):
            return self._starred(node)
        return self.expr(node, _TEST)

    def _display(self, node: ast.Tuple | ast.List | ast.Set) -> list[_Token]:
        items = [self._element(e) for e in node.elts]
        if isinstance(node, ast.List):
            opening, closing = _Token(_OPEN_SQUARE, "["), _Token(_CLOSE_SQUARE, "]")
        elif isinstance(node, ast.Set):
            opening, closing = _Token(_OTHER, "{"), _Token(_OTHER, "}")
        else:
            opening, closing = _Token(_OPEN, "("), _Token(_CLOSE, ")")
            if len(items) == 1:
                return [opening, *items[0], _Token(_OTHER, ","), closing]
        return [opening, *_joined(items), closing]

    def _constant(self, node: ast.Constant) -> _Token:
        value = node.value
        if value is Ellipsis:
            return _Token(_OTHER, "...")
        if isinstance(value, (str, bytes)):
            return _Token(_OTHER, string(value))
        if isinstance(value, (bool, type(None))):
            return _Token(_NAME, repr(value))
        spelled = ast.get_source_segment(self.source, node) if self.source else None
        if spelled is None or not (spelled[:1].isdigit() or spelled.startswith(".")):
            spelled = repr(value)
        return _Token(_NUMBER, number(spelled))

    def _binary(self, node: ast.BinOp) -> list[_Token]:
        symbol, own = _BINARY[type(node.op)]
        if isinstance(node.op, ast.Pow):
            # right-associative; the exponent may be signed (black decides the spaces later)
            left, right = self.expr(node.left, _PRIMARY), self.expr(node.right, _FACTOR)
            return [*left, _Token(_POW, "**", True), *_spaced(right)]
        left, right = self.expr(node.left, own), self.expr(node.right, own + 1)
        return [*left, _Token(_OTHER, symbol, True), *_spaced(right)]

    def _unary(self, node: ast.UnaryOp) -> list[_Token]:
        if isinstance(node.op, ast.Not):
            return [_Token(_NAME, "not"), *_spaced(self.expr(node.operand, _NOT))]
        sign = _Token(_OTHER, _UNARY[type(node.op)])
        operand = node.operand
        if (
            isinstance(operand, ast.BinOp)
            and isinstance(operand.op, ast.Pow)
            and not isinstance(operand.left, (ast.Attribute, ast.Call, ast.Subscript))
        ):
            # black writes `-x**2` as what it means: `-(x**2)`
            return [sign, *self._parenthesized(self.expr(operand, _TUPLE))]
        return [sign, *self.expr(operand, _FACTOR)]

    def _index(self, node: ast.AST) -> list[_Token]:
        if isinstance(node, ast.Tuple) and node.elts:
            items = [
                self._slice(e) if isinstance(e, ast.Slice) else self._element(e) for e in node.elts
            ]
            if len(items) == 1:
                return [*items[0], _Token(_OTHER, ",")]
            return _joined(items)
        if isinstance(node, ast.Slice):
            return self._slice(node)
        return self._element(node)

    def _slice(self, node: ast.Slice) -> list[_Token]:
        """`a:b:c`; with spaces around the colons (not next to an omitted bound) when a bound is complex."""
        spaced = not all(_simple_bound(p) for p in (node.lower, node.upper, node.step) if p)
        parts = [node.lower, node.upper] + ([node.step] if node.step is not None else [])
        out: list[_Token] = []
        for index, part in enumerate(parts):
            if index:
                out.append(_Token(_OTHER, ":", spaced and bool(out) and out[-1].text != ":"))
            if part is not None:
                tokens = self.expr(part, _TEST)
                out += _spaced(tokens) if spaced and index else tokens
        return out


def _strength(node: ast.AST) -> int:
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)][1]
    if isinstance(node, ast.UnaryOp):
        return _NOT if isinstance(node.op, ast.Not) else _FACTOR
    if isinstance(node, ast.BoolOp):
        return _AND if isinstance(node.op, ast.And) else _OR
    if isinstance(node, ast.Compare):
        return _CMP
    if isinstance(node, ast.IfExp):
        return _TEST
    if isinstance(node, ast.Starred):
        return _BOR
    return _PRIMARY


def _wrapped_number(node: ast.AST, printed: list[_Token]) -> bool:
    """A number before `.attr`: black parenthesizes it unless it is hex, octal, binary or complex."""
    if len(printed) != 1 or printed[0].kind != _NUMBER:
        return False
    text = printed[0].text.lower()
    return not text.startswith(("0x", "0o", "0b")) and "j" not in text


def _simple_bound(node: ast.AST) -> bool:
    """A slice bound black does not count as complex: a name, a literal, a sign, a display of those."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
        return _simple_bound(node.operand)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_simple_bound(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        keys = [k for k in node.keys if k is not None]
        return all(_simple_bound(k) for k in keys) and all(_simple_bound(v) for v in node.values)
    return False


def _hug_powers(tokens: list[_Token]) -> None:
    """Black's rule: `**` takes no spaces when both operands are simple: a name or number, maybe
    signed, or a dotted name; read from the tokens around it as black reads the line's leaves."""
    for index, token in enumerate(tokens):
        if token.kind != _POW or not 0 < index < len(tokens) - 1:
            continue
        if _simple_before(tokens, index - 1) and _simple_after(tokens, index + 1):
            token.space = False
            tokens[index + 1].space = False


def _simple_before(tokens: list[_Token], index: int) -> bool:
    if tokens[index].kind not in (_NAME, _NUMBER):
        return False
    chain = [tokens[index]]
    closing_seen = False
    while index > 0:
        index -= 1
        chain.append(tokens[index])
        closing_seen = closing_seen or tokens[index].kind in (_CLOSE, _CLOSE_SQUARE)
        if not _chained(chain[-2].kind, chain[-1].kind):
            return not closing_seen
    return True


def _chained(past: int, current: int) -> bool:
    """Whether walking back from `past` to `current` stays inside one lookup (black's chaining rule)."""
    if past == _NAME:
        return current == _DOT
    if past in (_CLOSE, _CLOSE_SQUARE):
        return current in (_CLOSE, _CLOSE_SQUARE)
    if past in (_OPEN, _OPEN_SQUARE):
        return current in (_NAME, _OPEN, _OPEN_SQUARE)
    return False


def _simple_after(tokens: list[_Token], index: int) -> bool:
    if tokens[index].text in ("+", "-", "~") and tokens[index].kind == _OTHER:
        index += 1
        if index >= len(tokens) or tokens[index].kind not in (_NAME, _NUMBER):
            return False
    if tokens[index].kind == _NUMBER:
        return True
    if tokens[index].kind != _NAME:
        return False
    for token in tokens[index:]:
        if token.kind not in (_NAME, _DOT):
            return token.kind not in (_OPEN, _OPEN_SQUARE)
        if token.text == "for":
            return True
    return True


# How `_Printer` prints each kind of expression node: one method per node type.
_PRINTERS: dict[type[ast.AST], Callable[[_Printer, Any], list[_Token]]] = {
    ast.Name: _Printer._name,
    ast.Constant: _Printer._constant_node,
    ast.Attribute: _Printer._attribute,
    ast.Call: _Printer._call,
    ast.Subscript: _Printer._subscript,
    ast.BinOp: _Printer._binary,
    ast.UnaryOp: _Printer._unary,
    ast.BoolOp: _Printer._bool,
    ast.Compare: _Printer._compare,
    ast.IfExp: _Printer._if,
    ast.Tuple: _Printer._display,
    ast.List: _Printer._display,
    ast.Set: _Printer._display,
    ast.Dict: _Printer._dict,
    ast.Starred: _Printer._starred,
}
