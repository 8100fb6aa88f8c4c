"""Size-like integer arguments: the warnings that suggest SymInt, and the generated
dynamic-shape test that fails while an `int` size makes torch.compile recompile."""

from __future__ import annotations

from pathlib import Path

import pytest

from opgen.generate import generate
from opgen.scaffold.new_op import new_op

from _support import run_generated_tests

_CONFIG = """\
[project]
namespace = "dyn"
package = "dyn_ops"

[options]
backend = "python"
compile_backend = "aot_eager"
"""

# The same op twice: its output's last dim is `n`, declared int in one schema, SymInt in the other.
_SPEC = """\
name = "dyn::{name}"
schema = "(Tensor x, {type} n) -> Tensor"
devices = ["cpu"]

[fake]
expr = "x.new_empty(x.shape[0], n)"

[test]
reference = "x.sum(-1, keepdim=True).expand(x.shape[0], n)"

[[test.samples]]
x = {{shape = [3, 4]}}
n = 5
"""

_KERNEL = """\
from torch import Tensor


def {name}(x: Tensor, n: int) -> Tensor:
    return x.sum(-1, keepdim=True).expand(x.shape[0], n).clone()
"""

# An op returning a size as `int`: torch.compile specializes on it.
_ROWS = """\
name = "dyn::rows"
schema = "(Tensor x) -> (Tensor, int)"
devices = ["cpu"]

[fake]
expr = ["x.new_empty(x.shape)", "x.shape[0]"]

[test]
reference = "(x * 2, x.shape[0])"

[[test.samples]]
x = {shape = [3, 4]}
"""

_ROWS_KERNEL = """\
from torch import Tensor


def rows(x: Tensor) -> tuple[Tensor, int]:
    return x * 2, x.shape[0]
"""


def _project(root: Path) -> dict[str, str]:
    """Write the project; returns each op's spec text."""
    (root / "opgen.toml").write_text(_CONFIG)
    (root / "ops").mkdir()
    specs = {
        name: _SPEC.format(name=name, type=type_)
        for name, type_ in (("pad_int", "int"), ("pad_symint", "SymInt"))
    }
    for name, text in specs.items():
        (root / "ops" / f"{name}.toml").write_text(text)
    return specs


def test_generate_warns_where_an_int_sets_the_output_shape_and_keeps_the_spec(tmp_path: Path):
    specs = _project(tmp_path)
    result = generate(tmp_path)
    assert result.written and not result.failed, result.summary()
    shown = [w.format(tmp_path) for w in result.spec_warnings]
    assert len(shown) == 1, shown
    line = specs["pad_int"].splitlines().index('expr = "x.new_empty(x.shape[0], n)"') + 1
    assert shown[0].startswith(f"ops/pad_int.toml:{line}: warning: argument 'n' is an int"), shown
    assert "declare it SymInt n in the schema" in shown[0]
    for name, text in specs.items():
        assert (tmp_path / "ops" / f"{name}.toml").read_text() == text  # never rewritten


def test_a_run_that_skips_everything_still_warns(tmp_path: Path):
    """Note [Generate cache]: a run where nothing changed takes every spec's model from the
    cache without validating it, yet the warnings about the specs are printed as on the run
    that validated them."""
    _project(tmp_path)
    first = generate(tmp_path)
    generate(tmp_path)
    replayed = generate(tmp_path)
    assert {c.action.value for c in replayed.changes} == {"unchanged"}
    assert [w.format(tmp_path) for w in replayed.spec_warnings] == [
        w.format(tmp_path) for w in first.spec_warnings
    ]
    assert len(replayed.spec_warnings) == 1
    check = generate(tmp_path, check=True)
    assert [w.format(tmp_path) for w in check.spec_warnings] == [
        w.format(tmp_path) for w in first.spec_warnings
    ]


