"""backend = "triton": registered schemas, refusals, the CPU choice, errors, regeneration and
generated tests that run the kernel under Triton's interpreter (Note [Triton ops]).

Tests that import a generated Triton op need triton (the `opgen[triton]` extra): they skip
without it, and CI names this file in OPGEN_MUST_RUN so that they cannot skip there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from opgen.errors import OpgenError
from opgen.generate import generate
from opgen.scaffold.new_op import new_op

from _support import EXAMPLE, REPO, run_generated_tests

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="triton is not installed (opgen[triton])"
)

# Schemas triton_op's inference reaches exactly (Note [Schemas of Triton ops]); the first is
# vLLM's rms_norm, verbatim.
REACHABLE = {
    "rms": "(Tensor! result, Tensor input, Tensor weight, float epsilon) -> ()",
    "opt": '(Tensor x, Tensor? y=None, float alpha=1.0, bool flag=False, str mode="a") -> Tensor',
    "sym": "(Tensor x, SymInt n, SymInt[] sizes, float[]? scales=None) -> Tensor[]",
    "kw": "(Tensor x, *, float eps=1e-06, ScalarType? dtype=None) -> (Tensor, Tensor)",
    "lst": "(Tensor[] xs, Tensor?[] ys, bool[] keep) -> SymInt",
}


def _spec(name: str, schema: str, extra: str = "") -> str:
    return (
        f'name = "demo::{name}"\nschema = {json.dumps(schema)}\n'
        f'devices = ["cpu", "cuda"]\nbackend = "triton"\n{extra}'
    )


def _project(root: Path, specs: dict[str, str]) -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text('[project]\nnamespace = "demo"\npackage = "demo"\n')
    for name, text in specs.items():
        (root / "ops" / f"{name}.toml").write_text(text)
    return root


def _python(root: Path, code: str, interpret: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(REPO / "tests")])
    return subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )


@needs_triton
@pytest.mark.slow  # a fresh interpreter imports torch and triton
@pytest.mark.parametrize("interpret", [False, True], ids=["gpu_path", "interpreter"])
def test_registered_schemas_equal_the_pasted_ones(tmp_path: Path, interpret: bool) -> None:
    root = _project(tmp_path, {n: _spec(n, s) for n, s in REACHABLE.items()})
    result = generate(root)
    assert not result.failed, result
    code = f"""
import torch, demo
from _schema_meaning import differences
for name, schema in {REACHABLE!r}.items():
    registered = getattr(torch.ops.demo, name).default._schema
    pasted = torch._C.parse_schema(f"demo::{{name}}{{schema}}")
    found = differences(registered, pasted)
    assert not found, (name, str(registered), found)
print("ok")
"""
    run = _python(root, code, interpret)
    assert run.stdout.strip() == "ok", run.stderr[-3000:]


@pytest.mark.parametrize(
    "schema, why",
    [
        ("(Tensor x, int n) -> Tensor", "which triton_op infers as SymInt"),
        ("(Tensor x, int[] sizes) -> Tensor", "which triton_op infers as SymInt[]"),
        ("(Tensor x) -> (Tensor out, Tensor mean)", "return 'out' is named"),
        ("(Tensor(a!) x) -> Tensor(a!)", "its returns alias arguments"),
        ("(Tensor x, SymInt[] s=[1, 2]) -> Tensor", "has a list default"),
        ("(Tensor x, Scalar s) -> Tensor", "has type Scalar"),
        ("(Tensor x, Tensor(a!) out) -> Tensor", "writes arguments and also returns values"),
    ],
)
def test_schemas_triton_op_cannot_register_are_refused_at_the_schema_line(
    tmp_path: Path, schema: str, why: str
) -> None:
    root = _project(tmp_path, {"bad": _spec("bad", schema)})
    with pytest.raises(OpgenError) as error:
        generate(root)
    text = str(error.value)
    assert "ops/bad.toml:2" in text and why in text, text
    assert 'backend = "python"' in text, text
    assert not (root / "demo").exists(), "nothing is written on a failed run"


def test_unknown_backend_and_misplaced_triton_table_name_the_line(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "wat": 'name = "demo::wat"\nschema = "(Tensor x) -> Tensor"\nbackend = "cuda"\n',
            "py": 'name = "demo::py"\nschema = "(Tensor x) -> Tensor"\n[triton]\ncpu = "error"\n',
            "cpu": _spec("cpu", "(Tensor x) -> Tensor", '[triton]\ncpu = "reference"\n'),
            "dev": _spec("dev", "(Tensor x) -> Tensor", "per_device = true\n"),
        },
    )
    with pytest.raises(OpgenError) as error:
        generate(root)
    text = str(error.value)
    assert "ops/wat.toml:3" in text and "'triton'" in text, text
    assert "ops/py.toml:3" in text and "[triton] configures Triton ops" in text, text
    assert "ops/cpu.toml:6" in text and "has none" in text, text
    assert "ops/dev.toml:5" in text and "per_device does not apply" in text, text


# the reference names F: the generated module imports what the CPU fallback uses
_CPU = '[fake]\nlike = "x"\n[test]\nreference = "x * 2 + 0 * F.relu(x)"\n[triton]\ncpu = "{cpu}"\n'


@needs_triton
@pytest.mark.slow  # a fresh interpreter imports torch and triton
def test_without_the_interpreter_the_op_is_a_triton_op_launching_through_wrap_triton(
    tmp_path: Path,
) -> None:
    """Structure, outside the interpreter: the body calls the user's launcher directly (no
    inner op is registered) and the launcher launches through wrap_triton; on CPU the
    `[triton] cpu` choice decides."""
    root = _project(
        tmp_path,
        {
            "twice": _spec("twice", "(Tensor x) -> Tensor", _CPU.format(cpu="reference")),
            "strict": _spec("strict", "(Tensor x) -> Tensor", _CPU.format(cpu="error")),
        },
    )
    assert not generate(root).failed
    for name in ("twice", "strict"):
        kernel = root / "demo" / "kernels" / f"{name}.py"
        kernel.write_text(
            kernel.read_text().replace(
                'raise NotImplementedError(f"not implemented: edit {__file__}")  # opgen: placeholder',
                "return torch.library.wrap_triton(_double)[(1,)](x)",
            )
            + "\n\n@triton.jit\ndef _double(x_ptr):\n    pass\n"
        )
    code = """
