"""One writer: `opgen new` hands its spec to generate's writer, the starter body is template
context, and every other write (template overrides, build.ninja) goes through the same
confined path (Note [Confined writes] in opgen/write/project_files.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opgen.build.ninja import BuildPlan, write_ninja
from opgen.errors import OpgenError
from opgen.generate import generate
from opgen.render.overrides import eject
from opgen.scaffold.new_op import new_op


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(root.rglob("*"))}


def test_new_in_a_project_it_cannot_join_writes_nothing(tmp_path: Path) -> None:
    new_op(tmp_path, "mylib::foo")
    (tmp_path / ".opgen" / "lock").unlink()
    before = _tree(tmp_path)
    with pytest.raises(OpgenError, match="namespace 'otherlib' is not this project's namespace 'mylib'"):
        new_op(tmp_path, "otherlib::bar")
    assert _tree(tmp_path) == before


def test_new_reports_a_broken_spec_of_the_project_and_writes_nothing(tmp_path: Path) -> None:
    new_op(tmp_path, "mylib::foo")
    (tmp_path / ".opgen" / "lock").unlink()
    spec = tmp_path / "ops" / "foo.toml"
    spec.write_text(spec.read_text().replace("(Tensor x)", "(Tensor x, qux y)"))
    before = _tree(tmp_path)
    with pytest.raises(OpgenError, match="ops/foo.toml:2: error: invalid schema") as info:
        new_op(tmp_path, "mylib::bar")
    assert [d.path.name for d in info.value.diagnostics] == ["foo.toml"]
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("backend, kernel, body", [("python", "mylib/kernels/foo.py", "return torch.sin(x)"), ("cpp", "csrc/cpu/foo.cpp", "torch::stable::parallel_for")])
def test_starter_body_is_the_users_first_edit_and_survives_a_schema_change(tmp_path: Path, backend: str, kernel: str, body: str) -> None:
    made = new_op(tmp_path, "mylib::foo", backend=backend)
    assert {"opgen.toml", "ops/foo.toml", kernel} <= {c.path for c in made.generated.changes if c.action == "create"}
    text = (tmp_path / kernel).read_text()
    assert body in text and "opgen: placeholder" not in text
    base = json.loads((tmp_path / ".opgen" / "manifest.json").read_text())["files"][kernel]["base"]
    assert "opgen: placeholder" in base, "the merge base is the stub, so the starter counts as the user's edit"
    spec = tmp_path / "ops" / "foo.toml"
    spec.write_text(spec.read_text().replace("(Tensor x) -> Tensor", "(Tensor x, float alpha=1.0) -> Tensor"))
    result = generate(tmp_path)
    actions = {c.path: c.action for c in result.changes}
    assert actions[kernel] == "merge" and not result.failed, actions
    text = (tmp_path / kernel).read_text()
    assert body in text and "alpha" in text and "<<<<<<<" not in text


def test_starter_body_is_template_context_an_override_can_lay_out(tmp_path: Path) -> None:
    """No string patching: the starter reaches the kernel through the template, overrides included."""
    (tmp_path / "opgen.toml").write_text('[project]\nnamespace = "mylib"\npackage = "mylib"\n\n[options]\ntemplates = "tpl"\n')
    override = tmp_path / "tpl" / "python" / "kernel.py.j2"
    override.parent.mkdir(parents=True)
    override.write_text(
        "import torch\n{% for kernel in op.kernels %}\n\n\ndef {{ kernel.function }}({{ op.plain_signature }}):\n"
        "{% if starter %}\n    # starter from the template context\n{% for line in starter %}\n    {{ line }}\n{% endfor %}\n"
        "{% else %}\n    raise NotImplementedError  # opgen: placeholder\n{% endif %}\n{% endfor %}\n"
    )
    new_op(tmp_path, "mylib::foo")
    assert "    # starter from the template context\n    return torch.sin(x)\n" in (tmp_path / "mylib/kernels/foo.py").read_text()


def test_eject_writes_only_inside_the_project(tmp_path: Path) -> None:
    root = tmp_path / "p"
    new_op(root, "mylib::foo")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "templates").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OpgenError, match="outside the project"):
        eject(root, None, "python/kernel.py.j2")
    assert list(outside.iterdir()) == []


def test_build_ninja_is_written_only_inside_the_project(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "build.ninja").write_text("theirs\n")
    (root / "build").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OpgenError, match="outside the project"):
        write_ninja(root, BuildPlan("rule x\n", "mylib/_C.so"))
    assert (outside / "build.ninja").read_text() == "theirs\n"
    (root / "build").unlink()
    path = write_ninja(root, BuildPlan("rule x\n", "mylib/_C.so"))
    assert path == root.resolve() / "build" / "build.ninja" and path.read_text() == "rule x\n"