def test_opgen_new_warns_for_an_int_argument_and_keeps_the_schema(tmp_path: Path):
    made = new_op(tmp_path, "dyn::pad", "(Tensor x, int n) -> Tensor")
    warnings = [w.format(made.root) for w in made.generated.spec_warnings]
    assert any(
        w.startswith("ops/pad.toml:") and "declare it SymInt" in w for w in warnings
    ), warnings
    assert '"(Tensor x, int n) -> Tensor"' in (made.root / made.spec).read_text()
    plain = new_op(tmp_path / "other", "dyn::scale", "(Tensor x, float alpha) -> Tensor")
    assert not plain.generated.spec_warnings


@pytest.mark.slow  # runs the generated tests (torch.compile)
def test_generated_dynamic_shape_test_fails_for_an_int_size(tmp_path: Path):
    _project(tmp_path)
    assert generate(tmp_path).written
    for name in ("pad_int", "pad_symint"):
        (tmp_path / "dyn_ops" / "kernels" / f"{name}.py").write_text(_KERNEL.format(name=name))
    (tmp_path / "ops" / "rows.toml").write_text(_ROWS)
    assert generate(tmp_path).written
    (tmp_path / "dyn_ops" / "kernels" / "rows.py").write_text(_ROWS_KERNEL)
    # --show-capture=no: torch's DEBUG trace records would push the messages out of the tail
    output = run_generated_tests(
        tmp_path, "--tb=short", "--show-capture=no", "-k", "test_dynamic_shapes or test_export"
    )
    assert "3 failed, 3 passed" in output, output
    assert "FAILED tests/test_pad_int.py::test_dynamic_shapes" in output, output
    assert "compiled 3 frames for 3 sizes: n is int in the schema" in output, output
    assert "FAILED tests/test_rows.py::test_dynamic_shapes" in output, output
    assert "compiled 3 frames for 3 sizes: return 1 is int in the schema" in output, output
    assert "FAILED tests/test_rows.py::test_export" in output, output
    assert "torch.export cannot keep dim 0 of ops/rows.toml's sample dynamic" in output, output


def test_an_int_that_sets_only_a_number_return_is_no_size():
    """`-> (Tensor, int)`: the int return's fake expression sets a value, not a shape, so its
    argument is neither warned about nor grown by the dynamic-shape test; one read by the
    tensor's expression is."""
    from opgen.spec.warnings import size_arguments, spec_warnings

    from _specs import op_from_toml

    op = op_from_toml(
        'name = "mylib::count"\n'
        'schema = "(Tensor x, int n, int k) -> (Tensor, int)"\n'
        "[fake]\n"
        'expr = ["x.new_empty((x.shape[0], n))", "k"]\n'
    )
    assert size_arguments(op) == ["n"]
    assert [w.message.split(" is ")[0] for w in spec_warnings(op)] == ["argument 'n'"]


@pytest.mark.parametrize(
    "returns, expr, warned",
    [
        # torch.compile specializes on a number the op returns from a size
        ("(Tensor, int)", '["x.new_empty(x.shape)", "x.shape[0]"]', ["return 1 is an int"]),
        (
            "(Tensor t, float half)",
            '["x.new_empty(x.shape)", "x.numel() / 2"]',
            ["return half is a float"],
        ),
        ("(Tensor, int[])", '["x.new_empty(x.shape)", "list(x.shape)"]', ["return 1 is an int[]"]),
        # symbolic in the schema, or not from a size, or a comparison (a guard, no specialization)
        ("(Tensor, SymInt)", '["x.new_empty(x.shape)", "x.shape[0]"]', []),
        ("(Tensor, SymInt[])", '["x.new_empty(x.shape)", "list(x.shape)"]', []),
        ("(Tensor, int)", '["x.new_empty(x.shape)", "x.dim()"]', []),
        ("(Tensor, bool)", '["x.new_empty(x.shape)", "x.numel() > 0"]', []),
    ],
)
def test_a_number_returned_from_a_size_is_warned(returns: str, expr: str, warned: list[str]):
    from opgen.spec.warnings import spec_warnings

    from _specs import op_from_toml

    op = op_from_toml(
        f'name = "mylib::sized"\nschema = "(Tensor x) -> {returns}"\n[fake]\nexpr = {expr}\n'
    )
    messages = [w.message for w in spec_warnings(op)]
    assert [m.split(" computed from")[0] for m in messages] == warned, messages
