"""Unit tables for names, expressions and defaults (the pieces behind the corpus messages)."""

from __future__ import annotations

import pytest

from opgen.spec.dialect.parser import SchemaError, parse
from opgen.spec.dialect.rules import schema_problems
from opgen.spec.expr import ExprProblem, check_expression
from opgen.spec.names import identifier_problem, package_problem


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
    try:
        problems = schema_problems(parse(f"({type_text} a={default}) -> ()"))
    except SchemaError:
        problems = ["refused while parsing"]
    assert (not problems) == ok
