"""Names, annotations and the autograd plan computed from a spec."""

from __future__ import annotations

import pytest

from opgen.api import python as py
from opgen.api.autograd import plan_function
from opgen.spec.dialect.parser import parse
from opgen.spec.dialect.types import SchemaType

from _specs import op_from_toml, simple_op

TWO = "x = {shape = [2]}\nw = {shape = [2]}"


@pytest.mark.parametrize(
    "schema_type, expected",
    [
        ("Tensor", "Tensor"),
        ("Tensor?", "Tensor | None"),
        ("Tensor[]", "Sequence[Tensor]"),
        ("int", "int"),
        ("SymInt", "int"),
        ("float", "float"),
        ("bool", "bool"),
        ("str", "str"),
        ("int[]", "Sequence[int]"),
        ("int[2]", "Sequence[int]"),
        ("SymInt[]?", "Sequence[int] | None"),
        ("ScalarType?", "torch.dtype | None"),
        ("Scalar", "float | int | bool"),
    ],
)
def test_python_annotation(schema_type, expected):
    assert py.annotation(parse(f"({schema_type} a) -> ()").args[0].type) == expected


def test_unknown_type_has_no_annotation():
    with pytest.raises(ValueError, match="no Python annotation"):
        py.annotation(SchemaType.base("Generator"))


def test_signature_keeps_kwarg_only_and_defaults():
    op = simple_op('(Tensor x, int[] k=[1,2], *, float alpha=0.5, str mode="a") -> Tensor')
    assert (
        py.signature(op)
        == 'x: Tensor, k: Sequence[int] = (1, 2), *, alpha: float = 0.5, mode: str = "a"'
    )
    assert py.signature(op, annotate=False) == 'x, k=(1, 2), *, alpha=0.5, mode="a"'
    assert py.call_arguments(op) == "x, k, alpha=alpha, mode=mode"


def test_docstring_cannot_be_closed_early():
    text = py.docstring('ends with """ and a \\ and "')
    assert eval(text) == 'ends with """ and a \\ and " '


def _plan(schema, grad, sample=TWO, jvp=None):
    op = simple_op(schema, grad=grad, sample=sample, jvp=jvp)
    return plan_function(op, {"foo": "foo"})


def test_saves_only_shapes_when_only_shapes_are_used():
    plan = _plan(
        "(Tensor x, Tensor w) -> Tensor",
        {"x": "grad.sum_to_size(x.shape)", "w": "grad.sum_to_size(w.shape)"},
    )
    assert "ctx.x_shape = x.shape" in plan.setup_lines
    assert "ctx.w_shape = w.shape" in plan.setup_lines
    assert not any("save_for" in line for line in plan.setup_lines)
    assert "    grad_x = grad.sum_to_size(ctx.x_shape)" in plan.backward_lines


def test_saves_tensors_used_in_full_and_nothing_else():
    plan = _plan("(Tensor x, Tensor w) -> Tensor", {"x": "grad * w"})
    assert "ctx.save_for_backward(w)" in plan.setup_lines
    assert not any(line.startswith("ctx.x") for line in plan.setup_lines)


def test_saves_a_tensor_only_when_a_gradient_that_reads_it_is_asked_for():
    """Note [Saving only what formulas use]: as extension-cpp saves for mymuladd."""
    plan = _plan("(Tensor x, Tensor w) -> Tensor", {"x": "grad * w", "w": "grad * x"})
    assert plan.setup_lines[-3:] == (
        "ctx.save_for_backward(",
        "    x if ctx.needs_input_grad[1] else None, w if ctx.needs_input_grad[0] else None",
        ")",
    )
    assert plan.backward_lines[0] == "x, w = ctx.saved_tensors"


def test_non_tensor_inputs_go_on_ctx_and_get_none_gradients():
    plan = _plan(
        "(Tensor x, float alpha) -> Tensor", {"x": "grad * alpha"}, "x = {shape = [2]}\nalpha = 2.0"
    )
    assert "ctx.alpha = alpha" in plan.setup_lines
    assert plan.backward_lines[-1] == "return grad_x, None"
    assert "    grad_x = grad * ctx.alpha" in plan.backward_lines


