"""Checks for the Python expressions a spec may contain (formulas, shape rules).

Only expressions are accepted, only known names may appear, and nothing that
could reach outside the op (imports, lambdas, dunder attributes) is allowed:
the generated code then cannot run anything the spec author did not see.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

__all__ = ["ExprProblem", "check_expression", "names_used", "SAFE_BUILTINS"]

# Builtins a shape rule or formula may call; none of them reaches outside the expression.
SAFE_BUILTINS = ("len", "min", "max", "abs", "int", "float", "bool", "tuple", "list", "range", "sum", "round", "slice")

_FORBIDDEN = {
    ast.Lambda: "lambdas",
    ast.NamedExpr: "assignment expressions (:=)",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "generator expressions",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.JoinedStr: "f-strings",
}


class ExprProblem(Exception):
    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.message = message
        self.hint = hint


def parse_expression(text: str, what: str) -> ast.Expression:
    if not isinstance(text, str) or not text.strip():
        raise ExprProblem(f"{what} is empty", "write a Python expression")
    if "\n" in text.strip() or "\r" in text:
        raise ExprProblem(f"{what} spans several lines", "write a single-line Python expression")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        try:
            ast.parse(text.strip(), mode="exec")
        except SyntaxError:
            raise ExprProblem(
                f"{what} is not valid Python: {exc.msg}", "fix the expression's syntax"
            ) from None
        raise ExprProblem(
            f"{what} is a statement, not an expression",
            "write only the value to compute, e.g. `grad * x.cos()`",
        ) from None
    return tree


def check_expression(text: str, allowed: Iterable[str], what: str) -> ast.Expression:
    """Return the parsed expression or raise ExprProblem naming the first problem."""
    tree = parse_expression(text, what)
    allowed = set(allowed)
    for node in ast.walk(tree):
        for kind, label in _FORBIDDEN.items():
            if isinstance(node, kind):
                raise ExprProblem(f"{what} uses {label}", "formulas are plain expressions over the op's inputs")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ExprProblem(
                f"{what} accesses the private attribute {node.attr!r}",
                "use public tensor methods and torch functions only",
            )
        if isinstance(node, ast.Name) and node.id not in allowed:
            known = ", ".join(sorted(allowed))
            raise ExprProblem(f"{what} uses the unknown name {node.id!r}", f"names allowed here: {known}")
    return tree


def names_used(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
