"""Template rendering is bounded under every command that renders (Note [Bounded rendering] in
opgen/render/sandbox.py): `opgen generate` with `--check` or `--dry-run` on a pull request's overrides,
`opgen new`, `opgen import`, `opgen build`; each run compiles the override afresh (nothing compiled
is kept between runs).

Each command runs in a subprocess with a timeout, so a render that is not stopped fails the test
instead of hanging it.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opgen.generate import generate
from opgen.scaffold.new_op import new_op

from _support import REPO, run_cli

PROJECT = '[project]\nnamespace = "mylib"\npackage = "mylib"\n'
IMPORT_FIXTURE = Path(__file__).parent / "data" / "import" / "muladd"


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root`, symlinks not followed (a folder's mtime left out)."""
    tree: dict[str, bytes | str] = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(folder, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                tree[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                tree[rel] = "dir"
            else:
                tree[rel] = path.read_bytes()
    return tree


def _opgen(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120, memory: int = 0
) -> subprocess.CompletedProcess:
    """`opgen ARGS` in a fresh process, killed after `timeout` s (and limited to `memory` bytes)."""

    def limit() -> None:
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "opgen", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit,
    )


_NESTED_LOOPS = (
    "{% for a in range(100000) %}{% for b in range(100000) %}{% for c in range(100000) %}"
    "{% endfor %}{% endfor %}{% endfor %}\n"
)


def _override(root: Path, body: str, template: str = "tests/test_op.py.j2") -> None:
    """An override of `template`: the built-in's text with `body` appended (line numbers kept)."""
    builtin = (REPO / "templates" / template).read_text()
    path = root / "templates" / template
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(builtin + body)
    config = root / "opgen.toml"
    if "templates =" not in config.read_text():
        config.write_text(config.read_text() + '\n[options]\ntemplates = "templates"\n')


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "opgen.toml").write_text(PROJECT)
    new_op(root, "mylib::foo")
    return root


@pytest.mark.parametrize(
    "command", [["generate", "--check"], ["generate", "--dry-run"], ["generate"]]
)
def test_nested_loops_in_an_override_stop_at_the_time_bound(
    tmp_path: Path, command: list[str]
) -> None:
    root = _project(tmp_path)
    _override(root, "")
    generate(root)  # the project before the pull request...
    _override(root, _NESTED_LOOPS)  # ...which changes the override
    line = (REPO / "templates/tests/test_op.py.j2").read_text().count("\n") + 1
    before = _tree(root)
    start = time.monotonic()
    run = _opgen(*command, cwd=root, env={"OPGEN_RENDER_SECONDS": "1"}, timeout=90)
    assert time.monotonic() - start < 60
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith(
        f"templates/tests/test_op.py.j2:{line}: error: rendering this template took more than 1 s"
    ), run.stderr
    assert "hint: a template only lays out the variables it receives" in run.stderr
    assert "OPGEN_RENDER_SECONDS" in run.stderr and "Traceback" not in run.stderr
    assert _tree(root) == before


@pytest.mark.slow
def test_the_default_time_bound_is_ten_seconds(tmp_path: Path) -> None:
    root = _project(tmp_path)
    _override(root, _NESTED_LOOPS)
    start = time.monotonic()
    run = _opgen("generate", "--check", cwd=root, timeout=120)
    took = time.monotonic() - start
    assert run.returncode == 1 and "took more than 10 s" in run.stderr, run.stderr
    assert 10 <= took < 60


def test_a_huge_repeat_is_refused_before_it_is_built(tmp_path: Path) -> None:
    root = _project(tmp_path)
    _override(root, "{{ 'a' * 10000000000 }}\n")
    start = time.monotonic()
    run = _opgen("generate", "--check", cwd=root, memory=2 * 1024**3, timeout=120)
    assert time.monotonic() - start < 60
    assert run.returncode == 1, run.stderr
    assert (
        ": error: repeating a text of 1 character 10000000000 times would build 10000000000 characters, past the 64 MiB"
        in run.stderr
    )
    assert "MemoryError" not in run.stderr and "Traceback" not in run.stderr


def _bar(root: Path) -> None:
    spec = (root / "ops/foo.toml").read_text()
    (root / "ops/bar.toml").write_text(spec.replace("mylib::foo", "mylib::bar"))


@pytest.mark.parametrize("command", ["new", "build", "import"])
def test_every_command_that_renders_is_bounded(tmp_path: Path, command: str) -> None:
    """`opgen new`, `opgen build` (which generates first) and `opgen import` render through the
    same bounded sandbox: the override loops for any op but foo."""
    if command == "import":  # a project the extension's ops fit, holding the override
        root = tmp_path / "project"
        shutil.copytree(IMPORT_FIXTURE, root)
        (root / "opgen.toml").write_text(
            '[project]\nnamespace = "extension_cpp"\npackage = "extension_cpp_ops"\n'
            '[options]\ncpp_target = "classic"\ntemplates = "templates"\n'
        )
        args = ["import", "extension_cpp"]
    else:
        root = _project(tmp_path)
        args = ["new", "mylib::bar"] if command == "new" else ["build", "--cpu-only"]
        if command == "build":
            _bar(root)
    _override(root, "{% if op.name != 'foo' %}" + _NESTED_LOOPS + "{% endif %}")
    run = _opgen(*args, cwd=root, env={"OPGEN_RENDER_SECONDS": "1"}, timeout=90)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "test_op.py.j2:" in run.stderr
    assert "error: rendering this template took more than 1 s" in run.stderr
    assert not (root / "tests/test_bar.py").exists() and not (root / "tests/test_mymul.py").exists()


def test_the_compiled_checks_bound_a_render_without_the_timer(tmp_path: Path) -> None:
    """Off the main thread (or where SIGALRM does not exist) no timer can interrupt a render:
    the checks compiled into the override stop it alone."""
    root = _project(tmp_path)
    _override(root, _NESTED_LOOPS)
    script = (
        "import sys, threading\n"
        "from pathlib import Path\n"
        "from opgen.errors import OpgenError\n"
        "from opgen.generate import generate\n"
        "def run():\n"
        "    try:\n"
        "        generate(Path('.'), check=True)\n"
        "    except OpgenError as exc:\n"
        "        print(exc)\n"
        "thread = threading.Thread(target=run)\n"
        "thread.start()\n"
        "thread.join()\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(REPO), "OPGEN_RENDER_SECONDS": "1"},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert "test_op.py.j2" in run.stdout and "took more than 1 s" in run.stdout, (
        run.stdout + run.stderr
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "OPGEN_RENDER_SECONDS='0' is not a positive number"),
        ("ten", "OPGEN_RENDER_SECONDS='ten' is not a positive number"),
        ("inf", "OPGEN_RENDER_SECONDS='inf' is not a positive number"),
    ],
)
def test_a_bad_bound_in_the_environment_is_a_diagnostic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    root = _project(tmp_path)
    (root / "ops/foo.toml").write_text((root / "ops/foo.toml").read_text() + "\n# changed\n")
    monkeypatch.setenv("OPGEN_RENDER_SECONDS", value)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {message}\n  hint: unset it (the default is 10)")