def test_result_is_saved_from_output():
    plan = _plan("(Tensor x) -> Tensor", {"x": "grad * result"}, "x = {shape = [2]}")
    assert "ctx.save_for_backward(output)" in plan.setup_lines
    assert "(result,) = ctx.saved_tensors" in plan.backward_lines


def test_formulas_run_only_when_needed():
    plan = _plan("(Tensor x, Tensor w) -> Tensor", {"x, w": "(grad * w, grad * x)"})
    body = "\n".join(plan.backward_lines)
    assert "if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:" in body
    assert "grad_x, grad_w = (grad * w, grad * x)" in body


def test_kwarg_only_inputs_are_inputs_of_the_function():
    """The Function takes every argument positionally; the op gets keyword-only ones by keyword."""
    plan = _plan("(Tensor x, *, float alpha) -> Tensor", {"x": "grad * alpha"}, "x = {shape = [2]}\nalpha = 2.0")
    assert plan.forward_params == "x, alpha"
    assert plan.forward_lines == ("return _op(x, alpha=alpha)",)
    assert plan.setup_lines[:2] == ("x, alpha = inputs", "ctx.alpha = alpha")


def test_tensor_list_inputs_are_spliced_into_the_function():
    """Note [Tensor-list gradients]: the Function gets the lists' lengths, then every tensor."""
    plan = plan_function(
        simple_op("(Tensor[] xs, Tensor s) -> Tensor", grad={"s": "grad"}, sample="xs = [{shape = [2]}]\ns = {shape = [2]}", fake='like = "s"'),
        {},
    )
    assert plan.forward_params == "counts, *flat"
    assert plan.forward_lines[0] == "xs, s = unflatten((0,), counts, flat)"
    assert "needs = unflatten((0,), ctx.counts, ctx.needs_input_grad[1:])" in plan.backward_lines
    assert plan.backward_lines[-1] == "return (None, *flatten((0,), ([None] * len(needs[0]), grad_s))[1:])"
    with_list = plan_function(
        simple_op("(Tensor[] xs) -> Tensor", grad={"xs": "[grad] * len(xs)"}, sample="xs = [{shape = [2]}]", fake='expr = "xs[0].new_empty(xs[0].shape)"'),
        {},
    )
    assert "if any(needs[0]):" in with_list.backward_lines
    assert "grad_xs = [None] * len(needs[0])" in with_list.backward_lines


def test_formulas_call_other_ops_through_their_wrappers():
    from _specs import op_from_toml

    text = 'name = "mylib::foo"\nschema = "(Tensor x) -> Tensor"\n[grad]\nx = "bar(grad, x)"\n[fake]\nlike = "x"\n[test]\n[[test.samples]]\nx = {shape = [2]}\n'
    op = op_from_toml(text, frozenset({"foo", "bar"}))
    assert "    grad_x = _op_bar.bar(grad, x)" in plan_function(op, {"bar": "bar", "foo": "foo"}).backward_lines
    # two overloads share the name: the op packet picks one by the arguments
    assert "    grad_x = torch.ops.mylib.bar(grad, x)" in plan_function(op, {"foo": "foo"}).backward_lines


def test_jvp_saves_for_forward_what_its_formula_reads():
    plan = _plan("(Tensor x, Tensor w) -> Tensor", {"x": "grad * w", "w": "grad * x"}, jvp={"result": "x_t * w.shape[0] + x * w_t"})
    assert "    x if ctx.needs_input_grad[1] else None, w if ctx.needs_input_grad[0] else None" in plan.setup_lines
    assert "ctx.save_for_forward(x)" in plan.setup_lines
    assert "ctx.w_shape = w.shape" in plan.setup_lines
    assert plan.jvp_params == "ctx, x_t, w_t"
    assert plan.jvp_lines == ("(x,) = ctx.saved_tensors", "return x_t * ctx.w_shape[0] + x * w_t")


