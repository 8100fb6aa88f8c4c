"""The argument checks opgen generates (Note [Argument checks]), as text: what each op gets."""

from __future__ import annotations

from opgen.api.arg_checks import (
    cpp_boundary_checks,
    op_variable,
    python_arg_checks,
    python_kernel_checks,
)

from _specs import simple_op


def test_cpp_checks_cover_none_device_expanded_and_overlap():
    op = simple_op(
        "(Tensor x, Tensor(a!) out, Tensor? w) -> ()",
        mutates=["out"],
        fake="",
        sample="x = {shape = [2]}\nout = {shape = [2]}",
    )
    text = "\n".join(cpp_boundary_checks(op, "cpu"))
    for expected in (
        'opgen_checks::present(x.defined(), op, "x");',
        'opgen_checks::on_device(out.is_cpu(), op, "out");',
        "if (w.has_value()) {",
        'opgen_checks::not_expanded(out, op, "out");',
        'opgen_checks::no_partial_overlap(out, x, op, "out", "x");',
        'if (w.has_value()) opgen_checks::no_partial_overlap(out, *w, op, "out", "w");',
    ):
        assert expected in text, text


def test_two_written_arguments_may_not_even_alias_fully():
    op = simple_op(
        "(Tensor(a!) q, Tensor(b!) k) -> ()",
        mutates=["q", "k"],
        fake="",
        sample="q = {shape = [2]}\nk = {shape = [2]}",
    )
    text = "\n".join(cpp_boundary_checks(op, "cpu"))
    assert 'opgen_checks::no_overlap(q, k, op, "q", "k");' in text
    kernel = [c["expression"] for c in python_kernel_checks(op, "torch")]
    assert "q is not k" in kernel


def test_cuda_checks_compare_device_indices():
    op = simple_op("(Tensor x, Tensor y) -> Tensor", sample="x = {shape = [2]}\ny = {shape = [2]}")
    text = "\n".join(cpp_boundary_checks(op, "cuda"))
    assert "y.get_device_index() == x.get_device_index()" in text
    assert "x.is_cuda()" in text


def test_a_parameter_named_op_or_t_keeps_its_name():
    op = simple_op(
        "(Tensor op, Tensor[] t) -> Tensor",
        fake='like = "op"',
        sample="op = {shape = [2]}\nt = [{shape = [2]}]",
    )
    name = op_variable(op)
    assert name != "op"
    lines = cpp_boundary_checks(op, "cpu")
    assert lines[0] == f'constexpr const char* {name} = "mylib::foo";'
    assert not any("for (const auto& t :" in line for line in lines), lines


def test_python_checks_name_the_op_and_argument():
    op = simple_op("(Tensor x, Tensor? y) -> Tensor")
    checks = python_arg_checks(op, "torch")
    assert [c["expression"] for c in checks] == [
        "x is not None",
        "y is None or y.device == x.device",
    ]
    assert "mylib::foo: argument 'x' is None; pass a tensor" in "\n".join(checks[0]["lines"])