import inspect, torch, demo
from torch._library.custom_ops import CustomOpDef
from demo._generated import twice, strict
from demo.kernels import twice as kernels
assert twice._launch is kernels.launch_twice, twice._launch
assert not hasattr(torch.ops.demo, "_twice_interpreted")
assert isinstance(twice._twice, CustomOpDef)
assert "@torch.library.triton_op(" in inspect.getsource(twice)
assert "torch.library.wrap_triton(" in inspect.getsource(kernels.launch_twice)
x = torch.randn(3, 4)
torch.testing.assert_close(torch.ops.demo.twice(x), x * 2)
try:
    torch.ops.demo.strict(x)
except RuntimeError as error:
    message = str(error)
    assert "demo::strict" in message and "TRITON_INTERPRET=1" in message, message
    assert 'cpu = "reference"' in message and "ops/strict.toml" in message, message
else:
    raise AssertionError("no error on CPU")
print("ok")
"""
    run = _python(root, code, interpret=False)
    assert run.stdout.strip() == "ok", run.stderr[-3000:]
    interpreted = _python(
        root,
        "import torch, demo\n"
        "from demo._generated import twice\n"
        "assert twice._launch is not twice._kernels.launch_twice\n"
        "assert hasattr(torch.ops.demo, '_twice_interpreted')\nprint('ok')",
        interpret=True,
    )
    assert interpreted.stdout.strip() == "ok", interpreted.stderr[-3000:]


@needs_triton
@pytest.mark.slow  # a fresh interpreter imports torch and triton
def test_bad_dtypes_and_devices_name_the_op_and_argument(tmp_path: Path) -> None:
    made = new_op(tmp_path, "demo::tadd", "(Tensor x, Tensor y) -> Tensor", "triton")
    assert not made.generated.failed
    code = """
import torch, demo
from demo._generated.tadd import _check_inputs
x = torch.randn(4)
for call, kind, words in [
    (lambda: torch.ops.demo.tadd(x.long(), x), TypeError, ["demo::tadd", "x has dtype torch.int64"]),
    (lambda: torch.ops.demo.tadd(x, x.to(torch.float16)), TypeError, ["y has dtype torch.float16"]),
    # a meta tensor dispatches to the fake kernel: the body's check is called as it calls it
    (lambda: _check_inputs(x, x.to("meta")), ValueError, ["demo::tadd", "y is on meta"]),
]:
    try:
        call()
    except kind as error:
        assert all(w in str(error) for w in words), str(error)
    else:
        raise AssertionError(words)
