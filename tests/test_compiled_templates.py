"""Templates compiled by one run are reused by the next (Note [Compiled templates] in opgen/incremental/template_bytecode.py).

Counts, not times: how many templates a run compiles. And what reuse must
never cost: a changed template or override renders its new text, and a
compiled-templates file the project came with (or any file but the one this
opgen wrote) is never run.
"""

from __future__ import annotations

import hashlib
import io
import json
import marshal
import pickle
import shutil
import time
from pathlib import Path

import jinja2
import pytest
from jinja2.bccache import bc_magic

import opgen.render.environment
from opgen.errors import OpgenError
from opgen.generate import generate
from opgen.incremental.generate_cache import CACHE_FILE
from opgen.incremental.inputs import folder_identity
from opgen.incremental.template_bytecode import TEMPLATES_FILE

from _support import REPO

PROJECT = '[project]\nnamespace = "mylib"\npackage = "mylib"\n'


def _spec(name: str, reference: str = "torch.sin(x)") -> str:
    return f"""name = "mylib::{name}"
schema = "(Tensor x) -> Tensor"
[grad]
x = "grad * x.cos()"
[fake]
like = "x"
[test]
reference = "{reference}"
[[test.samples]]
x = {{shape = [3]}}
"""


def _project(root: Path) -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(PROJECT)
    for name in ("a", "b"):
        (root / f"ops/{name}.toml").write_text(_spec(name))
    return root


def _edit(root: Path, n: int) -> None:
    (root / "ops/b.toml").write_text(_spec("b", reference=f"torch.sin(x) + {n}"))


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the templates jinja compiles from source, in order."""
    names: list[str] = []
    real = jinja2.Environment.compile

    def compile_(self, source, name=None, filename=None, raw=False, defer_init=False):  # type: ignore[no-untyped-def]
        names.append(str(name))
        return real(self, source, name, filename, raw, defer_init)

    monkeypatch.setattr(jinja2.Environment, "compile", compile_)
    return names


def test_the_next_run_compiles_nothing(tmp_path: Path, compiles: list[str]) -> None:
    root = _project(tmp_path / "proj")
    generate(root)
    assert "python/op.py.j2" in compiles and (root / TEMPLATES_FILE).is_file()
    compiles.clear()
    _edit(root, 1)
    result = generate(root)
    assert [c.path for c in result.changes if c.action.writes] == ["tests/test_b.py"]
    assert compiles == []
    fresh = tmp_path / "fresh"  # the same project, never generated: what every file must hold
    _project(fresh)
    _edit(fresh, 1)
    generate(fresh)
    for path in ("tests/test_b.py", "mylib/_generated/b.py", "mylib/__init__.py"):
        assert (root / path).read_text() == (fresh / path).read_text(), path


def test_a_changed_override_or_builtin_template_is_compiled_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiles: list[str]
) -> None:
    root = _project(tmp_path / "proj")
    builtins = tmp_path / "builtins"  # opgen's own templates, as a copy this test may change
    shutil.copytree(REPO / "templates", builtins)
    monkeypatch.setattr(opgen.render.environment, "builtin_templates_dir", lambda: builtins)
    monkeypatch.setattr("opgen.generate.templates_digest", lambda builtin, override: "fixed")
    overrides = root / "templates"
    conftest = overrides / "tests/conftest.py.j2"
    conftest.parent.mkdir(parents=True)
    conftest.write_text((builtins / "tests/conftest.py.j2").read_text() + "# first note\n")
    generate(root, templates=overrides)
    # the template digest is pinned above, so only the checksums of the compiled entries can tell
    # that a template changed: every output below renders again because a spec changed
    conftest.write_text((builtins / "tests/conftest.py.j2").read_text() + "# second note\n")
    test_op = builtins / "tests/test_op.py.j2"
    test_op.write_text(test_op.read_text() + "# a new line of opgen's own\n")
    compiles.clear()
    _edit(root, 1)
    (root / "ops/a.toml").write_text(_spec("a", reference="torch.sin(x) + 2"))
    generate(root, templates=overrides)
    assert sorted(set(compiles)) == ["tests/conftest.py.j2", "tests/test_op.py.j2"]
    assert (root / "tests/conftest.py").read_text().endswith("# second note\n")
    assert (root / "tests/test_b.py").read_text().endswith("# a new line of opgen's own\n")
    conftest.unlink()  # back to the built-in template: its own entry, still valid
    compiles.clear()
    _edit(root, 2)
    generate(root, templates=overrides)
    assert compiles == ["tests/conftest.py.j2"]  # the built-in, never needed before
    assert "note" not in (root / "tests/conftest.py").read_text()


def _planted(root: Path, marker: Path) -> bytes:
    """A compiled-templates file whose every entry, if run, writes `marker` (as a checkout could ship)."""
    real = marshal.loads((root / TEMPLATES_FILE).read_bytes().split(b"\n", 1)[1])
    code = compile(f"open({str(marker)!r}, 'w').write('ran')", "<planted>", "exec")
    forged = {}
    for key, blob in real.items():
        # keep jinja's header and the source checksum, so that only opgen's own check can refuse it
        stream = io.BytesIO(blob)
        assert stream.read(len(bc_magic)) == bc_magic
        pickle.load(stream)  # the checksum (this test's own file, just written by opgen)
        forged[key] = blob[: stream.tell()] + marshal.dumps(code)
    return b"opgen compiled templates 1\n" + marshal.dumps(forged)


def _write_in_place(path: Path, data: bytes, not_ctime: int) -> None:
    """Overwrite `path` (same inode), at a ctime other than `not_ctime`: the clock behind
    ctime ticks in milliseconds, so a write right after opgen's may share its ctime."""
    for _ in range(200):
        path.write_bytes(data)
        if path.stat().st_ctime_ns != not_ctime:
            return
        time.sleep(0.005)
    raise AssertionError("the ctime did not move")


