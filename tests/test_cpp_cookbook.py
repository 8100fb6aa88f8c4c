"""The kernel-writing cookbook of docs/cpp.md compiles and runs: one translation unit per target.

Each target's snippets, in order, become the kernel file of a fresh op `mylib::scale`; the
project is built (the `.cu` too, where nvcc is installed), its generated tests run against
the reference `x * alpha`, and the error recipes are checked for the file and line they promise.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _cpp_support import opgen
from _support import REPO, has_nvcc

COOKBOOK_HEADING = "## Kernel-writing cookbook"
TARGETS = ("stable", "classic")
# (language, target) of a fenced block: ```cpp stable, ```cuda classic, ...
BLOCK = re.compile(r"^```(cpp|cuda) (stable|classic)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def cookbook() -> str:
    text = (REPO / "docs" / "cpp.md").read_text(encoding="utf-8")
    start = text.index(COOKBOOK_HEADING)
    end = text.find("\n## ", start + len(COOKBOOK_HEADING))
    return text[start : end if end != -1 else len(text)]


def recipes() -> dict[str, str]:
    """Each `###` section of the cookbook by its title."""
    parts = re.split(r"^### (.+)$", cookbook(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def translation_unit(language: str, target: str) -> str:
    return "\n".join(body for lang, tgt, body in BLOCK.findall(cookbook()) if (lang, tgt) == (language, target))


def test_every_recipe_is_shown_for_both_targets() -> None:
    sections = recipes()
    assert list(sections) == [
        "Headers",
        "Allocating outputs",
        "Reaching the data",
        "Dispatching on dtype",
        "Half and bfloat16",
        "Strides and contiguity",
        "Parallel loops",
        "Choosing SIMD code at run time",
        "What the registration checks, and what is yours",
        "Errors that name the file and line",
        "The current CUDA stream",
    ]
    for title, body in sections.items():
        language = "cuda" if "CUDA" in title else "cpp"
        shown = [(lang, tgt) for lang, tgt, _ in BLOCK.findall(body)]
        assert shown == [(language, "stable"), (language, "classic")], (title, shown)
    # every fenced block is one the test compiles: no block escapes it through a typo
    assert cookbook().count("```") == 2 * len(BLOCK.findall(cookbook()))


RUN_ERRORS = """
import torch, mylib
x = torch.randn(5, 7)
try:
    torch.ops.mylib.scale(x, float("inf"))
except RuntimeError as exc:
    print("alpha:", str(exc).splitlines()[0])
try:
    torch.ops.mylib.scale(torch.arange(6), 2.0)
except (RuntimeError, NotImplementedError) as exc:
    print("dtype:", str(exc).splitlines()[0])
y = torch.ops.mylib.scale(x.t(), 3.0)
assert torch.equal(y, x.t() * 3.0)
print("ok")
"""

# Every SIMD path of the recipe (MYLIB_SIMD caps the level; the host decides the top one):
# sizes with and without a tail, float32 and float64, against x * alpha.
RUN_SIMD = """
import torch, mylib
for n in (1, 15, 16, 17, 100, 70001):
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(n, dtype=dtype)
        assert torch.equal(torch.ops.mylib.scale(x, 1.5), x * 1.5), (n, dtype)
print("simd ok")
"""


@pytest.mark.slow  # compiles the project: classic ATen headers cost 6-12 s a file; nvcc several seconds a file
@pytest.mark.parametrize("target", TARGETS)
def test_cookbook_builds_and_runs(tmp_path: Path, target: str) -> None:
    (tmp_path / "opgen.toml").write_text(
        f'[project]\nnamespace = "mylib"\npackage = "mylib"\n\n[options]\nbackend = "cpp"\ncpp_target = "{target}"\n'
    )
    opgen("new", "mylib::scale", "--devices", "cpu,cuda", "--schema", "(Tensor x, float alpha) -> Tensor", cwd=tmp_path)
    spec = tmp_path / "ops" / "scale.toml"
    text, count = re.subn(r"(?m)^reference = .*$", 'reference = "x * alpha"', spec.read_text())
    # the 16-bit floats: the recipe "Half and bfloat16" (computed in float, stored rounded)
    text, count2 = re.subn(r"(?m)^# dtypes = .*$", 'dtypes = ["float32", "float64", "float16", "bfloat16"]', text)
    assert count == count2 == 1, spec.read_text()
    spec.write_text(text)
    (tmp_path / "csrc" / "cpu" / "scale.cpp").write_text(translation_unit("cpp", target))
    (tmp_path / "csrc" / "cuda" / "scale.cu").write_text(translation_unit("cuda", target))

    # stable: a CPU torch links the .cu against libcudart; classic: nvcc compile-checks it
    check_cuda = ["--check-cuda"] if target == "classic" and has_nvcc() else []
    build = opgen("build", *check_cuda, cwd=tmp_path)
    if has_nvcc():
        assert "NVCC csrc/cuda/scale.cu" in build.stdout + build.stderr, build.stdout
    elif os.environ.get("CI"):  # CI has nvcc: there the CUDA recipes must not go unchecked
        pytest.fail("nvcc is not installed: the cookbook's CUDA snippets were not compiled")

    tests = opgen("test", "-p", "no:cacheprovider", cwd=tmp_path, check=False)
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and "failed" not in tests.stdout

    run = subprocess.run([sys.executable, "-c", RUN_ERRORS], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = dict(line.split(": ", 1) for line in run.stdout.splitlines() if ": " in line)
    assert re.search(r"csrc/cpu/scale\.cpp:\d+", lines["alpha"]), lines["alpha"]
    assert "mylib::scale: alpha must be finite, got inf" in lines["alpha"], lines["alpha"]
    expected_dtype = "no kernel for dtype Long" if target == "stable" else "\"mylib::scale\" not implemented for 'Long'"
    assert expected_dtype in lines["dtype"], lines["dtype"]
    assert run.stdout.strip().endswith("ok")

    for cap in ("scalar", "avx2", ""):
        env = {**os.environ, "MYLIB_SIMD": cap}
        run = subprocess.run([sys.executable, "-c", RUN_SIMD], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0 and "simd ok" in run.stdout, (cap, run.stdout + run.stderr)
