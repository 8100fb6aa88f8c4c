"""An untrusted or damaged checkout: opgen never writes, deletes or runs anything it should not.

Each section is one promise of docs/safety.md, "Trust and safety", proven
at run time: symlinks planted at every path a command touches, I/O failures
while writing. (Deletion authority, a lost manifest, sandboxed templates and
bounded input have their own sections below.)
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opgen.generate import generate
from opgen.scaffold.new_op import new_op
from opgen.targets import header
from opgen.write.manifest import digest

from _support import REPO, run_cli

PROJECT = '[project]\nnamespace = "mylib"\npackage = "mylib"\n'
CPP_PROJECT = PROJECT + '\n[options]\nbackend = "cpp"\n'


def spec(name: str = "foo", schema: str = "(Tensor x) -> Tensor", backend: str = "python") -> str:
    return f'''name = "mylib::{name}"
schema = "{schema}"
doc = "The {name} op."
backend = "{backend}"

[grad]
x = "grad * x.cos()"

[fake]
like = "x"

[test]
reference = "torch.sin(x)"

[[test.samples]]
x = {{shape = [4, 3]}}
'''


def make_project(root: Path, config: str = PROJECT, backend: str = "python", name: str = "foo") -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(config)
    (root / "ops" / f"{name}.toml").write_text(spec(name, backend=backend))
    generate(root)
    return root


def snapshot(root: Path, mtimes: bool = True) -> dict[str, tuple[str, bytes, int]]:
    """Every entry under `root` (symlinks not followed): kind, bytes or link target, mtime.

    Without `mtimes`, a folder's mtime is left out: a temporary made and removed
    again inside it changes that, not what the folder holds.
    """
    tree: dict[str, tuple[str, bytes, int]] = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(folder, name)
            info = path.lstat()
            if path.is_symlink():
                entry = ("link", os.readlink(path).encode(), info.st_mtime_ns)
            elif path.is_dir():
                entry = ("dir", b"", info.st_mtime_ns if mtimes else 0)
            else:
                entry = ("file", path.read_bytes(), info.st_mtime_ns)
            tree[path.relative_to(root).as_posix()] = entry
    return tree


def unchanged_project(before: dict, root: Path) -> bool:
    """Whether the project holds what it held (the lock file may have been made)."""
    after = snapshot(root, mtimes=False)
    return {k: v for k, v in after.items() if k != ".opgen/lock"} == {
        k: v for k, v in before.items() if k != ".opgen/lock"
    }


# -- 1. every path each command touches, planted as a symlink leading outside -------------------

# folders among the planted paths that do not exist yet (the others are planted as they are)
_NEW_FOLDERS = {".opgen/backup", ".opgen/backup/mylib", "templates", "templates/python", ".opgen/ejected", "build", "build/obj", ".opgen/cache"}
_NEW_FOLDERS |= {".opgen/cache/inductor-0", "tests/__pycache__", "mylib/__pycache__"}


def _plant(root: Path, rel: str, outside: Path) -> None:
    """Replace `rel` by a symlink to a copy of it outside the project (or to a fresh folder or file there)."""
    path = root / rel
    away = outside / rel.replace("/", "__")
    if path.is_dir():
        shutil.copytree(path, away)
        shutil.rmtree(path)
    elif path.is_file():
        shutil.copy2(path, away)
        path.unlink()
    elif rel in _NEW_FOLDERS:
        away.mkdir()
        (away / "sentinel.txt").write_text("outside\n")
    # else: a dangling link, for a file the command would create
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(away, target_is_directory=rel in _NEW_FOLDERS or away.is_dir())


def _conflicting_change(root: Path) -> None:
    """A schema change that conflicts with an edit of the kernel: the run would write a backup."""
    kernel = root / "mylib/kernels/foo.py"
    kernel.write_text(kernel.read_text().replace("def foo(x: Tensor)", "def foo(x: Tensor, beta: int = 3)"))
    (root / "ops/foo.toml").write_text(spec(schema="(Tensor x, float alpha=1.0) -> Tensor"))


def _eject(root: Path) -> None:
    assert run_cli("templates", "eject", "python/kernel.py.j2", cwd=root).exit_code == 0


# command -> (how the project is prepared, the command line, the paths it touches)
CASES: dict[str, tuple[str, list[str], list[str]]] = {
    "generate": (
        "conflict",
        ["generate"],
        [
            "mylib", "mylib/__init__.py", "mylib/_generated", "mylib/_generated/foo.py",
            "mylib/kernels", "mylib/kernels/foo.py", "tests", "tests/test_foo.py",
            "tests/conftest.py", ".opgen", ".opgen/manifest.json", ".opgen/lock",
            ".opgen/.gitignore", ".opgen/backup", ".opgen/backup/mylib",
            ".opgen/backup/mylib/kernels/foo.py",
        ],
    ),
    "generate --force": (
        "edited",
        ["generate", "--force"],
        ["mylib/_generated/foo.py", ".opgen/backup", ".opgen/backup/mylib/_generated/foo.py"],
    ),
    "new": (
        "python",
        ["new", "mylib::bar"],
        ["ops/bar.toml", "mylib/_generated/bar.py", "mylib/kernels/bar.py", "tests/test_bar.py"],
    ),
    "new project": ("empty", ["new", "mylib::foo"], ["opgen.toml", "ops/foo.toml"]),
    "templates eject": (
        "python",
        ["templates", "eject", "python/kernel.py.j2"],
        [
            "templates", "templates/python", "templates/python/kernel.py.j2", ".opgen/ejected",
            ".opgen/ejected.json", "opgen.toml",
        ],
    ),
    "templates ack": (
        "ejected",
        ["templates", "ack", "python/kernel.py.j2"],
        [".opgen/ejected", ".opgen/ejected/python/kernel.py.j2", ".opgen/ejected.json"],
    ),
    "build": (
        "cpp",
        ["build"],
        [
            "csrc", "csrc/cpu", "csrc/cfoo.h", "build", "build/build.ninja", "build/.ninja_log",
            "build/.ninja_deps", "build/obj", "build/obj/csrc/cpu/cfoo.cpp.o",
            "build/obj/csrc/cpu/cfoo.cpp.o.d", "mylib/_C.abi3.so",
        ],
    ),
    "test": (
        "python",
        ["test"],
        [".opgen/cache", ".opgen/cache/inductor-0", "tests/__pycache__", "mylib/__pycache__"],
    ),
}
_PARAMS = [
    pytest.param(command, path, id=f"{command}:{path}")
    for command, (_, _, paths) in CASES.items()
    for path in paths
]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One project per starting state, generated once and copied by each case."""
    base = tmp_path_factory.mktemp("prepared")
    python = make_project(base / "python")
    states = {"python": python, "empty": base / "empty"}
    states["empty"].mkdir()
    states["conflict"] = base / "conflict"
    shutil.copytree(python, states["conflict"])
    _conflicting_change(states["conflict"])
    states["edited"] = base / "edited"
    shutil.copytree(python, states["edited"])
    edited = states["edited"] / "mylib/_generated/foo.py"
    edited.write_text(edited.read_text() + "# my tweak\n")
    states["ejected"] = base / "ejected"
    shutil.copytree(python, states["ejected"])
    _eject(states["ejected"])
    states["cpp"] = make_project(base / "cpp", CPP_PROJECT, "cpp", "cfoo")
    return states


