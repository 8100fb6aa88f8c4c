"""A stable-target project ships as an abi3 wheel: `pip wheel --no-build-isolation .` builds it, and
the op and its opcheck run from the installed package in a fresh venv, away from the sources.
The wheel holds the op and what it needs at run time, not the tests' harness: the package
imports with torch alone, where opgen is not installed."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from opgen.build.run import foreign_symbols
from opgen.targets.project import retired_paths

from _cpp_support import opgen
from _support import clean_env, make_venv

pytestmark = pytest.mark.slow  # compiles a library, builds a wheel and a venv

RUN_FROM_THE_WHEEL = """
import sys
from pathlib import Path

import torch
import mylib

project = Path(sys.argv[1])
here = Path(mylib.__file__).resolve()
assert here.is_relative_to(Path(sys.argv[2]).resolve()), here
assert not any(Path(p or ".").resolve() == project for p in sys.path), sys.path
assert mylib._library.LIBRARY_PATH.name == "_C.abi3.so"

x = torch.randn(5, 7)
y = torch.ops.mylib.scale(x, 0.5)
assert torch.equal(y, x) and y.data_ptr() != x.data_ptr()  # the starter kernel copies x
torch.library.opcheck(torch.ops.mylib.scale.default, (x, 0.5))
torch.library.opcheck(torch.ops.mylib.scale.default, (x.t(), 2.0))
print("ran", torch.ops.mylib.scale.default.name())
"""

IMPORT_WITH_TORCH_ALONE = """
import importlib.util
import sys

import torch

assert importlib.util.find_spec("opgen") is None, "opgen is installed here"
before = set(sys.modules)
import mylib

added = {name.split(".")[0] for name in set(sys.modules) - before}
print(sorted(added - set(sys.stdlib_module_names)))
"""


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A fresh stable-target project, its wheel, and a fresh venv with the wheel installed."""
    tmp_path = tmp_path_factory.mktemp("ship")
    project = tmp_path / "project"
    project.mkdir()
    (project / "opgen.toml").write_text(
        '[project]\nnamespace = "mylib"\npackage = "mylib"\n\n[options]\nbackend = "cpp"\ncpp_target = "stable"\n'
    )
    opgen("new", "mylib::scale", "--schema", "(Tensor x, float alpha) -> Tensor", cwd=project)

    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            ".",
        ],
        cwd=project,
        check=True,
        timeout=600,
        env=clean_env() | {"OPGEN_NO_CUDA": "1"},
    )
    (wheel,) = dist.glob("*.whl")
    env_dir = tmp_path / "venv"
    python = make_venv(env_dir)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "-q",
            str(wheel),
        ],
        check=True,
        timeout=300,
        env=clean_env(),
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return {
        "project": project,
        "wheel": wheel,
        "venv": env_dir,
        "python": python,
        "elsewhere": elsewhere,
    }


def test_stable_project_wheel_runs_from_a_fresh_venv(
    shipped: dict[str, Path], tmp_path: Path
) -> None:
    wheel = shipped["wheel"]
    assert wheel.name.endswith(
        "-cp39-abi3-linux_x86_64.whl"
    ), wheel.name  # one wheel for every CPython >= 3.9
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {
            "mylib/_C.abi3.so",
            "mylib/__init__.py",
            "mylib/_generated/scale.py",
        } <= names, names
        assert not any(n.startswith(("csrc/", "ops/", "tests/")) for n in names), names
        archive.extract("mylib/_C.abi3.so", tmp_path / "unpacked")
    assert (
        foreign_symbols(tmp_path / "unpacked" / "mylib" / "_C.abi3.so") == []
    )  # only the stable C shim

    run = subprocess.run(
        [
            shipped["python"],
            "-c",
            RUN_FROM_THE_WHEEL,
            str(shipped["project"].resolve()),
            str(shipped["venv"]),
        ],
        cwd=shipped["elsewhere"],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().splitlines()[-1] == "ran mylib::scale"


def test_the_wheel_holds_no_test_harness_and_imports_with_torch_alone(
    shipped: dict[str, Path],
) -> None:
    with zipfile.ZipFile(shipped["wheel"]) as archive:
        python = sorted(n for n in archive.namelist() if n.endswith(".py"))
    assert "mylib/__init__.py" in python
    harness = set(retired_paths("mylib"))
    assert not harness & set(python), python
    assert not [n for n in python if "testing" in n or n.startswith("opgen/")], python
    run = subprocess.run(
        [shipped["python"], "-c", IMPORT_WITH_TORCH_ALONE],
        cwd=shipped["elsewhere"],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().splitlines()[-1] == "['mylib']"  # nothing but torch's modules besides
