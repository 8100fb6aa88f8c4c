"""`opgen bench` baselines (Note [Bench baselines]): torch.compile of the reference, the
original library's op where it imports, and the host line every figure needs."""

from __future__ import annotations

import pytest
import torch

from opgen.bench.cases import BASELINES, build_case
from opgen.bench.host import host, isa_names
from opgen.errors import OpgenError
from opgen.spec.bench import original_modules
from opgen.spec.expr import ExprProblem

from _specs import op_from_toml

_SPEC = """
name = "mylib::scale"
schema = "(Tensor x, Tensor weight) -> Tensor"
[grad]
x = "grad * weight"
[fake]
like = "x"
[test]
reference = "x * weight"
[[test.samples]]
x = {shape = [2, 3]}
weight = {shape = [3]}
[bench]
sizes = [4]
inputs = {x = ["n"], weight = ["n"]}
native = "torch.mul(x, weight)"
"""


def _fn(x, weight):
    return x * weight


def _impls(case) -> list[str]:
    return [i.name for i in case.impls]


def test_original_imports_the_modules_it_reaches_attributes_through():
    known = {"x", "weight", "torch", "F", "math"}
    assert original_modules("torchvision.ops.nms(x, weight, 0.5)", known) == ("torchvision",)
    assert original_modules("torch.mul(x, weight)", known) == ()
    assert original_modules("apex.a(x) + xformers.ops.b(weight)", known) == ("apex", "xformers")


@pytest.mark.parametrize(
    "text, message",
    [
        ("torchvision.ops.nms(det, weight, 0.5)", "unknown name 'det'"),
        ("torchvision.ops._private(x)", "private attribute '_private'"),
        ("torchvision.os.system('ls')", "reaches outside the op"),
    ],
)
def test_original_refuses_typos_and_what_every_expression_refuses(text, message):
    with pytest.raises(ExprProblem, match=message):
        original_modules(text, {"x", "weight", "torch"})


def test_a_bad_original_is_an_error_at_its_line():
    text = _SPEC + 'original = "torchvision.ops.nms(det, weight, 0.5)"\n'
    with pytest.raises(OpgenError) as info:
        op_from_toml(text)
    (diagnostic,) = info.value.diagnostics
    assert "unknown name 'det'" in diagnostic.message
    assert diagnostic.line == text.splitlines().index(text.splitlines()[-1]) + 1


def test_an_original_that_imports_is_timed_and_one_that_does_not_is_a_note():
    op = op_from_toml(_SPEC + 'original = "operator.mul(x, weight)"\n')
    case = build_case(op, _fn, {}, {"n": 4}, "cpu", backward=False)
    assert _impls(case) == ["opgen", "reference", "native", "original"] and not case.notes
    x, weight = case.globals["x"], case.globals["weight"]
    assert torch.equal(eval(case.impls[-1].stmt, case.globals), x * weight)

    missing = op_from_toml(_SPEC + 'original = "no_such_module_here.mul(x, weight)"\n')
    case = build_case(missing, _fn, {}, {"n": 4}, "cpu", backward=False)
    assert _impls(case) == ["opgen", "reference", "native"]
    (note,) = case.notes
    assert note.startswith("scale original: no_such_module_here does not import here")
    assert "install it to compare with `no_such_module_here.mul(x, weight)`" in note


def test_the_compiled_reference_is_a_baseline_only_when_asked_and_a_reference_exists():
    op = op_from_toml(_SPEC)
    plain = build_case(op, _fn, {}, {"n": 4}, "cpu", backward=False)
    assert _impls(plain) == ["opgen", "reference", "native"]
    case = build_case(op, _fn, {}, {"n": 4}, "cpu", backward=False, compiled=True)
    assert _impls(case) == ["opgen", "reference", "compiled", "native"]
    assert case.impls[2].stmt == "_compiled(x, weight)"
    assert set(_impls(case)[1:]) <= set(BASELINES)
    no_reference = op_from_toml(_SPEC.replace('reference = "x * weight"\n', ""))
    case = build_case(no_reference, _fn, {}, {"n": 4}, "cpu", backward=False, compiled=True)
    assert _impls(case) == ["opgen", "native"]


@pytest.mark.slow  # Inductor compiles C++ (several seconds)
def test_the_compiled_reference_computes_the_reference_forward_and_backward():
    op = op_from_toml(_SPEC)
    case = build_case(op, _fn, {}, {"n": 4}, "cpu", backward=False, compiled=True)
    x, weight = case.globals["x"], case.globals["weight"]
    assert torch.allclose(eval(case.impls[2].stmt, case.globals), x * weight)
    back = build_case(op, _fn, {}, {"n": 4}, "cpu", backward=True, compiled=True)
    (grad,) = eval(back.impls[2].stmt, back.globals)
    assert torch.allclose(grad, back.globals["_gout"][0] * back.globals["weight"])
    torch._dynamo.reset()


def test_the_cpu_clock_leaves_out_the_time_the_process_does_not_run():
    """Note [Bench clocks]: a statement that waits (as an op does while another process holds
    its core) takes wall-clock time but almost no CPU time."""
    from opgen.bench.timing import time_stmt

    wall = time_stmt("time.sleep(0.005)", {"time": __import__("time")}, 0.05, 1)
    cpu = time_stmt("time.sleep(0.005)", {"time": __import__("time")}, 0.05, 1, clock="cpu")
    assert wall.best >= 0.004 and cpu.best < 0.001


def test_host_names_the_simd_families_and_the_load():
    assert isa_names({"avx2", "fma", "avx512f", "avx512bw", "amx_tile", "amx_bf16"}) == [
        "AVX2",
        "AVX-512",
        "AMX",
    ]
    assert isa_names({"sse4_2"}) == []
    machine = host()
    line = machine.line()
    assert line.startswith("host: ") and "load average" in line
    assert (
        machine.torch_isa in line and machine.as_dict()["torch_cpu_capability"] == machine.torch_isa
    )
