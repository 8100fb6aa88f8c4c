"""The first-run path a new user takes: `opgen new`, `opgen test`, `opgen generate --check`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import opgen

from _support import run_cli


def _pytest(project: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "opgen", "test"], cwd=project, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow  # runs the generated tests (torch.compile)
def test_new_op_works_and_its_tests_pass(tmp_path):
    result = run_cli("new", "mylib::foo", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "opgen.toml").is_file()
    assert (tmp_path / "ops" / "foo.toml").is_file()
    kernel = (tmp_path / "mylib" / "kernels" / "foo.py").read_text()
    assert "return torch.sin(x)" in kernel
    run = _pytest(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " passed" in run.stdout and "failed" not in run.stdout
    assert "warning" not in run.stdout, run.stdout  # torch's own deprecation warnings are filtered
    check = run_cli("generate", "--check", cwd=tmp_path)
    assert check.exit_code == 0, check.output
    assert "0 created, 0 updated, 0 merged" in check.output


@pytest.mark.slow  # runs the generated tests (torch.compile)
def test_custom_schema_starts_with_a_working_copy(tmp_path):
    """Note [Starter bodies]: `opgen new --schema` writes a copy-through kernel and a matching placeholder reference."""
    result = run_cli("new", "mylib::scale", "--schema", "(Tensor x, float alpha=1.0) -> Tensor", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    spec = (tmp_path / "ops" / "scale.toml").read_text()
    assert 'schema = "(Tensor x, float alpha=1.0) -> Tensor"' in spec
    assert 'reference = "x.clone()"  # placeholder' in spec
    assert "    return x.clone()\n" in (tmp_path / "mylib" / "kernels" / "scale.py").read_text()
    assert "next: `opgen test`" in result.output and "fill in" not in result.output
    run = _pytest(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " passed" in run.stdout and "failed" not in run.stdout


@pytest.mark.slow  # runs the generated tests (torch.compile)
def test_schema_without_a_starter_says_what_to_edit(tmp_path):
    """Only an optional tensor to read: no copy-through, so the stub says what to write."""
    result = run_cli("new", "mylib::scale", "--schema", "(Tensor? x, float alpha=1.0) -> Tensor", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "next: fill in mylib/kernels/scale.py, then `opgen test`" in result.output
    run = _pytest(tmp_path)
    assert run.returncode != 0
    assert "not implemented: edit" in run.stdout and "kernels/scale.py" in run.stdout
    assert "has no [test] reference" in run.stdout


def test_second_op_joins_the_project(tmp_path):
    assert run_cli("new", "mylib::foo", cwd=tmp_path).exit_code == 0
    result = run_cli("new", "mylib::bar", "--schema", "(Tensor a, Tensor b) -> Tensor", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    init = (tmp_path / "mylib" / "__init__.py").read_text()
    assert "from ._generated.bar import bar" in init and "from ._generated.foo import foo" in init
    other = run_cli("new", "otherlib::baz", cwd=tmp_path)
    assert other.exit_code == 1
    assert "namespace 'otherlib' is not this project's namespace 'mylib'" in other.output


def test_invalid_schema_writes_nothing(tmp_path):
    result = run_cli("new", "mylib::foo", "--schema", "(Tensor x -> Tensor", cwd=tmp_path)
    assert result.exit_code == 1
    assert "--schema is not a valid schema" in result.output
    assert list(tmp_path.iterdir()) == []


def test_bad_op_name_writes_nothing(tmp_path):
    for name in ("mylib::class", "../x::foo", "mylib::foo::bar", "aten::foo"):
        result = run_cli("new", name, cwd=tmp_path)
        assert result.exit_code == 1, name
    assert list(tmp_path.iterdir()) == []


def test_generate_outside_a_project_fails_clearly(tmp_path):
    result = run_cli("generate", cwd=tmp_path)
    assert result.exit_code == 1
    assert "no opgen.toml" in result.output


def test_version_and_help_without_type_placeholders():
    version = subprocess.run([sys.executable, "-m", "opgen", "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout == f"opgen {opgen.__version__}\n"
    for command in ([], ["new"], ["import"], ["generate"], ["build"], ["test"], ["bench"], ["templates"], ["templates", "eject"]):
        help_text = run_cli(*command, "--help", cwd=Path.cwd()).output
        assert "Usage:" in help_text, command
        assert not re.search(r"<(bool|str|int|float|path|list)", help_text, re.I), (command, help_text)


def test_python_m_opgen_runs():
    out = subprocess.run([sys.executable, "-m", "opgen", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "generate" in out.stdout


@pytest.mark.parametrize("flags", [[], ["--check"], ["--dry-run"], ["--force", "--check"], ["--timings"]])
def test_generate_without_typer_matches_typer(tmp_path, flags):
    """`opgen generate` with on/off flags skips typer's parsing (Note [Direct generate] in cli.py): same output, same exit code."""
    import re

    for way in ("typer", "direct"):
        root = tmp_path / way
        root.mkdir()
        assert run_cli("new", "mylib::foo", cwd=root).exit_code == 0
        spec = root / "ops/foo.toml"
        spec.write_text(spec.read_text().replace("torch.sin(x)", "torch.sin(x) * 1"))
    typer_run = run_cli("generate", *flags, cwd=tmp_path / "typer")
    direct = subprocess.run([sys.executable, "-X", "importtime", "-m", "opgen", "generate", *flags], cwd=tmp_path / "direct", capture_output=True, text=True, timeout=120)
    assert direct.returncode == typer_run.exit_code
    seconds = re.compile(r"\d+\.\d+ s")
    errors = "".join(line + "\n" for line in direct.stderr.splitlines() if not line.startswith("import time:"))
    lines = lambda text: sorted(seconds.sub("", text).splitlines())  # noqa: E731 (stdout and stderr interleave)
    assert lines(direct.stdout + errors) == lines(typer_run.output)
    assert "pydantic" not in direct.stderr  # typer's option parsing imports it


def test_every_option_names_itself() -> None:
    """Each `typer.Option` spells its flag: some typer releases (0.27) otherwise derive the
    flag from the metavar, so `--devices DEVICES` became `--DEVICES` and `--devices` failed."""
    import ast

    commands = Path(opgen.__file__).parent
    unnamed = []
    for module in sorted([*commands.glob("commands/*.py"), commands / "app.py"]):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "Option"
            ):
                first = node.args[0] if node.args else None
                if not (isinstance(first, ast.Constant) and str(first.value).startswith("--")):
                    unnamed.append(f"{module.name}:{node.lineno}")
    assert not unnamed, f"typer.Option without its --flag: {unnamed}"


def test_new_help_shows_examples():
    help_text = run_cli("new", "--help", cwd=Path.cwd()).output
    assert "Examples:" in help_text
    assert "opgen new mylib::foo " in help_text
    assert 'opgen new mylib::swiglu --backend cpp --devices cpu,cuda \\\n        --schema "(Tensor x, Tensor gate) -> Tensor"' in help_text


@pytest.mark.slow  # runs one generated test in a fresh interpreter (torch import)
def test_quiet_opgen_test_keeps_pytest_summary_line(tmp_path):
    assert run_cli("new", "mylib::foo", cwd=tmp_path).exit_code == 0
    command = [sys.executable, "-m", "opgen", "test", "-q", "-k", "samples_cover_dtypes"]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^1 passed, \d+ deselected in ", run.stdout, re.M), run.stdout
