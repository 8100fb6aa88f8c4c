"""The per-op decisions are made once, in one record (api/decisions.py), and an internal error
while computing one op's variables names that op's spec (Note [Internal errors] in errors.py)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

import opgen.api.decisions as decisions_module
from opgen.api.decisions import AutogradKind, OpDecisions, Registrar, decisions
from opgen.spec.model import ProjectConfig

from _specs import ROOT, op_from_toml, simple_op
from _support import run_cli

TWO = "x = {shape = [2]}\nw = {shape = [2]}"

SAMPLES = "[test]\n[[test.samples]]\nx = {shape = [2]}\ny = {shape = [2]}\n"
WRITES = 'schema = "(Tensor(a!) x, Tensor y) -> Tensor"\nmutates = ["x"]\n[fake]\nlike = "y"\n'
WRITES_ONLY = 'schema = "(Tensor(a!) x, Tensor y) -> ()"\nmutates = ["x"]\n'


def _op(options: str, spec: str, config: ProjectConfig | None = None):
    text = f'name = "mylib::foo"\n{options}{spec}{SAMPLES}'
    return op_from_toml(text) if config is None else op_from_toml(text, config=config)


def _config(**options: str) -> ProjectConfig:
    return ProjectConfig(root=ROOT, path=ROOT / "opgen.toml", namespace="mylib", package="mylib", **options)


@pytest.mark.parametrize(
    "options, spec, config, registrar, bumps, fallbacks, below",
    [
        ("", WRITES, None, Registrar.CUSTOM_OP, False, False, False),  # custom_op bumps them itself
        ('registration = "library"\n', WRITES, None, Registrar.LIBRARY, True, False, False),
        ('backend = "cpp"\n', WRITES, _config(cpp_target="stable"), Registrar.CPP_STABLE, True, False, True),
        ('backend = "cpp"\n', WRITES, _config(cpp_target="classic"), Registrar.CPP_CLASSIC, False, True, False),
        ('backend = "cpp"\n', WRITES_ONLY, _config(cpp_target="classic"), Registrar.CPP_CLASSIC, False, True, False),
        ('backend = "triton"\ndevices = ["cuda"]\n', WRITES_ONLY, None, Registrar.TRITON_OP, False, False, False),
    ],
)
def test_who_registers_a_writing_op_decides_who_bumps_its_versions(options, spec, config, registrar, bumps, fallbacks, below):
    """Note [Written arguments]: custom_op and classic's ADInplaceOrView kernel bump versions
    themselves; the typed wrapper bumps them for Library and stable ABI ops."""
    decided = decisions(_op(options, spec, config))
    assert decided.registrar is registrar
    assert decided.wrapper_bumps_versions is bumps
    assert decided.cpp_mutation_fallbacks is fallbacks
    assert decided.writes_below_autograd is below
    assert decided.autograd is AutogradKind.NONE and not decided.has_function
    assert decided.custom_op is (registrar in (Registrar.CUSTOM_OP, Registrar.TRITON_OP))


def test_autograd_design_and_its_refusals():
    formulas = decisions(simple_op("(Tensor x, Tensor w) -> Tensor", grad={"x": "grad * w"}, sample=TWO))
    assert formulas.autograd is AutogradKind.FUNCTION
    assert formulas.formula_inputs == ("x",)
    assert formulas.no_grad_message is None
    assert formulas.no_jvp_message == "mylib::foo has no forward-mode formula: add a [jvp] table to op.toml"
    assert formulas.once_differentiable is False  # double_backward defaults to true
    bare = decisions(simple_op("(Tensor x) -> Tensor"))
    assert bare.autograd is AutogradKind.REFUSE and bare.has_function
    assert bare.no_grad_message == "mylib::foo has no gradient formula: add a [grad] table to op.toml"
    keyword = decisions(simple_op("(Tensor x, *, Tensor w) -> Tensor", grad={"x": "grad"}, sample=TWO))
    assert keyword.registers_autograd is False  # Note [Keyword-only tensors]
    assert formulas.registers_autograd is True


def test_decisions_are_made_once_per_op_and_frozen(monkeypatch):
    made = []
    real = decisions_module.decide
    monkeypatch.setattr(decisions_module, "decide", lambda op: made.append(op) or real(op))
    op = simple_op("(Tensor x) -> Tensor", grad={"x": "grad"})
    first = decisions(op)
    assert decisions(op) is first and made == [op]
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.autograd = AutogradKind.NONE  # type: ignore[misc]


def test_every_decision_says_what_it_decides_and_why():
    """Each field of OpDecisions is followed by its docstring."""
    tree = ast.parse(inspect.getsource(OpDecisions))
    body = tree.body[0].body  # type: ignore[attr-defined]
    fields = [f.name for f in dataclasses.fields(OpDecisions)]
    documented = [
        node.target.id
        for node, after in zip(body, body[1:], strict=False)
        if isinstance(node, ast.AnnAssign)
        and isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
        and len(after.value.value) > 40
    ]
    assert documented == fields


def test_generating_a_project_decides_each_op_once(tmp_path, monkeypatch):
    """The api modules, the targets and the build read the record; none decides again."""
    _two_ops(tmp_path)
    made = []
    real = decisions_module.decide
    monkeypatch.setattr(decisions_module, "decide", lambda op: made.append(op.qualname) or real(op))
    result = run_cli("generate", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert sorted(made) == ["mylib::bar", "mylib::foo"]


def _two_ops(root: Path) -> None:
    (root / "ops").mkdir()
    (root / "opgen.toml").write_text('[project]\nnamespace = "mylib"\npackage = "mylib"\n')
    for name in ("foo", "bar"):
        (root / "ops" / f"{name}.toml").write_text(
            f'name = "mylib::{name}"\nschema = "(Tensor x) -> Tensor"\n[grad]\nx = "grad"\n'
            '[fake]\nlike = "x"\n[test]\nreference = "x"\n[[test.samples]]\nx = {shape = [2]}\n'
        )


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _raising_for_bar(module, name: str):
    real = getattr(module, name)

    def patched(op, *args, **kwargs):
        if op.name == "bar":
            raise KeyError("boom")
        return real(op, *args, **kwargs)

    return patched


@pytest.mark.parametrize(
    "module, function",
    [
        ("opgen.api.context", "function_context"),  # while computing the op module's variables
        ("opgen.api.decisions", "decide"),  # first read by a project-wide file (_autograd.py)
    ],
)
@pytest.mark.parametrize("generated_before", [False, True])
def test_an_internal_error_names_the_spec_and_writes_nothing(tmp_path, monkeypatch, module, function, generated_before):
    import importlib

    _two_ops(tmp_path)
    if generated_before:  # then both specs change, so that every file would be rendered again
        assert run_cli("generate", cwd=tmp_path).exit_code == 0
        for spec in (tmp_path / "ops").iterdir():
            spec.write_text(spec.read_text().replace('reference = "x"', 'reference = "x * 1"'))
    before = _tree(tmp_path)
    target = importlib.import_module(module)
    monkeypatch.setattr(target, function, _raising_for_bar(target, function))
    result = run_cli("generate", cwd=tmp_path)
    assert result.exit_code == 1
    first = result.output.splitlines()[0]
    assert first == "ops/bar.toml: error: internal error while generating op mylib::bar: KeyError: 'boom'"
    assert "hint: this is a bug in opgen, not in the spec" in result.output
    assert "Traceback (most recent call last):" in result.output  # for the bug report
    assert result.output.rstrip().endswith("KeyError: 'boom'")
    assert "ops/foo.toml" not in result.output
    assert _tree(tmp_path) == before