@pytest.mark.parametrize(("command", "rel"), _PARAMS)
def test_a_symlink_at_any_path_a_command_touches_is_refused(
    prepared: dict[str, Path], tmp_path: Path, command: str, rel: str
) -> None:
    state, argv, _ = CASES[command]
    root = tmp_path / "project"
    shutil.copytree(prepared[state], root, symlinks=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "sentinel.txt").write_text("must not change\n")
    _plant(root, rel, outside)
    before_outside = snapshot(outside)
    before_project = snapshot(root, mtimes=False)
    result = run_cli(*argv, cwd=root)
    assert result.exit_code == 1, result.output
    assert f"{rel}: error: " in result.stderr, result.stderr
    assert "symlink" in result.stderr and "outside the project" in result.stderr
    assert snapshot(outside) == before_outside, "a file outside the project changed"
    if command not in ("build", "test"):  # those may make build/ or .opgen/cache/ first
        assert unchanged_project(before_project, root), "a refused run changed the project"


@pytest.mark.parametrize("rel", [".opgen/cache", ".opgen/cache/generate.json"])
def test_a_symlink_at_a_cache_path_is_neither_followed_nor_fatal(
    prepared: dict[str, Path], tmp_path: Path, rel: str
) -> None:
    """The caches of `opgen generate` (Note [Generate cache], Note [Compiled templates]): a symlink
    in their place is neither read nor written through; the run does all the work without them
    and says which cache it could not write."""
    root = tmp_path / "project"
    shutil.copytree(prepared["python"], root, symlinks=True)
    (root / "ops/foo.toml").write_text(spec().replace("torch.sin(x)", "torch.sin(x) * 1"))
    outside = tmp_path / "outside"
    outside.mkdir()
    _plant(root, rel, outside)
    before = snapshot(outside)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 0, result.output
    assert "updated        tests/test_foo.py" in result.stdout
    assert f"warning: the {'template ' if rel.endswith('.bin') else ''}cache" in result.stderr
    assert "symlink" in result.stderr and "outside the project" in result.stderr
    assert snapshot(outside) == before, "a file outside the project changed"
    assert (root / rel).is_symlink()


