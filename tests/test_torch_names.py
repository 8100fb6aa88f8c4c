"""Note [Torch names in expressions]: a misspelt torch, F or math name in a spec's expressions is an
error at generate time, at the spec's line, with the name torch has."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import torch
from typer.testing import CliRunner

from opgen.cli import app
from opgen.spec.torch_names import _scanned, unknown_attribute

PROJECT = '[project]\nnamespace = "mylib"\npackage = "mylib"\n'
TYPOS = """name = "mylib::swiglu"
schema = "(Tensor x, Tensor g) -> Tensor"

[grad]
x = "grad * F.silu2(g)"
g = "grad * x * torch.sigmoid(g) * (1 + g * (1 - torch.sigmoid(g)))"

[jvp]
result = "x_t * F.silu(g) + x * torch.sigmoidd(g) * g_t"

[fake]
expr = "torch.empty_likee(x)"
checks = ["math.isfinitee(1.0)"]

[test]
reference = "x * torch.nn.functional.silux(g) * math.sqrt(1.0)"

[[test.samples]]
x = {shape = [3]}
g = {shape = [3]}

[bench]
native = "x * torch.linalg.vector_nom(g)"
"""


def test_misspelt_names_are_errors_at_their_lines(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "opgen.toml").write_text(PROJECT)
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "swiglu.toml").write_text(TYPOS)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["generate"])
    assert result.exit_code == 1
    version = re.escape(torch.__version__)
    expected = [
        (
            5,
            r"gradient formula for 'x' uses F\.silu2, which torch " + version,
            "did you mean F.silu?",
        ),
        (
            9,
            r"forward-mode formula jvp\.result uses torch\.sigmoidd",
            "did you mean torch.sigmoid?",
        ),
        (12, r"fake\.expr uses torch\.empty_likee", "did you mean torch.empty_like?"),
        (
            13,
            r"fake check uses math\.isfinitee, which Python's math module",
            "did you mean math.isfinite?",
        ),
        (
            16,
            r"test\.reference uses torch\.nn\.functional\.silux",
            "did you mean torch.nn.functional.silu?",
        ),
        (
            23,
            r"bench\.native uses torch\.linalg\.vector_nom",
            "did you mean torch.linalg.vector_norm?",
        ),
    ]
    blocks = sorted(result.stderr.split("ops/swiglu.toml:")[1:], key=lambda b: int(b.split(":")[0]))
    assert len(blocks) == len(expected), result.stderr
    for block, (line, message, hint) in zip(blocks, expected, strict=True):
        assert re.match(rf"{line}: error: {message}", block), block
        assert f"hint: {hint}" in block, block
    assert not (tmp_path / "mylib").exists()  # nothing written


def test_the_names_torch_has_pass() -> None:
    for chain in (
        ["torch", "sin"],
        ["torch", "float32"],
        ["torch", "where"],
        ["torch", "special", "expit"],
        ["torch", "linalg", "vector_norm"],
        ["torch", "fft", "rfft"],
        ["torch", "nn", "functional", "silu"],
        ["torch", "distributions", "Normal"],  # not read: not checked
        ["F", "gelu"],
        ["F", "scaled_dot_product_attention"],
        ["math", "pi"],
    ):
        assert unknown_attribute(chain, chain[0]) is None, chain


def test_a_name_only_torch_itself_has_passes_and_the_scan_needs_no_torch_import() -> None:
    # the stubs miss a few names made in C++ (torch.uint4): looked up in torch only then
    code = (
        "import sys\n"
        "from opgen.spec.torch_names import _scanned, unknown_attribute\n"
        "assert unknown_attribute(['F', 'silu'], 'F') is None\n"
        "assert unknown_attribute(['torch', 'nn', 'functional', 'gelu'], 'torch') is None\n"
        "assert unknown_attribute(['torch', 'ops', 'aten', 'sin'], 'torch') is None\n"
        "assert 'torch' not in sys.modules, 'the scan imported torch'\n"
        "assert _scanned('torch', 'uint4') is False\n"
        "assert unknown_attribute(['torch', 'uint4'], 'torch') is None\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    for name in ("sin", "float32", "where", "Tensor", "linalg", "bfloat16", "empty_like", "ops"):
        assert _scanned("torch", name), name
    assert not _scanned("torch", "sinn") and not _scanned("torch.nn.functional", "silu2")


def test_an_argument_named_like_a_module_is_not_looked_up(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "opgen.toml").write_text(PROJECT)
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "scale.toml").write_text(
        'name = "mylib::scale"\nschema = "(Tensor x, float math) -> Tensor"\n\n'
        '[fake]\nlike = "x"\n\n[test]\nreference = "x * math.real"\n\n'
        "[[test.samples]]\nx = {shape = [3]}\nmath = 2.0\n"
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["generate"])
    assert result.exit_code == 0, result.stderr
