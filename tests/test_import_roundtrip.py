"""`opgen import` round trips: import an extension, build it, and its tests pass with the user's
kernels; break a user kernel and they fail."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _cpp_support import opgen, python

pytestmark = pytest.mark.slow  # compiles the imported C++

FIXTURES = Path(__file__).parent / "data" / "import"


def _copy(name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    return root


def _spec(
    root: Path, op: str, reference: str, samples: str | None = None, fake: str | None = None
) -> None:
    """Do what `opgen import` asks next: write the op's reference (and samples, and fake rule)."""
    path = root / "ops" / f"{op}.toml"
    text = re.sub(
        r"(?m)^# reference = .*$", f"reference = {reference!r}".replace("'", '"'), path.read_text()
    )
    if fake is not None:
        text = re.sub(r"(?ms)^\[fake\]\n.*?(?=^\[test\])", f"[fake]\n{fake}\n\n", text)
    if samples is not None:
        text = text[: text.index("[[test.samples]]")] + samples
    path.write_text(text)


def _tests(root: Path, *select: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", *select],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_extension_cpp_layout(tmp_path: Path):
    root = _copy("muladd", tmp_path)
    opgen("import", "extension_cpp", cwd=root)
    _spec(root, "mymuladd", "a * b + c")
    _spec(root, "mymul", "a * b")
    _spec(root, "myadd_out", "a + b")
    opgen("generate", cwd=root)
    opgen("build", cwd=root)
    run = _tests(root)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    # the kernels are the user's: break one in the user's own file, rebuild, and its tests fail
    source = root / "extension_cpp/csrc/muladd.cpp"
    source.write_text(
        source.read_text().replace("a_ptr[i] * b_ptr[i] + c;", "a_ptr[i] * b_ptr[i] - c;")
    )
    opgen("build", cwd=root)
    broken = _tests(root)
    assert broken.returncode == 1
    assert (
        "test_mymuladd.py" in broken.stdout
        and "test_mymul.py" not in broken.stdout.split("short test summary")[-1]
    )


_VLLM_SAMPLES = {
    "silu_and_mul": (
        "torch.nn.functional.silu(input[..., :3]) * input[..., 3:]",
        "[[test.samples]]\nresult = {shape = [4, 3]}\ninput = {shape = [4, 6]}\n",
        'checks = ["2 * result.shape[-1] == input.shape[-1]"]',
    ),
    "rms_norm": (
        "input * torch.rsqrt(input.pow(2).mean(-1, keepdim=True) + epsilon) * weight",
        "[[test.samples]]\nresult = {shape = [4, 8]}\ninput = {shape = [4, 8]}\n"
        "weight = {shape = [8]}\nepsilon = 1e-6\n",
        None,
    ),
}


def test_bindings_file_with_mutable_and_symint_arguments(tmp_path: Path):
    root = _copy("vllm", tmp_path)
    opgen("import", "csrc", "--namespace", "vllm_fix", cwd=root)
    for op, (reference, samples, fake) in _VLLM_SAMPLES.items():
        _spec(root, op, reference, samples, fake)
    opgen("generate", cwd=root)
    opgen("build", cwd=root)
    run = _tests(root, "-k", "silu_and_mul or rms_norm")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    # Tensor!? and SymInt reach the user's kernel: it writes the optional scale, checks the block
    check = python(
        "import torch, vllm_fix\n"
        "x = torch.tensor([1.0, -4.0]); out = torch.empty(2); scale = torch.zeros(())\n"
        "torch.ops.vllm_fix.scaled_copy(out, x, scale, 2)\n"
        "assert scale.item() == 4.0 and out.tolist() == [0.25, -1.0], (scale, out)\n"
        "try:\n    torch.ops.vllm_fix.scaled_copy(out, x, None, 0)\nexcept RuntimeError as e:\n"
        "    assert 'block must be positive' in str(e)\nelse:\n    raise AssertionError('no error')\n",
        cwd=root,
    )
    assert check.returncode == 0, check.stderr[-3000:]
    kernels = root / "csrc/kernels/activation.cpp"
    kernels.write_text(kernels.read_text().replace("x * torch::sigmoid(x) * y", "x * y"))
    opgen("build", cwd=root)
    assert _tests(root, "-k", "silu_and_mul").returncode == 1


def test_python_custom_ops(tmp_path: Path):
    root = _copy("pyops", tmp_path)
    opgen("import", "pyext", cwd=root)
    _spec(root, "numpy_sin", "torch.sin(x)")
    _spec(root, "scaled_add", "a + alpha * b")
    opgen("generate", cwd=root)
    run = _tests(root)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    kernel = root / "pyext_ops/kernels/scaled_add.py"
    kernel.write_text(kernel.read_text().replace("return a + alpha * b", "return a - alpha * b"))
    assert _tests(root, "-k", "scaled_add").returncode == 1


def test_files_that_are_python_modules_build_without_their_bindings(tmp_path: Path):
    """extension-cpp's Python.h and PyInit__C stub, and an older file's torch/extension.h and
    PYBIND11_MODULE beside TORCH_LIBRARY: compiled with Python's headers, the bindings left out
    of the library (Note [Python bindings of imported files])."""
    root = _copy("pymodule", tmp_path)
    imported = opgen("import", "extension_cpp", cwd=root)
    assert (
        "extension_cpp/csrc/muladd.cpp:14: note: PyInit__C (a Python module stub) is left out of "
        "the library opgen builds"
    ) in imported.stderr
    assert (
        "extension_cpp/csrc/bindings.cpp:18: note: PYBIND11_MODULE(TORCH_EXTENSION_NAME, ...) "
        "(a pybind11 module) is left out"
    ) in imported.stderr
    _spec(root, "mymuladd", "a * b + c")
    _spec(root, "mymul", "a * b")
    opgen("build", cwd=root)
    library = root / "extension_cpp_ops" / "_C.so"
    symbols = subprocess.run(
        ["nm", "-D", str(library)], capture_output=True, text=True, check=True
    ).stdout
    assert "PyInit" not in symbols and " U Py" not in symbols, symbols
    run = _tests(root)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
