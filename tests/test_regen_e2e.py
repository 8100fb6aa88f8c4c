"""The new user's flow: scaffold, fill the kernel, add an argument, regenerate, test, check."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opgen.cli import app
from opgen.render.environment import builtin_templates_dir


def _opgen(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(root)
    return CliRunner().invoke(app, list(args))


def _add_alpha(root: Path, spec: str) -> None:
    path = root / spec
    text = path.read_text()
    assert "(Tensor x) -> Tensor" in text
    path.write_text(text.replace("(Tensor x) -> Tensor", "(Tensor x, float alpha=1.0) -> Tensor"))


@pytest.mark.slow  # runs the generated tests (torch.compile)
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


def _reword_placeholder(root: Path, template: str, old: str, new: str) -> Path:
    """A template override whose placeholder line says something else, as a later opgen might."""
    text = (builtin_templates_dir() / template).read_text()
    assert old in text and "opgen: placeholder" in text
    target = root / "overrides" / template
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text.replace(old, new))
    return root / "overrides"


def test_python_placeholder_reworded_by_opgen_yields_to_the_users_body(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Note [Placeholder lines]: the starter body replaced the placeholder; a new wording of it is no conflict."""
    assert _opgen(tmp_path, monkeypatch, "new", "mylib::foo").exit_code == 0
    kernel = tmp_path / "mylib/kernels/foo.py"
    mine = kernel.read_text()
    assert "    return torch.sin(x)\n" in mine and "opgen: placeholder" not in mine
    overrides = _reword_placeholder(tmp_path, "python/kernel.py.j2", "not implemented: edit", "TODO: write the kernel in")

    out = _opgen(tmp_path, monkeypatch, "generate", "--templates", str(overrides))
    assert out.exit_code == 0, out.output
    assert kernel.read_text() == mine and "0 conflicts" in out.output

    # with a schema change on top: the new signature, the user's body, nothing of the new placeholder
    _add_alpha(tmp_path, "ops/foo.toml")
    out = _opgen(tmp_path, monkeypatch, "generate", "--templates", str(overrides))
    assert out.exit_code == 0, out.output
    assert "merged         mylib/kernels/foo.py" in out.output and "0 conflicts" in out.output
    text = kernel.read_text()
    assert "def foo(x: Tensor, alpha: float = 1.0) -> Tensor:\n    return torch.sin(x)\n" in text
    assert "TODO" not in text and "NotImplementedError" not in text
    assert _opgen(tmp_path, monkeypatch, "generate", "--check", "--templates", str(overrides)).exit_code == 0


def test_python_conflict_elsewhere_is_still_reported_when_the_placeholder_is_reworded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _opgen(tmp_path, monkeypatch, "new", "mylib::foo").exit_code == 0
    kernel = tmp_path / "mylib/kernels/foo.py"
    kernel.write_text(kernel.read_text().replace("def foo(x: Tensor)", "def foo(x: Tensor, beta: int = 3)"))
    overrides = _reword_placeholder(tmp_path, "python/kernel.py.j2", "not implemented: edit", "TODO: write the kernel in")
    _add_alpha(tmp_path, "ops/foo.toml")

    out = _opgen(tmp_path, monkeypatch, "generate", "--templates", str(overrides))
    assert out.exit_code == 1
    assert "1 conflicts" in out.output
    text = kernel.read_text()
    assert text.count("<<<<<<< yours") == 1 and "beta: int = 3" in text and "alpha: float = 1.0" in text
    assert "    return torch.sin(x)\n" in text  # the user's body, inside the block


def _cpp_new(root: Path, monkeypatch: pytest.MonkeyPatch, schema: str = "(Tensor x) -> Tensor") -> Path:
    """A C++ op whose CPU stub got the starter body in place of its placeholder."""
    out = _opgen(root, monkeypatch, "new", "mylib::bar", "--backend", "cpp", "--schema", schema)
    assert out.exit_code == 0, out.output
    kernel = root / "csrc/cpu/bar.cpp"
    assert "is not implemented on CPU" not in kernel.read_text()
    return kernel


def test_cpp_placeholder_reworded_by_opgen_yields_to_the_users_body(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _cpp_new(tmp_path, monkeypatch)
    mine = kernel.read_text()
    overrides = _reword_placeholder(tmp_path, "cpp/kernel_cpu.cpp.j2", "(false, ", '(false, "[opgen] ", ')
    _add_alpha(tmp_path, "ops/bar.toml")

    out = _opgen(tmp_path, monkeypatch, "generate", "--templates", str(overrides))
    assert out.exit_code == 0, out.output
    assert "merged         csrc/cpu/bar.cpp" in out.output and "0 conflicts" in out.output
    text = kernel.read_text()
    assert "double alpha" in text and "[opgen]" not in text and "<<<<<<<" not in text
    body = mine[mine.index("x_c = "):mine.index("\n}\n")]
    assert body in text  # the contiguous copy and the user's body, as they were


def test_cpp_check_line_the_user_edited_is_rewritten_from_the_spec_with_a_backup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Input checks are fenced (Note [Fenced regions]): a renamed argument rewrites them; the user's edit is backed up, not silently lost."""
    kernel = _cpp_new(tmp_path, monkeypatch)
    lines = kernel.read_text().splitlines(True)
    at = next(i for i, line in enumerate(lines) if "must be a CPU tensor" in line)
    lines[at] = lines[at].replace("must be a CPU tensor", "must live on the CPU")
    kernel.write_text("".join(lines))
    spec = tmp_path / "ops/bar.toml"
    spec.write_text(re.sub(r"\bx\b", "input", spec.read_text()))

    out = _opgen(tmp_path, monkeypatch, "generate")
    assert out.exit_code == 0, out.output
    assert "rewrote the `opgen: checks` lines you edited" in out.output and "0 conflicts" in out.output
    text = kernel.read_text()
    assert "<<<<<<<" not in text and "must live on the CPU" not in text
    assert '"mylib::bar: input must be a CPU tensor"' in text
    assert "must live on the CPU" in (tmp_path / ".opgen/backup/csrc/cpu/bar.cpp").read_text()
