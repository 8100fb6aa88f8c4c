"""A run skips the work whose inputs did not change (Note [Generate cache] in opgen/incremental/inputs.py).

Counts, not times: how many outputs a run renders, how often it computes the
project-wide hashes, which modules it imports. And what skipping must never
cost: a generated file edited or deleted by hand is still found, by
`generate` and by `--check`, and every diagnostic of a changed spec appears.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import opgen.api.context as context
import opgen.incremental.inputs as inputs
import opgen.render.output_keys as keys
import opgen.render.outputs as outputs
import opgen.targets.project as project_targets
from opgen.errors import OpgenError
from opgen.generate import generate
from opgen.incremental.generate_cache import CACHE_FILE
from opgen.write.manifest import digest

from _support import REPO

PROJECT = '[project]\nnamespace = "mylib"\npackage = "mylib"\n'


def _spec(name: str, grad: str = "grad * x.cos()", reference: str = "torch.sin(x)") -> str:
    return f"""name = "mylib::{name}"
schema = "(Tensor x) -> Tensor"
[grad]
x = "{grad}"
[fake]
like = "x"
[test]
reference = "{reference}"
[[test.samples]]
x = {{shape = [3]}}
"""


def _project(root: Path, count: int = 0) -> Path:
    """Ops `a` (whose gradient calls `b`), `b` and `c`, plus `count` more."""
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(PROJECT)
    (root / "ops/a.toml").write_text(_spec("a", grad="b(grad) * x.cos()"))
    (root / "ops/b.toml").write_text(_spec("b"))
    (root / "ops/c.toml").write_text(_spec("c"))
    for i in range(count):
        (root / f"ops/op{i}.toml").write_text(_spec(f"op{i}"))
    generate(root)
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return _project(tmp_path / "proj")


class _Counts:
    """Calls of the functions a run should call rarely, and the outputs it renders."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: Counter[str] = Counter()
        self.rendered: list[str] = []
        for module, name in (
            (keys, "project_digest"),
            (project_targets, "package_context"),
            (inputs, "combine"),
        ):
            self._count(monkeypatch, module, name)
        real_render = outputs._Outputs._raw

        def render(self_, artifact):
            self.rendered.append(artifact.path)
            return real_render(self_, artifact)

        monkeypatch.setattr(outputs._Outputs, "_raw", render)

    def _count(self, monkeypatch: pytest.MonkeyPatch, module, name: str) -> None:
        real = getattr(module, name)

        def counted(*args, **kwargs):
            self.calls[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)


def _outputs(root: Path) -> set[str]:
    """Every file opgen generated in the project."""
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    return {f for f in files if not f.startswith((".opgen/", "ops/", "templates/")) and f != "opgen.toml"}


def _outputs_of(root: Path, op: str) -> set[str]:
    return {f"mylib/_generated/{op}.py", f"mylib/kernels/{op}.py", f"tests/test_{op}.py"}


PROJECT_FILES = {"mylib/__init__.py", "mylib/_generated/__init__.py", "mylib/kernels/__init__.py", "mylib/_batching.py", "mylib/_autograd.py", "tests/conftest.py"}


