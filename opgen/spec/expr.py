"""Checks for the Python expressions a spec may contain (formulas, shape rules, references).

What the filter promises: an expression is one line of Python with no
statements, imports, lambdas, comprehensions or f-strings; every name in it
is one its place allows (the op's arguments, `grad`, `result`, `torch`, `F`,
`math`, a few builtins, the library's other ops); no attribute starting with
`_` (no `__class__` or `__globals__` way into the interpreter) and none of a
list that leads to the operating system (`torch.os`, `.system`,
`.load_library`). That stops accidents (a typo, a pasted statement, a name
that only exists on the author's machine) and keeps the generated code
readable: the code that runs is the expression the spec shows.

What it does not promise: that an expression stays inside the op. It calls
torch, and torch writes files and opens sockets: `torch.save(x, path)` or
`x.numpy().tofile(path)` in a reference, a gradient formula or a fake rule
writes a file when `opgen test` runs it. Spec files are code the user
trusts, like a Makefile: `opgen generate` only parses them, while `opgen
build`, `opgen test` and `opgen bench` run what they generate. See "Trust
and safety" in docs/safety.md.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

__all__ = ["ExprProblem", "check_expression", "names_used", "SAFE_BUILTINS"]

# Builtins a shape rule or formula may call; none of them reaches outside the expression.
SAFE_BUILTINS = (
    "len",
    "min",
    "max",
    "abs",
    "int",
    "float",
    "bool",
    "tuple",
    "list",
    "range",
    "sum",
    "round",
    "slice",
)

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


# Attributes that lead from torch/math/a tensor to the operating system or the
# interpreter (`torch.os.system`, `torch.sys`): no formula or shape rule needs them.
_FORBIDDEN_ATTRIBUTES = frozenset(
    "os sys subprocess builtins importlib ctypes shutil socket pickle marshal system popen spawnv "
    "load_library hub eval exec compile open globals locals getattr setattr delattr vars".split()
)
_MAX_LENGTH = 2000


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
    if len(text) > _MAX_LENGTH:
        raise ExprProblem(
            f"{what} is {len(text)} characters long (at most {_MAX_LENGTH})",
            "split the computation into another op",
        )
    if any(ord(c) < 32 and c != "\t" for c in text):
        raise ExprProblem(
            f"{what} contains a control character",
            "write plain text; use escapes such as \\n inside strings",
        )
    if _has_comment(text):
        raise ExprProblem(
            f"{what} contains a comment (#)",
            "remove the comment: generated code places the expression inside a line",
        )
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (RecursionError, MemoryError, ValueError):
        raise ExprProblem(f"{what} is nested too deeply", "simplify the expression") from None
    except SyntaxError as exc:
        try:
            ast.parse(text.strip(), mode="exec")
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            raise ExprProblem(
                f"{what} is not valid Python: {exc.msg}", "fix the expression's syntax"
            ) from None
        raise ExprProblem(
            f"{what} is a statement, not an expression",
            "write only the value to compute, e.g. `grad * x.cos()`",
        ) from None
    return tree


def _has_comment(text: str) -> bool:
    """True when `#` starts a comment (not inside a string literal)."""
    if "#" not in text:
        return False
    import io
    import tokenize

    try:
        return any(
            t.type == tokenize.COMMENT for t in tokenize.generate_tokens(io.StringIO(text).readline)
        )
    except (tokenize.TokenError, SyntaxError):
        return False  # ast.parse reports the syntax error


def check_expression(
    text: str, allowed: Iterable[str], what: str, args: Iterable[str] = ()
) -> ast.Expression:
    """Return the parsed expression or raise ExprProblem naming the first problem.

    `args`: the names in `allowed` that are the op's arguments; the others among
    `torch`, `F` and `math` are those modules, whose attributes are looked up
    (Note [Torch names in expressions] in torch_names.py).
    """
    tree = parse_expression(text, what)
    allowed = set(allowed)
    modules = {"torch", "F", "math"} & allowed - set(args)
    try:
        nodes = list(ast.walk(tree))
    except RecursionError:
        raise ExprProblem(f"{what} is nested too deeply", "simplify the expression") from None
    for node in nodes:
        for kind, label in _FORBIDDEN.items():
            if isinstance(node, kind):
                raise ExprProblem(
                    f"{what} uses {label}", "formulas are plain expressions over the op's inputs"
                )
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ExprProblem(
                f"{what} accesses the private attribute {node.attr!r}",
                "use public tensor methods and torch functions only",
            )
        if isinstance(node, ast.Attribute) and node.attr in _FORBIDDEN_ATTRIBUTES:
            raise ExprProblem(
                f"{what} accesses {node.attr!r}, which reaches outside the op",
                "use tensor methods and torch functions only",
            )
        if isinstance(node, ast.Name) and node.id not in allowed:
            known = ", ".join(sorted(allowed))
            raise ExprProblem(
                f"{what} uses the unknown name {node.id!r}", f"names allowed here: {known}"
            )
    if modules:
        _check_module_names(nodes, modules, what)
    return tree


def _check_module_names(nodes: list[ast.AST], modules: set[str], what: str) -> None:
    """Each `torch.x.y`, `F.x`, `math.x` names what the module has (Note [Torch names in expressions])."""
    for node in nodes:
        chain: list[str] = []
        current = node
        while isinstance(current, ast.Attribute):
            chain.append(current.attr)
            current = current.value
        if not chain or not isinstance(current, ast.Name) or current.id not in modules:
            continue
        from .torch_names import unknown_attribute

        problem = unknown_attribute([current.id, *reversed(chain)], current.id)
        if problem is not None:
            raise ExprProblem(f"{what} {problem[0]}", problem[1])


def names_used(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
