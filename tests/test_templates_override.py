"""Template overrides: the golden "only the overridden outputs change", errors, `opgen templates`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opgen.cli import app
from opgen.errors import OpgenError
from opgen.generate import generate
from opgen.render.environment import builtin_templates_dir

_PROJECT = '[project]\nnamespace = "mylib"\npackage = "mylib"\n'
_SPEC = '''name = "mylib::foo"
schema = "(Tensor x, float alpha=1.0) -> Tensor"
doc = "The op."
devices = ["cpu"]
backend = "python"

[grad]
x = "grad * x.cos()"

[fake]
like = "x"

[test]
reference = "torch.sin(x)"

[[test.samples]]
x = {shape = [4]}
'''


def _project(root: Path, options: str = "") -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(_PROJECT + (f"\n[options]\n{options}\n" if options else ""))
    (root / "ops/foo.toml").write_text(_SPEC)
    return root


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file() and ".opgen" not in p.parts and "templates" not in p.parts}


def _override(folder: Path, name: str, text: str) -> None:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def _builtin(name: str) -> str:
    return (builtin_templates_dir() / name).read_text()


@pytest.mark.parametrize(
    "name, outputs",
    [
        ("python/kernel.py.j2", {"mylib/kernels/foo.py"}),
        ("tests/conftest.py.j2", {"tests/conftest.py"}),
        ("tests/test_op.py.j2", {"tests/test_foo.py"}),
        ("package/empty_init.py.j2", {"mylib/_generated/__init__.py", "mylib/kernels/__init__.py"}),
    ],
)
def test_an_override_changes_exactly_its_outputs(tmp_path: Path, name: str, outputs: set[str]) -> None:
    plain = _project(tmp_path / "plain")
    generate(plain)
    custom = _project(tmp_path / "custom", options='templates = "templates"')
    _override(custom / "templates", name, _builtin(name) + "# customized by the project\n")
    result = generate(custom)
    assert result.warnings == []
    before, after = _tree(plain), _tree(custom)
    assert before.keys() == after.keys()
    changed = {path for path in before if path != "opgen.toml" and before[path] != after[path]}
    assert changed == outputs
    assert all(after[path].endswith("# customized by the project\n") for path in outputs)


def test_templates_option_on_the_command_line(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    folder = tmp_path / "elsewhere"
    _override(folder, "tests/conftest.py.j2", "# {{ header }}\n# mine\n")
    generate(root, templates=folder)
    assert (root / "tests/conftest.py").read_text().endswith("# mine\n")


def test_undefined_variable_in_an_override_names_its_file_and_line(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", options='templates = "templates"')
    _override(root / "templates", "tests/conftest.py.j2", "{{ header }}\n\n{{ project.namspace }}\n")
    with pytest.raises(OpgenError) as info:
        generate(root)
    [diagnostic] = info.value.diagnostics
    assert diagnostic.path == root / "templates/tests/conftest.py.j2" and diagnostic.line == 3
    assert "namspace" in diagnostic.message
    assert not (root / "tests/conftest.py").exists()  # nothing written


def test_syntax_error_in_an_override_names_its_file_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path / "p", options='templates = "templates"')
    _override(root / "templates", "python/kernel.py.j2", "a\nb\n{% if %}\n")
    monkeypatch.chdir(root)
    out = CliRunner().invoke(app, ["generate"])
    assert out.exit_code == 1
    assert "templates/python/kernel.py.j2:3: error: template syntax error" in out.output


def test_error_in_an_overridden_macro_file_names_the_macro_file(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", options='templates = "templates"')
    macros = _builtin("python/_macros.j2").replace("{{ op.registered_name }}", "{{ op.registered_nme }}", 1)
    _override(root / "templates", "python/_macros.j2", macros)
    line = 1 + macros[: macros.index("op.registered_nme")].count("\n")
    with pytest.raises(OpgenError) as info:
        generate(root)
    [diagnostic] = info.value.diagnostics
    assert (diagnostic.path, diagnostic.line) == (root / "templates/python/_macros.j2", line)
    assert "python/op.py.j2" in diagnostic.message  # the chain that led there


def test_invalid_python_from_an_override_names_the_override(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", options='templates = "templates"')
    _override(root / "templates", "tests/conftest.py.j2", "def broken(:\n")
    with pytest.raises(OpgenError) as info:
        generate(root)
    assert str(root / "templates/tests/conftest.py.j2") in info.value.diagnostics[0].message


def _cli(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(root)
    return CliRunner().invoke(app, list(args))


def test_list_eject_diff_ack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path / "p")
    generate(root)
    out = _cli(root, monkeypatch, "templates", "list")
    assert out.exit_code == 0 and "python/kernel.py.j2" in out.output and "overridden" not in out.output

    out = _cli(root, monkeypatch, "templates", "eject", "python/kernel.py.j2")
    assert out.exit_code == 0, out.output
    assert (root / "templates/python/kernel.py.j2").read_text() == _builtin("python/kernel.py.j2")
    assert 'templates = "templates"' in (root / "opgen.toml").read_text()
    assert _PROJECT in (root / "opgen.toml").read_text()  # the rest of the file is untouched
    assert "python/kernel.py.j2" in json.loads((root / ".opgen/ejected.json").read_text())
    listed = _cli(root, monkeypatch, "templates", "list").output
    assert [line.split() for line in listed.splitlines() if line.split()[:1] == ["python/kernel.py.j2"]] == [["python/kernel.py.j2", "overridden"]]

    (root / "templates/python/kernel.py.j2").write_text("# mine\n")
    again = _cli(root, monkeypatch, "templates", "eject", "python/kernel.py.j2")
    assert again.exit_code == 1 and "already overridden" in again.output
    assert (root / "templates/python/kernel.py.j2").read_text() == "# mine\n"

    unknown = _cli(root, monkeypatch, "templates", "eject", "python/kernal.py.j2")
    assert unknown.exit_code == 1 and "did you mean 'python/kernel.py.j2'" in unknown.output

    # the regenerated project still works and the ejected override is not "behind"
    assert generate(root).warnings == []
    assert "unchanged" in _cli(root, monkeypatch, "templates", "diff", "python/kernel.py.j2").output


def test_generate_warns_when_the_builtin_changed_after_eject(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path / "p")
    assert _cli(root, monkeypatch, "templates", "eject", "tests/conftest.py.j2").exit_code == 0
    # pretend the built-in was different when the user ejected it (as after an opgen upgrade)
    records = json.loads((root / ".opgen/ejected.json").read_text())
    records["tests/conftest.py.j2"]["sha256"] = "0" * 64
    (root / ".opgen/ejected.json").write_text(json.dumps(records))
    (root / ".opgen/ejected/tests/conftest.py.j2").write_text("old built-in\n")

    out = _cli(root, monkeypatch, "generate")
    assert out.exit_code == 0
    assert "warning: templates/tests/conftest.py.j2 overrides a built-in template that changed" in out.output
    listed = _cli(root, monkeypatch, "templates", "list").output
    assert "changed since eject" in listed
    diff = _cli(root, monkeypatch, "templates", "diff", "tests/conftest.py.j2").output
    assert "-old built-in" in diff and "+{{ header }}" in diff

    assert _cli(root, monkeypatch, "templates", "ack", "tests/conftest.py.j2").exit_code == 0
    assert "warning" not in _cli(root, monkeypatch, "generate").output


def test_override_with_no_builtin_name_is_reported(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", options='templates = "templates"')
    _override(root / "templates", "python/kernel.j2", "typo\n")
    _override(root / "templates", "python/_helpers.j2", "{% macro x() %}{% endmacro %}\n")
    warnings = generate(root).warnings
    assert len(warnings) == 1 and "templates/python/kernel.j2 does not replace any built-in" in warnings[0]
