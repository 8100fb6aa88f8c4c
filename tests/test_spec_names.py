"""Unit tables for names, expressions and defaults (the pieces behind the corpus messages)."""

from __future__ import annotations

import pytest

from opgen.spec.expr import ExprProblem, check_expression
from opgen.spec.names import identifier_problem, package_problem
from opgen.spec.types import default_problem


@pytest.mark.parametrize(
    "name, words",
    [
        ("foo", None),
        ("foo_bar2", None),
        ("class", "Python keyword"),
        ("match", "Python keyword"),
        ("template", "C++ keyword"),
        ("__init__", "double underscore"),
        ("a b", "not an identifier"),
        ("../x", "not an identifier"),
        ("1x", "not an identifier"),
        ("f\u043eo", "U+043E CYRILLIC SMALL LETTER O"),
        ("a" * 65, "65 characters long"),
        ("", "empty"),
        (3, "must be a string"),
    ],
)
def test_identifier_problem(name, words) -> None:
    problem = identifier_problem(name, "op name")
    assert (problem is None) if words is None else (words in problem)


@pytest.mark.parametrize("name", ["torch", "math", "os", "pytest", "tests", "ops", "typing"])
def test_package_may_not_shadow(name: str) -> None:
    assert "shadow" in package_problem(name)


@pytest.mark.parametrize(
    "text, words",
    [
        ("grad * x.cos()", None),
        ("'#' + x", None),
        ("x # c", "comment"),
        ("torch.os.system('x')", "reaches outside"),
        ("x.__class__", "private attribute"),
        ("import os", "statement"),
        ("(", "not valid Python"),
        ("x\ny", "several lines"),
        ("a\x00", "control character"),
        ("-" * 3000 + "x", "characters long"),
        ("(" * 150 + "x" + ")" * 150, None),
    ],
)
def test_check_expression(text: str, words) -> None:
    if words is None:
        check_expression(text, {"x", "grad", "torch"}, "f")
        return
    with pytest.raises(ExprProblem) as info:
        check_expression(text, {"x", "grad", "torch", "a", "y"}, "f")
    assert words in info.value.message


@pytest.mark.parametrize(
    "type_text, default, ok",
    [
        ("str", "'mean'", True),
        ("str", '"a\\"b"', True),
        ("str", "'\\u'", False),
        ("str", "mean", False),
        ("int", "1.5", False),
        ("float?", "None", True),
        ("float", "None", False),
        ("int[]", "[0, 1]", True),
        ("bool", "1", False),
    ],
)
def test_default_problem(type_text: str, default: str, ok: bool) -> None:
    assert (default_problem(type_text, default) is None) == ok


def test_module_globals_of_generated_ops_are_reserved_op_names() -> None:
    """An op named like a global of its generated module would replace it: each is reserved."""
    import ast
    from pathlib import Path

    from opgen.spec.names import RESERVED_OP_NAMES

    folder = (
        Path(__file__).resolve().parent.parent / "generated_example" / "example_ops" / "_generated"
    )
    modules = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
    assert modules
    for module in modules:
        found: set[str] = set()
        for node in ast.parse(module.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.Assign):
                found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                found |= {a.asname or a.name for a in node.names}
        # the op's own names: its wrapper, kernels (`_<op>`, `_<op>_<device>`), Function,
        # and the sibling ops its formulas call (`_op_<other>`)
        own = {
            n for n in found if n.startswith(("_op_", f"_{module.stem}")) or n.endswith("Function")
        }
        private = {n for n in found - own if n.startswith("_") and n != "__all__"}
        assert private <= RESERVED_OP_NAMES, f"{module.name}: {sorted(private - RESERVED_OP_NAMES)}"
