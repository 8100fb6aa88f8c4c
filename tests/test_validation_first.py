"""Everything that can fail runs before the first write: a failing run leaves the project untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from opgen.errors import OpgenError
from opgen.generate import generate

_PROJECT = '[project]\nnamespace = "mylib"\npackage = "mylib"\n'
_SPEC = """name = "mylib::{name}"
schema = "(Tensor x) -> Tensor"
backend = "{backend}"
[fake]
like = "x"
[test]
reference = "torch.sin(x)"
[[test.samples]]
x = {{shape = [3]}}
"""


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(root.rglob("*"))}


def _project(root: Path, options: str = "", **specs: str) -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(_PROJECT + options)
    for name, backend in specs.items():
        (root / "ops" / f"{name}.toml").write_text(_SPEC.format(name=name, backend=backend))
    return root


def test_cross_spec_and_spec_problems_are_reported_together_before_any_write(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", "\n[options]\ncpp_target = \"classic\"\n", foo="python", bar="cpp")
    (root / "ops" / "bar.toml").write_text(_SPEC.format(name="bar", backend="cpp").replace("[fake]", 'cpp_target = "stable"\n[fake]'))
    (root / "ops" / "foo.toml").write_text(_SPEC.format(name="foo", backend="python").replace("Tensor x)", "Tensor x, qux y)"))
    before = _tree(root)
    with pytest.raises(OpgenError) as info:
        generate(root)
    messages = [d.format(root) for d in info.value.diagnostics]
    assert len(messages) == 2, messages
    assert messages[0].startswith("ops/bar.toml:4: error: cpp_target 'stable' differs from the project's 'classic'"), messages
    assert messages[1].startswith("ops/foo.toml:2: error: invalid schema"), messages
    assert _tree(root) == before


def test_a_template_error_creates_nothing_not_even_the_state_folder(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", '\n[options]\ntemplates = "tpl"\n', foo="python")
    (root / "tpl" / "python").mkdir(parents=True)
    (root / "tpl" / "python" / "op.py.j2").write_text("{{ op.no_such_variable }}\n")
    before = _tree(root)
    with pytest.raises(OpgenError, match="undefined variable"):
        generate(root)
    assert _tree(root) == before
    assert not (root / ".opgen").exists()


def test_a_run_with_nothing_to_change_takes_no_lock_and_writes_nothing(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", foo="python")
    generate(root)
    (root / ".opgen" / "lock").unlink()
    before = _tree(root)
    result = generate(root)
    assert {c.action for c in result.changes} == {"unchanged"}
    assert _tree(root) == before, "a no-op run wrote something"