def test_auto_element_wise_sums_the_grad_formulas_with_tangents():
    plan = _plan(
        "(Tensor x, Tensor? b=None) -> Tensor", {"x": "grad * 2", "b": "grad.sum_to_size(b.shape)"},
        sample="x = {shape = [2]}\nb = {shape = [2]}", jvp={"auto_element_wise": True},
    )
    assert plan.jvp_lines[-4:] == (
        "result_t = (x_t * 2)",
        "if b_t is not None:",
        "    result_t = (b_t.sum_to_size(b.shape)) if result_t is None else result_t + (b_t.sum_to_size(b.shape))",
        "return result_t",
    )


def test_auto_linear_applies_the_op_to_the_tangents():
    plan = _plan("(Tensor x, float alpha) -> Tensor", {"x": "grad * alpha"}, "x = {shape = [2]}\nalpha = 2.0", jvp={"auto_linear": True})
    assert plan.jvp_lines == ("return foo(x_t, ctx.alpha)",)
    assert "ctx.alpha = alpha" in plan.setup_lines


def test_without_formulas_backward_and_jvp_raise():
    op = simple_op("(Tensor x) -> Tensor")
    plan = plan_function(op, {})
    assert plan.backward_lines == (
        'raise RuntimeError("mylib::foo has no gradient formula: add a [grad] table to op.toml")',
    )
    assert plan.jvp_lines[0].startswith("raise RuntimeError(")
    assert plan.setup_lines == ("pass",)


def test_fake_like_is_kept_as_written_and_the_api_derives_the_code():
    op = simple_op(
        "(Tensor x, Tensor y) -> (Tensor, Tensor)",
        fake='like = ["y", "x"]',
        sample="x = {shape = [2]}\ny = {shape = [2]}",
    )
    assert op.fake.like == ("y", "x") and op.fake.expr == ()
    assert py.fake_outputs(op) == ("y.new_empty(y.shape)", "x.new_empty(x.shape)")
    written = simple_op("(Tensor x) -> Tensor", fake='expr = "x.new_empty(3)"')
    assert written.fake.like == () and py.fake_outputs(written) == ("x.new_empty(3)",)


def test_names_of_an_overload_come_from_one_place():
    from _specs import op_from_toml

    op = op_from_toml(
        'name = "mylib::foo.out"\nregistration = "library"\nschema = "(Tensor x) -> Tensor"\n[fake]\nlike = "x"\n[test]\n[[test.samples]]\nx = {shape = [2]}\n'
    )
    assert (op.overload_name, op.registered_name, op.module) == (
        "foo.out",
        "mylib::foo.out",
        "foo_out",
    )
    assert op.full_schema == "foo.out(Tensor x) -> Tensor"
    plain = simple_op("(Tensor x) -> Tensor")
    assert (plain.overload_name, plain.registered_name, plain.module) == (
        "foo",
        "mylib::foo",
        "foo",
    )


def test_cuda_graph_tests_only_for_capturable_kernels() -> None:
    """A CUDA graph replays fixed sizes and refuses host copies: such ops get no capture test."""
    from opgen.api.imports import pt2_testing_names

    base = 'name = "mylib::foo"\nschema = "(Tensor x) -> Tensor"\ndevices = ["cpu", "cuda"]\n'
    test = '[test]\nreference = "x"\n{extra}\n[[test.samples]]\nx = {{shape = [3]}}\n'
    dynamic = '[fake]\nexpr = "x.new_empty((torch.library.get_ctx().new_dynamic_size(),))"\n'
    plain = op_from_toml(base + test.format(extra=""))
    refused = op_from_toml(base + test.format(extra="cuda_graph = false"))
    data_dependent = op_from_toml(base + dynamic + test.format(extra=""))
    assert "check_cuda_graph" in pt2_testing_names(plain)
    assert "check_cuda_graph" not in pt2_testing_names(refused)
    assert "check_cuda_graph" not in pt2_testing_names(data_dependent)