def test_a_compiled_templates_file_that_came_with_the_checkout_never_runs(
    tmp_path: Path, compiles: list[str]
) -> None:
    root = _project(tmp_path / "proj")
    generate(root)
    marker = tmp_path / "ran"
    planted = _planted(root, marker)
    recorded = json.loads((root / CACHE_FILE).read_text())["templates"]
    _write_in_place(root / TEMPLATES_FILE, planted, recorded[2])
    # the cache records the planted file's size, mtime, inode and digest: only its ctime differs
    # from the file opgen wrote (no checkout, archive or user can choose it)
    info = (root / TEMPLATES_FILE).stat()
    cache = json.loads((root / CACHE_FILE).read_text())
    assert cache["folder"] == folder_identity(root)
    ctime = cache["templates"][2]
    stamp = [info.st_size, info.st_mtime_ns, ctime, info.st_ino]
    cache["templates"] = [*stamp, hashlib.sha256(planted).hexdigest()]
    (root / CACHE_FILE).write_text(json.dumps(cache))
    compiles.clear()
    _edit(root, 1)
    generate(root)
    assert not marker.exists() and "python/op.py.j2" in compiles
    assert (root / TEMPLATES_FILE).read_bytes() != planted  # replaced by what this run compiled

    # the control: with a record of exactly that file, the same bytes would run
    (root / TEMPLATES_FILE).write_bytes(planted)
    info = (root / TEMPLATES_FILE).stat()
    cache = json.loads((root / CACHE_FILE).read_text())
    stamp = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]
    cache["templates"] = [*stamp, hashlib.sha256(planted).hexdigest()]
    (root / CACHE_FILE).write_text(json.dumps(cache))
    _edit(root, 2)
    with pytest.raises(OpgenError):
        generate(root)  # the planted code ran (and defined no template)
    assert marker.read_text() == "ran"


def test_check_and_dry_run_write_no_compiled_templates(tmp_path: Path) -> None:
    root = _project(tmp_path / "proj")
    generate(root)
    (root / TEMPLATES_FILE).unlink()
    _edit(root, 1)
    assert generate(root, check=True).stale
    generate(root, dry_run=True)
    assert not (root / TEMPLATES_FILE).exists()
    generate(root)
    assert (root / TEMPLATES_FILE).exists()


def test_a_file_whose_digest_is_not_the_recorded_one_is_compiled_again(
    tmp_path: Path, compiles: list[str]
) -> None:
    """The stat alone never vouches for the bytes: a file damaged in place (here, the record
    altered instead, since no test can restore a ctime) is not loaded."""
    root = _project(tmp_path / "proj")
    generate(root)
    cache = json.loads((root / CACHE_FILE).read_text())
    cache["templates"][-1] = hashlib.sha256(b"other bytes").hexdigest()
    (root / CACHE_FILE).write_text(json.dumps(cache))
    compiles.clear()
    _edit(root, 1)
    generate(root)
    assert "python/op.py.j2" in compiles
    fresh = _project(tmp_path / "fresh")
    _edit(fresh, 1)
    generate(fresh)
    assert (root / "tests/test_b.py").read_text() == (fresh / "tests/test_b.py").read_text()