@pytest.mark.parametrize("rel", ["mylib/_generated", "tests/test_foo.py", ".opgen/backup"])
def test_without_dir_fds_a_symlink_is_refused_the_same_way(
    prepared: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rel: str
) -> None:
    """The lstat-per-folder walk of platforms without `dir_fd` (Windows) refuses the same links."""
    import opgen.write.confined

    monkeypatch.setattr(opgen.write.confined, "_FDS", False)
    root = tmp_path / "project"
    shutil.copytree(prepared["conflict"], root, symlinks=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    _plant(root, rel, outside)
    before = snapshot(outside)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1 and f"{rel}: error: " in result.stderr, result.output
    assert snapshot(outside) == before


def test_without_dir_fds_a_run_writes_as_usual(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import opgen.write.confined

    monkeypatch.setattr(opgen.write.confined, "_FDS", False)
    root = make_project(tmp_path / "project")
    fill_kernel(root)
    (root / "ops/foo.toml").write_text(spec(schema="(Tensor x, float alpha=1.0) -> Tensor"))
    result = generate(root)
    assert not result.failed and {c.action for c in result.changes} >= {"merge", "update"}
    assert "alpha: float = 1.0) -> Tensor:\n    y = torch.sin(x)" in (root / "mylib/kernels/foo.py").read_text()


def test_the_build_is_refused_before_ninja_writes_through_a_symlinked_output(
    prepared: dict[str, Path], tmp_path: Path
) -> None:
    """The library planted as a link to a file outside: neither ninja nor the linker ever runs."""
    root = tmp_path / "project"
    shutil.copytree(prepared["cpp"], root, symlinks=True)
    victim = tmp_path / "victim.so"
    victim.write_bytes(b"precious")
    (root / "mylib/_C.abi3.so").symlink_to(victim)
    result = run_cli("build", cwd=root)
    assert result.exit_code == 1 and "mylib/_C.abi3.so: error: is a symlink" in result.stderr
    assert victim.read_bytes() == b"precious"
    assert not (root / "build/.ninja_log").exists()  # ninja never started


# -- 8. I/O errors: a diagnostic, and the old files or the new ones, never a mix ----------------


def _changed_project(tmp_path: Path) -> tuple[Path, dict[str, tuple[str, bytes, int]]]:
    root = make_project(tmp_path / "project")
    (root / "ops/foo.toml").write_text(spec(schema="(Tensor x, float alpha=1.0) -> Tensor"))
    return root, snapshot(root, mtimes=False)


def _fail_staging_under(monkeypatch: pytest.MonkeyPatch, folder: str, error: int) -> None:
    """Writing any file under `folder` fails as the operating system would (EACCES, ENOSPC)."""
    from opgen.write.confined import Confined

    real = Confined.stage

    def stage(self, rel, data: bytes, *args, **kwargs):
        if str(rel).startswith(folder + "/"):
            raise_in = self.parts(rel)
            with self._io("write", raise_in):
                raise OSError(error, os.strerror(error))
        return real(self, rel, data, *args, **kwargs)

    monkeypatch.setattr(Confined, stage.__name__, stage)


@pytest.mark.parametrize("error", [errno.EACCES, errno.ENOSPC, errno.EROFS])
def test_a_write_that_fails_leaves_the_old_files_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: int
) -> None:
    root, before = _changed_project(tmp_path)
    _fail_staging_under(monkeypatch, "tests", error)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert re.match(r"tests/(\w+)\.py: error: cannot write tests/\1\.py: ", result.stderr)
    assert f": {os.strerror(error)}; nothing was changed\n" in result.stderr
    assert unchanged_project(before, root)
    monkeypatch.undo()
    assert not run_cli("generate", cwd=root).exit_code  # once writable, the run goes through


def test_a_full_disk_for_real_leaves_the_old_files(tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes the kernel refuse large writes (EFBIG), as a full disk would: no injection."""
    root, before = _changed_project(tmp_path)
    limit = 2048  # smaller than the generated module and test file, larger than the small ones
    assert max(len(v[1]) for k, v in before.items() if k.endswith(".py")) > limit

    def limited() -> None:
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "opgen", "generate"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300, preexec_fn=limited,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "File too large" in run.stderr and "nothing was changed" in run.stderr
    assert "Traceback" not in run.stderr
    assert unchanged_project(before, root)


def test_a_failure_between_renames_is_finished_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renames are not atomic as a group: the journal lets the next run tell old from new."""
    reference, _ = _changed_project(tmp_path / "reference")
    generate(reference)
    expected = {k: v[1] for k, v in snapshot(reference).items() if not k.startswith(".opgen")}
    root, before = _changed_project(tmp_path / "failing")
    from opgen.write.confined import Confined

    real = Confined.commit
    calls = [0]

    def commit(self, staged) -> None:
        calls[0] += 1
        if calls[0] == 3:  # the journal and one file are renamed, then the disk fails
            with self._io("write", staged.parts):
                raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(self, staged)

    monkeypatch.setattr(Confined, "commit", commit)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1 and "Input/output error" in result.stderr
    assert "2 of " in result.stderr and "the next `opgen generate` finishes the job" in result.stderr
    monkeypatch.undo()
    assert not list(root.rglob("*.tmp"))
    now = {k: v[1] for k, v in snapshot(root).items() if not k.startswith(".opgen")}
    old = {k: v[1] for k, v in before.items() if not k.startswith(".opgen")}
    assert all(now[k] in (old.get(k), expected.get(k)) for k in now)  # each file old or new
    check = run_cli("generate", "--check", cwd=root)
    assert check.exit_code == 1 and "edited" not in check.output  # stale, never mistaken for an edit
    assert run_cli("generate", cwd=root).exit_code == 0
    assert {k: v[1] for k, v in snapshot(root).items() if not k.startswith(".opgen")} == expected


# -- 2. the manifest is data, not authority -------------------------------------------------------


def _list_as_generated(root: Path, entries: dict[str, str]) -> None:
    """Add `path -> source` to the manifest as generated files, with their correct hashes."""
    path = root / ".opgen/manifest.json"
    data = json.loads(path.read_text())
    for rel, source in entries.items():
        text = (root / rel).read_text()
        data["files"][rel] = {"owner": "generated", "source": source, "sha256": digest(text)}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def test_a_crafted_manifest_deletes_nothing_opgen_did_not_generate(tmp_path: Path) -> None:
    root = tmp_path / "project"
    new_op(root, "demo::psin")
    (root / ".git").mkdir()
    (root / ".git/HEAD").write_text("ref: refs/heads/main\n")
    (root / "tests/test_mine.py").write_text("def test_mine():\n    pass\n")  # the user's own test
    other = "ops/other.toml"  # a file with a generated header, but naming another spec
    (root / "demo/_generated/stray.py").write_text(header(other) + "\nx = 1\n")
    (root / "ops/README.md").write_text("The specs.\n")
    (root / "README.md").write_text("My project.\n")
    crafted = {
        ".git/HEAD": "ops/psin.toml",
        "ops/psin.toml": "ops/psin.toml",
        "ops/README.md": "ops/psin.toml",
        "README.md": "opgen.toml",
        "opgen.toml": "opgen.toml",
        "tests/test_mine.py": "ops/psin.toml",
        "demo/_generated/stray.py": "ops/psin.toml",
    }
    _list_as_generated(root, crafted)
    before = snapshot(root, mtimes=False)
    check = run_cli("generate", "--check", cwd=root)
    assert check.exit_code == 1  # a manifest claiming files opgen may not remove is not clean
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 0, result.output
    for rel in crafted:
        assert before[rel] == snapshot(root, mtimes=False)[rel], f"{rel} was changed"
        assert f"  not removed    {rel}  (.opgen/manifest.json lists it as generated, but " in result.stderr
    assert "opgen generates no file at this path" in result.stderr
    assert "its first line is not the header of a file generated from ops/psin.toml" in result.stderr
    assert "removed  " not in result.output.replace("not removed  ", "")
    listed = json.loads((root / ".opgen/manifest.json").read_text())["files"]
    assert not set(crafted) & set(listed)  # dropped from the manifest, reported once
    assert run_cli("generate", "--check", cwd=root).exit_code == 0


def test_a_removed_spec_still_removes_its_generated_files_and_says_which(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    (root / "ops/bar.toml").write_text(spec("bar"))
    generate(root)
    (root / "ops/bar.toml").unlink()
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 0, result.output
    assert "  removed        mylib/_generated/bar.py\n" in result.stdout
    assert "  removed        tests/test_bar.py\n" in result.stdout
    assert not (root / "mylib/_generated/bar.py").exists() and (root / "mylib/kernels/bar.py").exists()


_CRAFTED = ["../outside.py", "{outside}", "a\u0000b.py", "x" * 300 + "/y.py", "./mylib/../../z.py"]


def test_manifest_entries_outside_the_project_are_reported_and_the_project_goes_on(tmp_path: Path) -> None:
    """A `..`, an absolute path, a NUL byte, a name too long: reported as "not removed" and left
    alone, dropped from the manifest, and the run goes on (it used to stop every run there)."""
    root = make_project(tmp_path / "project")
    outside = tmp_path / "outside.py"
    outside.write_text("precious = True\n")
    path = root / ".opgen/manifest.json"
    data = json.loads(path.read_text())
    entries = [entry.format(outside=outside) for entry in _CRAFTED]
    for rel in entries:
        data["files"][rel] = {"owner": "generated", "source": "ops/foo.toml", "sha256": "0" * 64}
    data["pending"] = {"../pending.py": None, "/abs/pending.py": None}
    path.write_text(json.dumps(data))
    check = run_cli("generate", "--check", cwd=root)
    assert check.exit_code == 1 and "run `opgen generate`" in check.stderr
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 0, result.output
    for rel in entries:
        shown = rel if rel.isprintable() else ascii(rel)
        assert f"  not removed    {shown}  (.opgen/manifest.json lists it, but it is not a path " in result.stderr
    assert "left alone, and dropped from the manifest" in result.stderr and "\x00" not in result.output
    assert outside.read_text() == "precious = True\n"
    listed = json.loads(path.read_text())
    assert not set(entries) & set(listed["files"]) and "pending" not in listed
    assert run_cli("generate", "--check", cwd=root).exit_code == 0  # the project is not stuck


# -- 3. a lost or damaged manifest never detaches a user file in silence --------------------------

KERNEL = "mylib/kernels/foo.py"
MODULE = "mylib/_generated/foo.py"
WITH_ALPHA = "(Tensor x, float alpha=1.0) -> Tensor"


def fill_kernel(root: Path) -> None:
    """The user replaces the stub's placeholder line with a body."""
    path = root / KERNEL
    lines = path.read_text().splitlines(True)
    index = next(i for i, line in enumerate(lines) if "raise NotImplementedError" in line)
    lines[index : index + 1] = ["    y = torch.sin(x)  # user body\n", "    return y\n"]
    path.write_text("".join(lines))


def _truncate_manifest(root: Path) -> None:
    path = root / ".opgen/manifest.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


def _actions(result) -> dict[str, str]:
    return {c.path: c.action for c in result.changes}


def test_a_truncated_manifest_never_overwrites_a_hand_edit_and_force_keeps_a_backup(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path / "project")
    edited = (root / MODULE).read_text() + "# my tweak\n"
    (root / MODULE).write_text(edited)
    _truncate_manifest(root)
    before = snapshot(root, mtimes=False)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1, result.output
    assert f"  untracked      {MODULE}  (.opgen/manifest.json cannot be read" in result.stderr
    assert "pass --force to overwrite it" in result.stderr
    assert "warning: .opgen/manifest.json cannot be read" in result.stderr
    assert unchanged_project(before, root)
    forced = run_cli("generate", "--force", cwd=root)
    assert forced.exit_code == 0, forced.output
    assert f"the old file is saved as .opgen/backup/{MODULE}" in forced.output
    assert (root / ".opgen/backup" / MODULE).read_text() == edited
    assert "# my tweak" not in (root / MODULE).read_text()


def test_a_lost_manifest_reattaches_a_kernel_that_holds_its_scaffold(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    fill_kernel(root)
    (root / ".opgen/manifest.json").unlink()
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 0, result.output
    assert f"  re-attached    {KERNEL}  (re-attached: .opgen/manifest.json is missing" in result.stdout
    # from now on the kernel merges again: a schema change reaches it, the body stays
    (root / "ops/foo.toml").write_text(spec(schema=WITH_ALPHA))
    merged = generate(root)
    assert _actions(merged)[KERNEL] == "merge"
    text = (root / KERNEL).read_text()
    assert "def foo(x: Tensor, alpha: float = 1.0) -> Tensor:\n    y = torch.sin(x)  # user body\n" in text


def test_a_lost_manifest_after_a_spec_change_stops_until_the_kernel_is_adopted(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    fill_kernel(root)
    (root / ".opgen/manifest.json").unlink()
    (root / "ops/foo.toml").write_text(spec(schema=WITH_ALPHA))
    before = snapshot(root, mtimes=False)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1, result.output
    assert f"  untracked      {KERNEL}  (.opgen/manifest.json is missing, and this file lacks" in result.stderr
    assert "`def foo(x: Tensor, alpha: float = 1.0) -> Tensor:`" in result.stderr
    assert f"`opgen generate --adopt {KERNEL}`" in result.stderr
    assert "error: nothing was written" in result.stderr
    assert unchanged_project(before, root)
    # the user ports the signature by hand, then re-attaches the kernel (--force: the generated
    # files have no record either, and the user has checked them with --dry-run)
    path = root / KERNEL
    path.write_text(path.read_text().replace("def foo(x: Tensor)", "def foo(x: Tensor, alpha: float = 1.0)"))
    adopted = run_cli("generate", "--force", "--adopt", KERNEL, cwd=root)
    assert adopted.exit_code == 0, adopted.output
    assert f"  re-attached    {KERNEL}  (re-attached to the scaffold of ops/foo.toml as it is now (--adopt))" in adopted.stdout
    (root / "ops/foo.toml").write_text(spec(schema="(Tensor x, float alpha=1.0, int n=2) -> Tensor"))
    assert _actions(generate(root))[KERNEL] == "merge"
    text = path.read_text()
    assert "def foo(x: Tensor, alpha: float = 1.0, n: int = 2) -> Tensor:\n    y = torch.sin(x)  # user body\n" in text


def test_adopt_names_only_files_that_are_yours(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    result = run_cli("generate", "--adopt", MODULE, cwd=root)
    assert result.exit_code == 1
    assert f"{MODULE}: error: --adopt takes a file that is yours" in result.stderr
    assert f"files it can adopt: {KERNEL}" in result.stderr


def test_a_file_opgen_never_made_is_kept_and_the_report_says_how_to_attach_it(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(PROJECT)
    (root / "ops/foo.toml").write_text(spec())
    (root / "mylib/kernels").mkdir(parents=True)
    mine = "def foo(x):\n    return x.sin()\n"
    (root / KERNEL).write_text(mine)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 0, result.output
    assert f"  kept           {KERNEL}  (not created by opgen; left as it is, no merge (`opgen generate --adopt {KERNEL}`" in result.stdout
    assert (root / KERNEL).read_text() == mine


def test_a_backend_switch_and_back_keeps_the_kernel_attached(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    fill_kernel(root)
    (root / "ops/foo.toml").write_text(spec(backend="cpp"))
    away = run_cli("generate", cwd=root)
    assert away.exit_code == 0, away.output
    assert f"  kept           {KERNEL}  (ops/foo.toml no longer makes this file" in away.stdout
    assert "is gone" not in away.output
    assert run_cli("generate", cwd=root).output.count(KERNEL) == 0  # said once, not on every run
    (root / "ops/foo.toml").write_text(spec(schema=WITH_ALPHA))  # back to python, with a new argument
    back = generate(root)
    assert _actions(back)[KERNEL] == "merge", [(c.path, c.action, c.note) for c in back.changes]
    text = (root / KERNEL).read_text()
    assert "def foo(x: Tensor, alpha: float = 1.0) -> Tensor:\n    y = torch.sin(x)  # user body\n" in text


def test_a_spec_deleted_and_restored_keeps_the_kernel_attached(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    fill_kernel(root)
    saved = (root / "ops/foo.toml").read_text()
    (root / "ops/foo.toml").unlink()
    gone = run_cli("generate", cwd=root)
    assert gone.exit_code == 0, gone.output
    assert f"  kept           {KERNEL}  (its spec ops/foo.toml is gone" in gone.stdout
    (root / "ops/foo.toml").write_text(saved.replace("(Tensor x) -> Tensor", WITH_ALPHA))
    restored = generate(root)
    assert _actions(restored)[KERNEL] == "merge"
    assert "alpha: float = 1.0) -> Tensor:\n    y = torch.sin(x)  # user body\n" in (root / KERNEL).read_text()


# -- 4. template overrides render in a sandbox ----------------------------------------------------

ESCAPES = [
    '{% set _ = lipsum.__globals__["os"].system("touch MARKER") %}',
    '{{ cycler.__init__.__globals__.os.system("touch MARKER") }}',
    '{{ joiner.__init__.__globals__["os"].system("touch MARKER") }}',
    '{{ namespace.__init__.__globals__.os.system("touch MARKER") }}',
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ self._TemplateReference__context }}",
    '{{ op.update({"module": "x"}) }}',
    '{{ ops.append("x") }}',
]


@pytest.mark.parametrize("escape", ESCAPES)
def test_an_override_cannot_escape_the_sandbox_under_check(tmp_path: Path, escape: str) -> None:
    """`generate --check` on a pull request must not run the pull request's template code."""
    root = make_project(tmp_path / "project")
    marker = tmp_path / "MARKER"
    template = "tests/test_op.py.j2" if "ops." not in escape else "package/__init__.py.j2"
    override = root / "templates" / template
    override.parent.mkdir(parents=True)
    override.write_text("# an override\n" + escape.replace("MARKER", str(marker)) + "\n")
    (root / "opgen.toml").write_text(PROJECT + '\n[options]\ntemplates = "templates"\n')
    before = snapshot(root, mtimes=False)
    result = run_cli("generate", "--check", cwd=root)
    assert result.exit_code == 1, result.output
    assert f"templates/{template}:2: error: template tried something the sandbox forbids" in result.stderr
    assert not marker.exists()
    assert unchanged_project(before, root)


def test_an_override_that_is_a_symlink_cannot_pull_in_a_file_from_outside(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    secret = tmp_path / "secret.txt"
    secret.write_text("API_KEY = 'do not leak'\n")
    (root / "templates/tests").mkdir(parents=True)
    (root / "templates/tests/test_op.py.j2").symlink_to(secret)
    (root / "opgen.toml").write_text(PROJECT + '\n[options]\ntemplates = "templates"\n')
    result = run_cli("generate", "--dry-run", cwd=root)
    assert result.exit_code == 1
    assert "test_op.py.j2: error: is a symlink" in result.stderr
    assert "do not leak" not in result.output


# -- 5. bounded input: no hang, no RecursionError, no runaway memory -------------------------------


def _opgen_subprocess(root: Path, memory: int | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    def limits() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "opgen", "generate"],
        cwd=root, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=limits,
    )


def _bare_project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(PROJECT)
    return root


def test_a_fifo_spec_is_refused_without_blocking(tmp_path: Path) -> None:
    root = _bare_project(tmp_path)
    os.mkfifo(root / "ops/f.toml")
    run = _opgen_subprocess(root, timeout=60)  # a blocking read would hang until the timeout
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith("ops/f.toml: error: is a FIFO, not a regular file\n")


def test_a_socket_spec_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    root = _bare_project(tmp_path)
    monkeypatch.chdir(root / "ops")  # a socket's path must be short: bind it relative
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("s.toml")
    try:
        result = run_cli("generate", cwd=root)
    finally:
        server.close()
    assert result.exit_code == 1
    assert result.stderr.startswith("ops/s.toml: error: is a socket, not a regular file\n")


def test_a_spec_over_one_mebibyte_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    root = _bare_project(tmp_path)
    (root / "ops/big.toml").write_text(spec("big") + "# " + "x" * (1024 * 1024) + "\n")
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1
    assert "ops/big.toml: error: is 10" in result.stderr
    assert "bytes; opgen reads spec files of at most 1048576 bytes (1 MiB)" in result.stderr


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a" + ".a" * 5000 + " = 1\n", id="5000 dotted keys"),
        pytest.param("x = " + "[" * 5000 + "]" * 5000 + "\n", id="5000 arrays"),
        pytest.param("[" + "a." * 5000 + "a]\n", id="5000-part table header"),
    ],
)
def test_deep_nesting_is_refused_with_file_and_line(tmp_path: Path, text: str) -> None:
    root = _bare_project(tmp_path)
    (root / "ops/deep.toml").write_text(spec("deep") + text)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"ops/deep.toml:{spec('deep').count(chr(10)) + 1}: error: nested more than 32 levels deep")
    assert "RecursionError" not in result.output


def test_a_hundred_thousand_levels_are_refused_quickly_in_bounded_memory(tmp_path: Path) -> None:
    root = _bare_project(tmp_path)
    deep = "x = " + "{a = " * 100_000 + "1" + "}" * 100_000 + "\n"  # 600 KB
    (root / "ops/deep.toml").write_text(spec("deep") + deep)
    start = time.monotonic()
    run = _opgen_subprocess(root, memory=2 * 1024**3, timeout=120)  # the interpreter needs far less
    assert time.monotonic() - start < 60  # about a second, mostly the interpreter starting
    assert run.returncode == 1, run.stderr[-2000:]
    line = spec("deep").count("\n") + 1
    assert f"ops/deep.toml:{line}: error: nested more than 32 levels deep" in run.stderr
    assert "Traceback" not in run.stderr


def _large_samples(count: int) -> str:
    return "".join("\n[[test.samples]]\nx = {shape = [4096, 4096]}\n" for _ in range(count))


def test_twenty_thousand_large_samples_are_refused_at_the_sample_past_the_bound(tmp_path: Path) -> None:
    """Each sample is under 2**24 elements, but the tests of 20,000 of them would never end."""
    root = make_project(tmp_path / "project")
    text = (root / "ops/foo.toml").read_text() + _large_samples(20_000)
    (root / "ops/foo.toml").write_text(text)
    headers = [n for n, line in enumerate(text.splitlines(), 1) if line == "[[test.samples]]"]
    before = snapshot(root, mtimes=False)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1, result.output
    # the spec's own sample ([4, 3]) and 16 of 2**24 elements are past 2**28
    assert result.stderr.startswith(
        f"ops/foo.toml:{headers[16]}: error: samples 1 to 17 (of {len(headers)}) hold 268435468 "
        "tensor elements together, more than the 268435456 a spec's samples may hold "
        "(max_sample_elements): the generated tests run every check on every sample\n"
        "  hint: use fewer or smaller samples (a few small ones test an op well), or raise "
        "max_sample_elements under [options] in opgen.toml\n"
    ), result.stderr
    assert unchanged_project(before, root)


def test_max_sample_elements_sets_another_total(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    (root / "ops/foo.toml").write_text(spec() + _large_samples(16))
    assert run_cli("generate", cwd=root).exit_code == 1
    (root / "opgen.toml").write_text(PROJECT + "\n[options]\nmax_sample_elements = 300000000\n")
    assert run_cli("generate", cwd=root).exit_code == 0
    (root / "opgen.toml").write_text(PROJECT + "\n[options]\nmax_sample_elements = 1000\n")
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1 and "samples 1 to 2 (of 17) hold 16777228 tensor elements" in result.stderr


@pytest.mark.parametrize("value", ["0", "-1", "true", '"many"', "1.5"])
def test_max_sample_elements_must_be_a_positive_integer(tmp_path: Path, value: str) -> None:
    root = make_project(tmp_path / "project")
    (root / "opgen.toml").write_text(PROJECT + f"\n[options]\nmax_sample_elements = {value}\n")
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "opgen.toml:6: error: options.max_sample_elements must be a positive integer, not "
    )


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ('"\\u0000"', "holds a control character, which no folder name of a project has"),
        ('"templates\\u0000x"', "holds a control character, which no folder name of a project has"),
        ('"loop"', "is a loop of symlinks"),
    ],
)
def test_a_templates_option_no_folder_can_have_is_a_diagnostic(tmp_path: Path, value: str, why: str) -> None:
    """A NUL byte used to reach the file system as a ValueError traceback."""
    root = make_project(tmp_path / "project")
    (root / "loop").symlink_to("loop")
    (root / "opgen.toml").write_text(PROJECT + f"\n[options]\ntemplates = {value}\n")
    for command in (["generate"], ["templates", "list"], ["new", "mylib::bar"]):
        result = run_cli(*command, cwd=root)
        assert result.exit_code == 1, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert result.stderr.startswith("opgen.toml:6: error: options.templates ")
        assert why in result.stderr and "hint: use a folder inside the project" in result.stderr


@pytest.mark.parametrize("file", ["opgen.toml", "ops/foo.toml"])
def test_a_byte_order_mark_is_a_diagnostic_at_line_one(tmp_path: Path, file: str) -> None:
    root = make_project(tmp_path / "project")
    path = root / file
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1
    assert result.stderr == (
        f"{file}:1: error: the file starts with a byte-order mark (U+FEFF), which TOML does not allow\n"
        "  hint: save it as UTF-8 without a byte-order mark (editors call it UTF-8, not UTF-8 with BOM)\n"
    )


# -- 6. `ops` that is not a readable folder is an error, never "no specs" -------------------------


def _break_ops(root: Path, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = root / "ops"
    if how == "a file":
        shutil.rmtree(ops)
        ops.write_text("")
    elif how == "a symlink":
        ops.rename(root / "specs")
        ops.symlink_to(root / "specs", target_is_directory=True)
    else:  # unreadable; as root a chmod would not stop the listing, so the listing fails instead
        real = os.listdir

        def listdir(path=".") -> list[str]:
            if Path(path) == ops:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real(path)

        monkeypatch.setattr(os, "listdir", listdir)


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("a file", "ops: error: ops is a file, not a folder"),
        ("a symlink", "ops: error: ops/ is a symlink"),
        ("unreadable", "ops: error: cannot list ops/: Permission denied"),
    ],
)
def test_ops_that_is_not_a_readable_folder_removes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, message: str
) -> None:
    root = make_project(tmp_path / "project")
    _break_ops(root, how, monkeypatch)
    before = snapshot(root, mtimes=False)
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(message)
    assert unchanged_project(before, root)