print("ok")
"""
    run = _python(made.root, code, interpret=True)
    assert run.stdout.strip() == "ok", run.stderr[-3000:]


def test_a_schema_change_merges_the_launcher_signature_and_keeps_the_kernel(
    tmp_path: Path,
) -> None:
    made = new_op(tmp_path, "demo::wave", None, "triton")
    kernel = made.root / "demo" / "kernels" / "wave.py"
    text = kernel.read_text()
    assert "@triton.jit" in text and "tl.sin(value)" in text and "wrap_triton" in text
    kernel.write_text(text.replace("BLOCK_SIZE = 1024", "BLOCK_SIZE = 512  # mine"))
    spec = made.root / "ops" / "wave.toml"
    spec.write_text(
        spec.read_text().replace(
            '"(Tensor x) -> Tensor"', '"(Tensor x, float scale=1.0) -> Tensor"'
        )
    )
    result = generate(made.root)
    assert not result.failed, result
    merged = kernel.read_text()
    assert "<<<<<<<" not in merged, merged
    assert "def launch_wave(x: Tensor, scale: float = 1.0) -> Tensor:" in merged
    assert "BLOCK_SIZE = 512  # mine" in merged and "tl.sin(value)" in merged
    manifest = json.loads((made.root / ".opgen" / "manifest.json").read_text())
    owners = {path: entry["owner"] for path, entry in manifest["files"].items()}
    assert owners["demo/kernels/wave.py"] == "user"
    assert owners["demo/_generated/wave.py"] == "generated"


@needs_triton
@pytest.mark.slow
def test_fresh_triton_ops_pass_their_generated_tests_under_the_interpreter(
    tmp_path: Path,
) -> None:
    """The starters (a sine, and a copy for --schema) compute something real; the conftest
    turns the interpreter on (CUDA is absent here), not the user."""
    made = new_op(tmp_path, "demo::wave", None, "triton")
    assert not new_op(
        made.root, "demo::copy", "(Tensor x, Tensor y) -> Tensor", "triton"
    ).generated.failed
    out = run_generated_tests(made.root, "-rs")
    assert " failed" not in out and " error" not in out, out
    assert "passed" in out, out
    import torch

    if not torch.cuda.is_available():  # the CPU tests ran, under the interpreter
        assert "CUDA is not available" in out and "Triton's interpreter" not in out, out


@needs_triton
@pytest.mark.slow
def test_a_kernel_missing_its_mask_fails_the_generated_tests(tmp_path: Path) -> None:
    """The reference set's softmax (and the backward op its formula calls), copied into a
    project of their own: the kernel as written passes its generated tests; with its load
    mask's `other` dropped (masked columns then read 0, not -inf) it fails them."""
    root = tmp_path / "softmax"
    (root / "ops").mkdir(parents=True)
    (root / "example_ops" / "kernels").mkdir(parents=True)
    shutil.copy(EXAMPLE / "opgen.toml", root / "opgen.toml")
    for name in ("triton_softmax", "triton_softmax_backward"):
        shutil.copy(EXAMPLE / "ops" / f"{name}.toml", root / "ops")
        shutil.copy(
            EXAMPLE / "example_ops" / "kernels" / f"{name}.py", root / "example_ops" / "kernels"
        )
    assert not generate(root).failed
    test = "tests/test_triton_softmax.py"
    before = _run_one(root, test)
    assert " passed" in before and "failed" not in before, before
    kernel = root / "example_ops" / "kernels" / "triton_softmax.py"
    text = kernel.read_text()
    wrong = text.replace(', other=-float("inf"))', ")")
    assert wrong != text
    kernel.write_text(wrong)
    out = _run_one(root, test)
    assert "failed" in out and "test_matches_reference" in out, out


def _run_one(root: Path, test: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(root)
    # the reference test is the one a wrong kernel fails; the others take most of the time
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "reference"]
    command.append(test)
    run = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    return run.stdout[-8000:] + run.stderr[-2000:]


_EXTENSION = """
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


def _launch(x, factor):
    x = x.contiguous()
    out = torch.empty_like(x)
    if x.numel():
        grid = (triton.cdiv(x.numel(), 64),)
        torch.library.wrap_triton(_scale_kernel)[grid](x, out, x.numel(), factor, BLOCK=64)
    return out


@torch.library.triton_op("ext::scale", mutates_args=())
def scale(x: Tensor, factor: float) -> Tensor:
    return _launch(x, factor)


@torch.library.custom_op("ext::triple", mutates_args=())
def triple(x: Tensor) -> Tensor:
    out = torch.empty_like(x)
    _scale_kernel[(triton.cdiv(x.numel(), 64),)](x.contiguous(), out, x.numel(), 3.0, BLOCK=64)
    return out


@torch.library.custom_op("ext::plain", mutates_args=())
def plain(x: Tensor) -> Tensor:
    return x * 2
"""


def test_import_reads_triton_ops_and_custom_ops_launching_triton_kernels(tmp_path: Path) -> None:
    from opgen.adopt.importer import import_extension

    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / "ops.py").write_text(_EXTENSION)
    project = tmp_path / "project"
    result = import_extension(tmp_path, [tmp_path / "ext"], into=project)
    assert not result.generated.failed, result
    specs = {p.stem: (project / "ops" / p.name).read_text() for p in (project / "ops").iterdir()}
    assert 'backend = "triton"' in specs["scale"] and 'backend = "triton"' in specs["triple"]
    assert 'backend = "python"' in specs["plain"]
    assert 'schema = "(Tensor x, float factor) -> Tensor"' in specs["scale"]
    kernel = (project / "ext" / "kernels" / "scale.py").read_text()
    # the launcher's body is the op's, after the module's kernel and helper it uses
    assert "@triton.jit\ndef _scale_kernel(" in kernel and "def _launch(x, factor):" in kernel
    assert "def launch_scale(x: Tensor, factor: float) -> Tensor:" in kernel
    assert "    return _launch(x, factor)" in kernel
    assert "from __future__" not in kernel
    triple = (project / "ext" / "kernels" / "triple.py").read_text()
    assert "def _scale_kernel(" in triple and "def _launch(" not in triple
