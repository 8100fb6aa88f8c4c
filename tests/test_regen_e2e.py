"""The new user's flow: scaffold, fill the kernel, add an argument, regenerate, test, check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opgen.cli import app


def _opgen(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(root)
    return CliRunner().invoke(app, list(args))


def _add_alpha(root: Path, spec: str) -> None:
    path = root / spec
    text = path.read_text()
    assert "(Tensor x) -> Tensor" in text
    path.write_text(text.replace("(Tensor x) -> Tensor", "(Tensor x, float alpha=1.0) -> Tensor"))


def test_python_op_keeps_its_body_through_a_schema_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _opgen(tmp_path, monkeypatch, "new", "mylib::foo").exit_code == 0
    kernel = tmp_path / "mylib/kernels/foo.py"
    text = kernel.read_text()
    body = "    y = torch.sin(x)  # filled in by the user\n    return y\n"
    kernel.write_text(text.replace("    return torch.sin(x)\n", body))
    _add_alpha(tmp_path, "ops/foo.toml")

    out = _opgen(tmp_path, monkeypatch, "generate")
    assert out.exit_code == 0, out.output
    assert "merged         mylib/kernels/foo.py" in out.output and "0 conflicts" in out.output
    assert "def foo(x: Tensor, alpha: float = 1.0) -> Tensor:\n" + body in kernel.read_text()

    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "tests"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    assert _opgen(tmp_path, monkeypatch, "generate", "--check").exit_code == 0


def test_cpp_op_keeps_its_body_through_a_schema_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same merge for a C++ kernel stub (no build here: the C++ tests cover that)."""
    out = _opgen(tmp_path, monkeypatch, "new", "mylib::bar", "--backend", "cpp", "--schema", "(Tensor x) -> Tensor")
    assert out.exit_code == 0, out.output
    kernel = next((tmp_path / "csrc").rglob("bar.cpp"))
    lines = kernel.read_text().splitlines(True)
    start = next(i for i, line in enumerate(lines) if line.startswith("torch::") or " bar_cpu(" in line)
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("}"))
    user = ["  // filled in by the user\n", "  return x;\n"]
    lines[end - 1 : end] = user  # replace the last statement of the stub
    kernel.write_text("".join(lines))
    _add_alpha(tmp_path, "ops/bar.toml")

    out = _opgen(tmp_path, monkeypatch, "generate")
    assert out.exit_code == 0, out.output
    text = kernel.read_text()
    assert "".join(user) in text and "double alpha" in text and "<<<<<<<" not in text
    assert _opgen(tmp_path, monkeypatch, "generate", "--check").exit_code == 0
