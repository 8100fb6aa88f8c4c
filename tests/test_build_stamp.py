"""Note [Build stamp]: `opgen test` never tests a stale or missing library; a no-op build does nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from opgen.build.run import build_project
from opgen.build.stamp import STAMP_FILE, stale_reason
from opgen.scaffold.new_op import new_op

from _cpp_support import opgen


def _python_project(root: Path) -> Path:
    new_op(root, "mylib::foo")
    return root


def test_stale_reason_names_what_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _python_project(tmp_path)
    assert stale_reason(root) == "no successful `opgen build` yet"
    assert build_project(root).ok
    assert (root / STAMP_FILE).is_file() and stale_reason(root) is None
    spec = root / "ops" / "foo.toml"
    spec.write_text(spec.read_text().replace("Elementwise sine", "Sine"))
    assert stale_reason(root) == "ops/foo.toml changed since the last build"
    assert build_project(root).ok and stale_reason(root) is None
    (root / "mylib" / "_generated" / "foo.py").unlink()
    assert stale_reason(root) == "mylib/_generated/foo.py was removed since the last build"
    assert build_project(root).ok and stale_reason(root) is None
    monkeypatch.setenv("CXX", "clang++")
    assert stale_reason(root) == "$CXX changed since the last build"


def test_python_kernel_edits_need_no_build(tmp_path: Path) -> None:
    """A Python kernel is not compiled and does not change what generate writes."""
    root = _python_project(tmp_path)
    assert build_project(root).ok
    kernel = root / "mylib" / "kernels" / "foo.py"
    kernel.write_text(kernel.read_text() + "\n# tuned\n")
    assert stale_reason(root) is None


def test_a_damaged_stamp_proves_nothing(tmp_path: Path) -> None:
    root = _python_project(tmp_path)
    assert build_project(root).ok
    (root / STAMP_FILE).write_text("{not json")
    assert stale_reason(root) == "no successful `opgen build` yet"


def test_no_build_refuses_a_stale_build_in_one_line(tmp_path: Path) -> None:
    opgen("new", "mylib::foo", "--backend", "cpp", cwd=tmp_path)
    run = opgen("test", "--no-build", cwd=tmp_path, check=False)
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        "error: the build is out of date (no successful `opgen build` yet); run `opgen build`, or drop --no-build"
    ]
    assert run.stdout == ""


def test_an_up_to_date_build_imports_no_torch(tmp_path: Path) -> None:
    """The no-op `opgen build` answers before typer parses anything and without torch, jinja2 or black."""
    root = _python_project(tmp_path)
    assert build_project(root).ok
    code = (
        "import sys\nfrom opgen.cli import main\nsys.argv = ['opgen', 'build', '-j', '2']\nmain()\n"
        "heavy = sorted(m for m in ('torch', 'jinja2', 'black', 'torchgen', 'pydantic') if m in sys.modules)\n"
        "print('imported:', heavy)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["opgen: up to date: nothing changed since the last build", "imported: []"]


@pytest.fixture(scope="module")
def cpp_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh C++ op (the sine starter), never built."""
    root = tmp_path_factory.mktemp("stamp")
    opgen("new", "mylib::foo", "--backend", "cpp", cwd=root)
    return root


def _library(root: Path) -> Path:
    return root / "mylib" / "_C.abi3.so"


@pytest.mark.slow
def test_opgen_test_builds_first_then_nothing_is_redone(cpp_project: Path) -> None:
    run = opgen("test", cwd=cpp_project)
    assert "opgen: building first: no successful `opgen build` yet" in run.stdout
    assert "LINK mylib/_C.abi3.so" in run.stdout and " passed" in run.stdout
    seen = _library(cpp_project).stat().st_mtime_ns
    log = (cpp_project / "build" / ".ninja_log").stat().st_mtime_ns
    again = opgen("build", cwd=cpp_project)
    assert again.stdout == "opgen: up to date: nothing changed since the last build\n"
    assert _library(cpp_project).stat().st_mtime_ns == seen, "a no-op build rewrote the library"
    assert (cpp_project / "build" / ".ninja_log").stat().st_mtime_ns == log, "ninja -n wrote its log"
    quiet = opgen("test", cwd=cpp_project)
    assert "building first" not in quiet.stdout and " passed" in quiet.stdout


@pytest.mark.slow
def test_a_wrong_kernel_edit_is_built_and_tested(cpp_project: Path) -> None:
    """The bug this prevents: a deliberately wrong kernel once passed against the old library."""
    opgen("build", cwd=cpp_project)
    kernel = cpp_project / "csrc" / "cpu" / "foo.cpp"
    good = kernel.read_text()
    try:
        kernel.write_text(good.replace("std::sin(src[i])", "std::cos(src[i])"))
        run = opgen("test", cwd=cpp_project, check=False)
        assert "opgen: building first: csrc/cpu/foo.cpp changed since the last build" in run.stdout
        assert run.returncode == 1 and "failed" in run.stdout, run.stdout[-3000:]
        refused = opgen("test", "--no-build", cwd=cpp_project, check=False)
        assert refused.returncode == 1 and "failed" in refused.stdout  # built now: no refusal
    finally:
        kernel.write_text(good)
    assert " passed" in opgen("test", cwd=cpp_project).stdout


@pytest.mark.slow
def test_a_failed_build_stops_opgen_test_with_one_line(cpp_project: Path) -> None:
    kernel = cpp_project / "csrc" / "cpu" / "foo.cpp"
    good = kernel.read_text()
    try:
        kernel.write_text(good.replace("return out;", "return out  // missing semicolon\n", 1))
        run = opgen("test", cwd=cpp_project, check=False)
        assert run.returncode == 1
        assert "csrc/cpu/foo.cpp:" in run.stdout  # the compiler's message
        assert run.stderr.splitlines()[-1] == "error: not testing: `opgen build` failed (see above)"
        assert "passed" not in run.stdout and "ERROR tests" not in run.stdout  # pytest never ran
        refused = opgen("test", "--no-build", cwd=cpp_project, check=False)
        assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1
        assert "no successful `opgen build` yet" in refused.stderr  # a failed build leaves no stamp
    finally:
        kernel.write_text(good)
    assert " passed" in opgen("test", cwd=cpp_project).stdout


@pytest.mark.slow
def test_a_header_outside_csrc_is_seen_through_ninja(cpp_project: Path) -> None:
    """The stamp hashes csrc/; ninja's dependency log sees the headers a kernel includes from elsewhere."""
    helper = cpp_project / "third_party" / "helper.h"
    helper.parent.mkdir(exist_ok=True)
    helper.write_text("#pragma once\ninline int helper() { return 1; }\n")
    kernel = cpp_project / "csrc" / "cpu" / "foo.cpp"
    good = kernel.read_text()
    try:
        kernel.write_text(good.replace('#include <cmath>', '#include <cmath>\n\n#include "../../third_party/helper.h"'))
        opgen("build", cwd=cpp_project)
        assert stale_reason(cpp_project) is None
        helper.write_text("#pragma once\ninline int helper() { return 2; }\n")
        reason = stale_reason(cpp_project)
        assert reason is not None and reason.startswith("ninja would rebuild (CXX csrc/cpu/foo.cpp")
        assert "CXX csrc/cpu/foo.cpp" in opgen("build", cwd=cpp_project).stdout
    finally:
        kernel.write_text(good)
    opgen("build", cwd=cpp_project)