# -- 9. what the expression filter promises, and what it does not ---------------------------------


def test_the_expression_filter_is_not_a_sandbox_and_says_so() -> None:
    """A reference may call torch.save: the filter prevents accidents, the spec is trusted code."""
    import opgen.spec.expr as expr

    allowed = {"x", "torch"}
    assert expr.check_expression("torch.save(x, 'copy.pt')", allowed, "reference")
    with pytest.raises(expr.ExprProblem, match="unknown name '__import__'"):
        expr.check_expression("__import__('os')", allowed, "reference")
    doc = " ".join((expr.__doc__ or "").split())
    assert "cannot reach outside the op" not in doc
    assert "What it does not promise" in doc and "torch.save(x, path)" in doc
    assert "like a Makefile" in doc


def test_the_docs_have_the_trust_and_safety_page() -> None:
    text = (REPO / "docs" / "safety.md").read_text()
    assert text.startswith("# Trust and safety\n")
    flat = " ".join(text.split())
    for claim in (
        "`opgen generate`, `opgen generate --check` (or `--dry-run`) and `opgen templates list` (or `diff`) are safe to run on a checkout you do not trust",
        "**Writes stay in the project.**",
        "**Nothing is deleted that opgen did not generate.**",
        "**Template overrides are sandboxed and bounded**",
        "`OPGEN_RENDER_SECONDS` and `OPGEN_RENDER_MB`",
        "`opgen import --into DIR` walks to DIR the same way",
        "An entry that is no path opgen writes (`..`, an absolute path, a NUL byte) is reported",
        "**Input is bounded**",
        "`opgen build`, `opgen test` and `opgen bench` run the checkout's code by design",
        "`torch.save(x, path)`",
        "Not covered: another process changing the project while opgen runs",
    ):
        assert claim in flat, claim
