"""No field of a spec can put code into generated Python or C++.

Every free-text field carries a payload that would define a symbol named
`opgen_injected...` (or create a marker file) if it ever escaped its string,
docstring or comment. The generated files must compile, must contain the
marker only inside strings and comments, and the docstring and defaults must
read back exactly as written in the spec.
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from tests._support import run_cli

MARK = "opgen_injected"
DOC = (
    f'Adds one. """ ; {MARK}_doc = 1 ; """\n'
    f"second line */ {MARK}_doc2(); /* with \\ backslash \\\\ and ''' quotes\n"
    f"{{{{ 7 * 7 }}}} {{% raw %}} // {MARK}_doc3\n"
    "\\n literal backslash-n and a trailing quote\""
)
STR_DEFAULT = f'"""; {MARK}_default(); */ // \\\\ {MARK}'
SAMPLE = f"''' \"\"\" {MARK}_sample */ \\ \n {MARK}_sample2 = 1"
TEXT_IN_EXPR = f'""" {MARK}_expr */ // \\\\'
MARKER_CALL = "__import__('pathlib').Path('MARKER').touch()"


def _toml(text: str) -> str:
    return json.dumps(text)


def _spec(name: str, backend: str) -> str:
    schema = f"(Tensor x, str mode={STR_DEFAULT!r}) -> Tensor"
    return "\n".join(
        [
            f'name = "mylib::{name}"',
            f"schema = {_toml(schema)}",
            f"doc = {_toml(DOC)}",
            f'backend = "{backend}"',
            "[grad]",
            f"x = {_toml(f'grad * len({TEXT_IN_EXPR!r})')}",
            "[fake]",
            'like = "x"',
            f"checks = [{_toml(f'x.dim() >= len({TEXT_IN_EXPR!r}) - 100')}]",
            "[test]",
            f"reference = {_toml(f'x + len({TEXT_IN_EXPR!r})')}",
            "[[test.samples]]",
            "x = {shape = [3]}",
            f"mode = {_toml(SAMPLE)}",
            "",
        ]
    )


def _project(tmp_path: Path, backends: list[str]) -> Path:
    root = tmp_path / "project"
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text('[project]\nnamespace = "mylib"\npackage = "mylib"\n', encoding="utf-8")
    for backend in backends:
        (root / "ops" / f"{backend}_op.toml").write_text(_spec(f"{backend}_op", backend), encoding="utf-8")
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 0, result.output
    return root


def _python_code_names(text: str) -> set[str]:
    return {t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.NAME}


_CPP_TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def _cpp_code(text: str) -> str:
    """C/C++ source without comments and string or char literals."""
    assert "??/" not in text, "trigraph in generated C++"
    return _CPP_TOKENS.sub(" ", text)


def _check_tree(root: Path) -> list[Path]:
    checked = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or ".opgen" in path.parts or path.parent.name == "ops" or path.name == "opgen.toml":
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py":
            compile(text, str(path), "exec")
            leaked = {n for n in _python_code_names(text) if n.startswith(MARK)}
            assert not leaked, f"{path}: {leaked} became code"
            assert MARKER_CALL not in text
        elif path.suffix in (".h", ".cpp", ".cu", ".cuh"):
            assert MARK not in _cpp_code(text), f"{path}: the marker is outside every comment and string"
            assert "\r" not in text
        else:
            assert MARK not in text, f"{path}: marker in an unexpected file"
        checked.append(path)
    return checked


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _clean(text: str) -> str:
    return inspect.cleandoc("\n".join(line.rstrip() for line in text.splitlines()))


def test_python_fields_stay_data(tmp_path: Path) -> None:
    root = _project(tmp_path, ["python"])
    files = _check_tree(root)
    assert any(p.name == "python_op.py" and p.parent.name == "_generated" for p in files)
    tree = ast.parse((root / "mylib/_generated/python_op.py").read_text(encoding="utf-8"))
    wrapper = _function(tree, "python_op")
    assert _clean(ast.get_docstring(wrapper, clean=False)) == _clean(DOC)
    mode_default = wrapper.args.defaults[-1] if wrapper.args.defaults else wrapper.args.kw_defaults[-1]
    assert ast.literal_eval(mode_default) == STR_DEFAULT
    test_text = (root / "tests/test_python_op.py").read_text(encoding="utf-8")
    samples = next(n for n in ast.parse(test_text).body if isinstance(n, ast.Assign) and n.targets[0].id == "SAMPLES")
    assert ast.literal_eval(samples.value.elts[0].values[1]) == SAMPLE


def test_python_module_runs_without_effects(tmp_path: Path) -> None:
    """Import the generated package: the docstring reads back and no payload runs."""
    root = _project(tmp_path, ["python"])
    code = (
        "import mylib, inspect, json, sys\n"
        "print(json.dumps([inspect.getdoc(mylib.python_op), inspect.signature(mylib.python_op).parameters['mode'].default,"
        f" any(n.startswith({MARK!r}) for n in vars(sys.modules['mylib._generated.python_op']))]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc, default, leaked = json.loads(out.stdout.strip().splitlines()[-1])
    assert _clean(doc) == _clean(DOC)
    assert default == STR_DEFAULT
    assert not leaked
    assert not list(root.rglob("MARKER"))


def test_cpp_fields_stay_data(tmp_path: Path) -> None:
    root = _project(tmp_path, ["cpp", "python"])
    files = _check_tree(root)
    assert any(p.suffix in (".h", ".cpp") for p in files), "the C++ backend generated no C++"


@pytest.mark.parametrize(
    "field, value",
    [
        ("doc", "a\rb"),
        ("doc", "a\x00b"),
        ("doc", "a\x1bb"),
    ],
)
def test_control_characters_are_refused(tmp_path: Path, field: str, value: str) -> None:
    root = tmp_path / "project"
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text('[project]\nnamespace = "mylib"\npackage = "mylib"\n', encoding="utf-8")
    text = _spec("foo", "python").replace(f"doc = {_toml(DOC)}", f"{field} = {_toml(value)}")
    (root / "ops" / "foo.toml").write_text(text, encoding="utf-8")
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1
    assert "control character" in result.stderr


@pytest.mark.parametrize(
    "expression",
    [
        MARKER_CALL,
        "torch.os.system('touch MARKER')",
        "x # comment",
        "x) ; import os ; (x",
        "x\n import os",
        "[f for f in ()]",
        "(lambda: 1)()",
        "x.__class__",
        "globals()",
        "torch.ops.load_library('/tmp/x.so')",
    ],
)
@pytest.mark.parametrize("field", ["grad", "reference", "check", "expr"])
def test_formulas_cannot_escape(tmp_path: Path, field: str, expression: str) -> None:
    root = tmp_path / "project"
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text('[project]\nnamespace = "mylib"\npackage = "mylib"\n', encoding="utf-8")
    lines = ['name = "mylib::foo"', 'schema = "(Tensor x) -> Tensor"']
    lines += ["[grad]", f"x = {_toml(expression)}"] if field == "grad" else []
    lines += ["[fake]", f"expr = {_toml(expression)}" if field == "expr" else 'like = "x"']
    lines += [f"checks = [{_toml(expression)}]"] if field == "check" else []
    lines += ["[test]", f"reference = {_toml(expression if field == 'reference' else 'x')}", "[[test.samples]]", "x = {shape = [3]}"]
    (root / "ops" / "foo.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1, result.output
    assert "ops/foo.toml:" in result.stderr
    assert not (root / "mylib").exists()