def test_a_no_op_run_renders_nothing_and_hashes_the_project_once(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every spec comes from the cache and every output's key matches: nothing renders, and the
    project-wide digest is computed once, not once per op."""
    counts = _Counts(monkeypatch)
    assert set(generate(project).counts()) == {"unchanged"}
    assert counts.rendered == []
    assert counts.calls["project_digest"] == 1
    assert counts.calls["package_context"] == 0  # no package-wide file was rendered
    counts.calls.clear()
    assert set(generate(project).counts()) == {"unchanged"}
    assert counts.rendered == [] and counts.calls["project_digest"] == 1


def test_a_no_op_run_imports_no_renderer_formatter_or_schema_parser(project: Path) -> None:
    code = "import sys; from pathlib import Path; from opgen.generate import generate; generate(Path(sys.argv[1])); generate(Path(sys.argv[1]), check=True); print(sorted(m for m in sys.modules if m.split('.')[0] in ('jinja2', 'black', 'torchgen', 'torch')))"
    run = subprocess.run([sys.executable, "-c", code, str(project)], capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_editing_one_spec_renders_its_files_its_callers_and_the_package_files(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _Counts(monkeypatch)
    (project / "ops/b.toml").write_text(_spec("b", reference="torch.sin(x) + 0"))
    result = generate(project)
    assert set(counts.rendered) == _outputs_of(project, "b") | _outputs_of(project, "a") | PROJECT_FILES
    assert [c.path for c in result.changes if c.action.writes] == ["tests/test_b.py"]
    counts.rendered.clear()
    (project / "ops/c.toml").write_text(_spec("c", reference="torch.sin(x) + 0"))
    generate(project)
    assert set(counts.rendered) == _outputs_of(project, "c") | PROJECT_FILES


def test_a_second_overload_of_an_op_a_forward_mode_formula_calls_renders_the_caller_again(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A [jvp] formula calls `b` through b's typed wrapper while `b` names one op, and through the
    op packet once it names two: the caller's files depend on every spec named `b`."""
    (project / "ops/d.toml").write_text(_spec("d") + '[jvp]\nresult = "b(x_t) * x.cos()"\n')
    generate(project)
    module = project / "mylib/_generated/d.py"
    assert "return _op_b.b(x_t) * x.cos()" in module.read_text()
    counts = _Counts(monkeypatch)
    overload = _spec("b").replace('"mylib::b"', '"mylib::b.twice"').replace("[grad]", 'registration = "library"\n[grad]', 1)
    (project / "ops/b_twice.toml").write_text(overload)
    result = generate(project)
    assert not result.failed, result.summary()
    assert "mylib/_generated/d.py" in counts.rendered
    assert "return torch.ops.mylib.b(x_t) * x.cos()" in module.read_text()
    shutil.rmtree(project / ".opgen/cache")
    assert {c.action.value for c in generate(project, check=True).changes} == {"unchanged"}


def test_a_spec_that_is_only_touched_renders_nothing(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _Counts(monkeypatch)
    os.utime(project / "ops/b.toml")  # a new mtime, the same text
    assert set(generate(project).counts()) == {"unchanged"}
    assert counts.rendered == []


def test_hand_edits_and_deletions_are_found(project: Path) -> None:
    generated = project / "mylib/_generated/c.py"
    original = generated.read_text()
    generated.write_text(original.replace("__all__", "__all__  "))  # the same size would do too: the inode changes
    assert [c.path for c in generate(project, check=True).stale] == ["mylib/_generated/c.py"]
    result = generate(project)
    assert result.stopped and [c.action.value for c in result.stale] == ["edited"]
    generated.write_text(original)
    assert generate(project, check=True).stale == []
    (project / "tests/test_b.py").unlink()
    assert [(c.path, c.action.value) for c in generate(project, check=True).stale] == [("tests/test_b.py", "create")]
    assert [(c.path, c.action.value) for c in generate(project).stale] == [("tests/test_b.py", "create")]
    assert (project / "tests/test_b.py").is_file()
    assert set(generate(project).counts()) == {"unchanged"}


def test_an_edit_that_keeps_size_and_mtime_is_found_by_its_inode(project: Path) -> None:
    generated = project / "mylib/_generated/c.py"
    text, info = generated.read_text(), generated.stat()
    edited = project / "c.py.new"
    edited.write_text(text.replace("import torch", "import torcH"))
    os.utime(edited, ns=(info.st_atime_ns, info.st_mtime_ns))
    os.replace(edited, generated)  # what an editor's atomic save does
    assert [c.path for c in generate(project, check=True).stale] == ["mylib/_generated/c.py"]


def test_a_user_file_deleted_by_hand_stays_deleted(project: Path) -> None:
    (project / "mylib/kernels/c.py").unlink()
    result = generate(project)
    assert [(c.path, c.action.value) for c in result.changes if c.action.value != "unchanged"] == [("mylib/kernels/c.py", "keep")]
    assert not (project / "mylib/kernels/c.py").exists()
    again = generate(project)  # replayed: the same answer
    assert [(c.path, c.action.value, c.note) for c in again.changes if c.action.value != "unchanged"] == [(c.path, c.action.value, c.note) for c in result.changes if c.action.value != "unchanged"]


def test_every_diagnostic_of_a_changed_spec_appears(project: Path) -> None:
    (project / "ops/c.toml").write_text(_spec("c", grad="grad * y", reference="torch.sin(z)"))
    with pytest.raises(OpgenError) as caught:
        generate(project)
    messages = [d.message for d in caught.value.diagnostics]
    assert any("'y'" in m for m in messages) and any("'z'" in m for m in messages), messages
    (project / "ops/c.toml").write_text(_spec("c"))
    assert set(generate(project).counts()) == {"unchanged"}


def test_cached_specs_still_meet_the_checks_across_specs(project: Path) -> None:
    (project / "ops/d.toml").write_text(_spec("c"))  # a second spec of op c
    with pytest.raises(OpgenError) as caught:
        generate(project)
    assert any("also defined" in d.message for d in caught.value.diagnostics)
    (project / "ops/d.toml").unlink()
    (project / "ops/b.toml").unlink()  # a's formula calls b: a, though unchanged, is invalid now
    with pytest.raises(OpgenError) as caught:
        generate(project)
    assert [d.path.name for d in caught.value.diagnostics] == ["a.toml"]
    assert "'b'" in caught.value.diagnostics[0].message


def test_a_new_opgen_toml_validates_every_spec_again(project: Path) -> None:
    (project / "opgen.toml").write_text(PROJECT.replace('namespace = "mylib"', 'namespace = "other"'))
    with pytest.raises(OpgenError) as caught:
        generate(project)
    assert sorted(d.path.name for d in caught.value.diagnostics) == ["a.toml", "b.toml", "c.toml"]


def test_another_environment_renders_everything(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("opgen.generate.environment_digest", lambda: "a newer opgen")
    counts = _Counts(monkeypatch)
    assert set(generate(project).counts()) == {"unchanged"}
    assert set(counts.rendered) == _outputs(project)


def test_a_changed_template_override_renders_everything(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "templates/tests").mkdir(parents=True)
    shutil.copy(REPO / "templates/tests/conftest.py.j2", project / "templates/tests/conftest.py.j2")
    counts = _Counts(monkeypatch)
    generate(project, templates=project / "templates")
    assert set(counts.rendered) == _outputs(project)
    counts.rendered.clear()
    with (project / "templates/tests/conftest.py.j2").open("a") as handle:
        handle.write("# a project note\n")
    result = generate(project, templates=project / "templates")
    assert [c.path for c in result.changes if c.action.writes] == ["tests/conftest.py"]
    assert set(counts.rendered) == _outputs(project)


def test_a_cache_from_another_folder_or_a_damaged_one_is_not_trusted(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout that carries a crafted cache claiming an edited generated file is what opgen wrote."""
    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    rel = "mylib/_generated/c.py"
    edited = (copy / rel).read_text() + "# edited\n"
    (copy / rel).write_text(edited)
    info = (copy / rel).stat()
    cache = json.loads((copy / CACHE_FILE).read_text())
    cache["files"][rel] = [info.st_size, info.st_mtime_ns, info.st_ino, digest(edited)]
    cache["outputs"][rel]["sha"] = digest(edited)
    (copy / CACHE_FILE).write_text(json.dumps(cache))
    os.utime(copy / CACHE_FILE, ns=(info.st_mtime_ns + 10**9, info.st_mtime_ns + 10**9))
    counts = _Counts(monkeypatch)
    assert [c.path for c in generate(copy, check=True).stale] == [rel]
    assert set(counts.rendered) == _outputs(copy)
    cache["folder"] = inputs.folder_identity(copy)  # the same cache, as if made in this folder, is believed
    (copy / CACHE_FILE).write_text(json.dumps(cache))
    os.utime(copy / CACHE_FILE, ns=(info.st_mtime_ns + 10**9, info.st_mtime_ns + 10**9))
    assert generate(copy, check=True).stale == []
    (project / CACHE_FILE).write_text("{not json")
    assert set(generate(project).counts()) == {"unchanged"}


def test_check_and_dry_run_write_no_cache(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(PROJECT)
    (root / "ops/c.toml").write_text(_spec("c"))
    generate(root, check=True)
    generate(root, dry_run=True)
    assert not (root / ".opgen").exists()


@pytest.mark.parametrize("ops", [10, 40])
def test_the_cost_of_a_no_op_check_grows_linearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ops: int) -> None:
    """The hashes a no-op `--check` computes: a few per op, the project-wide ones once (not once per op)."""
    root = _project(tmp_path / "proj", count=ops)
    generate(root)
    counts = _Counts(monkeypatch)
    assert generate(root, check=True).stale == []
    assert counts.calls["project_digest"] == 1 and counts.calls["package_context"] == 0
    total = ops + 3
    # per op: its validation key, its outputs' keys (3) and its own inputs' digest
    assert counts.calls["combine"] <= 5 * total + 20, counts.calls
    assert counts.rendered == []


def test_a_cached_model_is_the_validated_one() -> None:
    """Every op of the reference set survives the cache's JSON unchanged, line table and path included."""
    from opgen.project.load import load_project
    from opgen.spec.serial import op_from_json, op_to_json

    project = load_project(REPO / "generated_example")
    for op in project.ops:
        back = op_from_json(json.loads(json.dumps(op_to_json(op, project.root))), project.root)
        assert back == op and back.lines == op.lines and back.path == op.path, op.name


# Schemas of PyTorch's whole dialect: alias sets (numbered, bare `!`, views), optional and tuple
# types, spaced and keyword-only defaults, non-tensor, optional and list returns.
DIALECT_SPECS = {
    "mut": '(Tensor(a!) x, Tensor y) -> Tensor(a!)',
    "bang": "(Tensor positions, Tensor! query, Tensor!? key, int head_size, bool is_neox) -> ()",
    "flash": "(Tensor dout, Tensor(a6!)? dq, Tensor(a7!)? dk, float p, SymInt w, Tensor? rng=None) -> Tensor",
    "shapes": "(Tensor x, (int, int)? group_shape=None, float padding_value = 0, *, int[2] pad=[0, 0]) -> Tensor",
    "mixed": "(Tensor x, bool give, ScalarType dtype=float32, str mode='a') -> (Tensor, Tensor?, int, SymInt)",
    "parts": "(Tensor x) -> (Tensor values, Tensor[] parts)",
    "view": "(Tensor(a) x) -> Tensor(a)",
}


def test_a_cached_model_of_every_dialect_schema_is_the_validated_one() -> None:
    """The schema types (alias sets, optional, list and tuple types, defaults) survive the cache's
    JSON as the same objects: their enums as enums, not as the strings they compare equal to."""
    from opgen.spec.dialect.types import SchemaType
    from opgen.spec.serial import op_from_json, op_to_json

    from _specs import CONFIG, op_from_toml

    def kinds(kind: SchemaType) -> list[object]:
        return [type(kind.kind), kind.kind, *(k for item in kind.items for k in kinds(item))]

    for name, schema in DIALECT_SPECS.items():
        op = op_from_toml(f'name = "mylib::{name}"\nschema = "{schema}"\n')
        back = op_from_json(json.loads(json.dumps(op_to_json(op, CONFIG.root))), CONFIG.root)
        assert back == op and back.schema == op.schema, name
        for ours, theirs in zip(back.args + back.returns, op.args + op.returns, strict=True):
            assert kinds(ours.type) == kinds(theirs.type), name
        for ours_arg, arg in zip(back.args, op.args, strict=True):
            value = arg.default.value if arg.default else None
            assert type(ours_arg.default.value if ours_arg.default else None) is type(value), name
        assert context.op_context(back, CONFIG) == context.op_context(op, CONFIG), name


def test_a_run_from_cached_dialect_specs_writes_what_a_fresh_run_writes(tmp_path: Path) -> None:
    """Editing one spec renders the package files (and that op) from the other ops' cached models:
    the files are byte for byte those of a run that validates every spec."""
    cached, fresh = tmp_path / "cached", tmp_path / "fresh"
    for root in (cached, fresh):
        (root / "ops").mkdir(parents=True)
        (root / "opgen.toml").write_text(PROJECT)
        for name, schema in DIALECT_SPECS.items():
            (root / f"ops/{name}.toml").write_text(f'name = "mylib::{name}"\nschema = "{schema}"\n')
    generate(cached)
    for root in (cached, fresh):
        (root / "ops/mut.toml").write_text(
            'name = "mylib::mut"\nschema = "(Tensor(a!) x, Tensor y) -> Tensor(a!)"\ndoc = "Edited."\n'
        )
    generate(cached)
    generate(fresh)
    files = _outputs(fresh)
    assert _outputs(cached) == files and len(files) > 3 * len(DIALECT_SPECS)
    for path in sorted(files):
        assert (cached / path).read_bytes() == (fresh / path).read_bytes(), path


def test_the_cache_folder_holds_data_only(project: Path) -> None:
    """Nothing a run keeps is loaded as code: the cache is one JSON file of digests, stats and
    validated spec models, and a second run with templates to render compiles them again."""
    (project / "ops/b.toml").write_text(_spec("b", grad="grad * x.cos() * 1"))
    assert any(c.action.writes for c in generate(project).changes)
    cache = project / ".opgen/cache"
    assert sorted(p.name for p in cache.iterdir()) == ["generate.json"]
    data = json.loads((cache / "generate.json").read_text())
    assert set(data) == {"version", "folder", "env", "specs", "outputs", "files"}
