"""The spec model: schemas round-trip, mutations become alias annotations."""

from __future__ import annotations

import pytest

from opgen.errors import OpgenError

from _specs import op_from_toml, simple_op


@pytest.mark.parametrize(
    "schema, sample, fake",
    [
        ("(Tensor x) -> Tensor", None, None),
        ("(Tensor x, float alpha=1.0) -> Tensor", None, None),
        (
            "(Tensor x, int[] box, SymInt n, Tensor? w=None) -> (Tensor, Tensor)",
            "x = {shape = [2]}\nbox = [1]\nn = 2",
            'like = ["x", "x"]',
        ),
        ('(Tensor x, *, bool flag=False, str mode="a") -> Tensor', None, None),
        (
            "(Tensor[] xs, ScalarType? dtype=None) -> Tensor[]",
            "xs = [{shape = [2]}]",
            'expr = "[xs[0].new_empty(2)]"',
        ),
    ],
)
def test_schema_round_trips(schema, sample, fake):
    extra = {k: v for k, v in (("sample", sample), ("fake", fake)) if v is not None}
    op = simple_op(schema, **extra)
    assert op.schema == schema


def test_mutates_writes_alias_annotations():
    both = "x = {shape = [2]}\nout = {shape = [2]}\nout2 = {shape = [2]}"
    op = simple_op(
        "(Tensor x, Tensor out, Tensor out2) -> ()", mutates=["out", "out2"], fake="", sample=both
    )
    assert op.schema == "(Tensor x, Tensor(a!) out, Tensor(b!) out2) -> ()"
    assert [a.name for a in op.mutated] == ["out", "out2"]


def test_annotation_already_written_is_accepted():
    op = simple_op(
        "(Tensor x, Tensor(a!) out) -> ()",
        mutates=["out"],
        fake="",
        sample="x = {shape = [2]}\nout = {shape = [2]}",
    )
    assert op.schema == "(Tensor x, Tensor(a!) out) -> ()"


def test_annotation_without_mutates_is_derived():
    op = simple_op(
        "(Tensor x, Tensor(a!) out) -> ()", fake="", sample="x = {shape = [2]}\nout = {shape = [2]}"
    )
    assert [a.name for a in op.mutated] == ["out"]


def test_mutates_that_disagrees_with_the_annotations_is_rejected():
    with pytest.raises(OpgenError, match="annotated as written .* but is not in `mutates`"):
        simple_op(
            "(Tensor x, Tensor(a!) out, Tensor! y) -> ()",
            mutates=["y"],
            fake="",
            sample="x = {shape = [2]}\nout = {shape = [2]}\ny = {shape = [2]}",
        )


def test_kwarg_only_and_defaults_are_kept():
    op = simple_op("(Tensor x, *, float alpha=0.5) -> Tensor")
    x, alpha = op.args
    assert not x.kwarg_only and alpha.kwarg_only and alpha.default is not None
    assert (alpha.default.text, alpha.default.value) == ("0.5", 0.5)
    assert op.full_schema == "foo(Tensor x, *, float alpha=0.5) -> Tensor"


def test_grad_formula_targets_several_inputs():
    op = simple_op(
        "(Tensor x, Tensor w) -> Tensor",
        grad={"x, w": "(grad * w, grad * x)"},
        sample="x = {shape = [2]}\nw = {shape = [2]}",
    )
    assert op.grads[0].inputs == ("x", "w")


def test_formula_may_call_other_ops_of_the_library():
    text = """
name = "mylib::crop"
schema = "(Tensor pic, int[] box) -> Tensor"
[grad]
pic = "paste(grad.new_zeros(pic.shape), grad, box[:2])"
[fake]
expr = "pic.new_empty(pic.shape[0], box[3] - box[1], box[2] - box[0])"
[test]
[[test.samples]]
pic = {shape = [1, 4, 4]}
box = [0, 0, 2, 2]
"""
    assert op_from_toml(text, frozenset({"crop", "paste"})).grads[0].inputs == ("pic",)
    with pytest.raises(OpgenError, match="unknown name 'paste'"):
        op_from_toml(text, frozenset({"crop"}))


def test_every_problem_is_reported_at_once():
    text = """
name = "mylib::foo"
schema = "(Tensor x) -> Tensor"
colour = 3
[grad]
x = "grad * y"
[fake]
like = "z"
[test]
[[test.samples]]
x = {shape = [2]}
"""
    with pytest.raises(OpgenError) as info:
        op_from_toml(text)
    messages = [d.message for d in info.value.diagnostics]
    lines = [d.line for d in info.value.diagnostics]
    assert len(messages) == 3, messages
    assert "unknown key 'colour'" in messages[0] and lines[0] == 4
    assert "unknown name 'y'" in messages[1] and lines[1] == 6
    assert "not a tensor input" in messages[2] and lines[2] == 8


@pytest.mark.parametrize(
    "schema, fake, rule",
    [
        ("(Tensor x) -> Tensor", 'like = "x"', "loop"),
        ("(Tensor x) -> (Tensor, Tensor)", 'like = ["x", "x"]', "loop"),
        # torch.vmap returns tensors only: a None or a number output has no batch dim
        ("(Tensor x, int k) -> (Tensor, int)", 'expr = ["x.new_empty(x.shape)", "k"]', "none"),
        ("(Tensor x) -> (Tensor, Tensor?)", 'expr = ["x.new_empty(x.shape)", "None"]', "none"),
        ("(Tensor x) -> Tensor[]", 'expr = "[x.new_empty(x.shape)]"', "none"),
        # torch.library.register_vmap refuses keyword-only tensors
        ("(Tensor x, *, Tensor? w=None) -> Tensor", 'like = "x"', "none"),
        # each sample's output has a size of its own: no stacking them
        (
            "(Tensor x) -> Tensor",
            'expr = "x.new_empty((torch.library.get_ctx().new_dynamic_size(),))"',
            "none",
        ),
    ],
)
def test_the_default_batching_rule_stacks_only_outputs_it_can(schema, fake, rule):
    op = op_from_toml(f'name = "mylib::foo"\nschema = "{schema}"\n[fake]\n{fake}\n')
    assert op.vmap == rule
