"""The sample language end to end without building: a spec's [[test.samples]] are written into
the generated tests and `materialize` (opgen.testing) makes the arguments they say.
"""

from __future__ import annotations

import re
import textwrap
import warnings
from pathlib import Path
from types import ModuleType

import pytest
import torch

import opgen.testing as testing
from opgen.testing import _samples

from _support import run_cli

SPEC = """
name = "lang::take"
schema = "(Tensor values, Tensor offsets, Tensor[] boxes, Tensor?[] maybe, Tensor? bias, int[] sizes, ScalarType dtype, Device device, (int, int)? pair=None, str? note=None) -> Tensor"
backend = "python"

[fake]
like = "values"

[[test.samples]]
values = {shape = [3, 4], sorted = true}
offsets = {shape = [6], dtype = "int64", offsets = true, low = 1, high = 3}
boxes = [{values = [[0, 0, 10, 10], [1, 1, 11, 11]]}, {values = [1, 2], dtype = "int32", noncontiguous = true}]
maybe = [{none = true}, {shape = [2], low = 5, high = 6}]
bias = {none = true}
sizes = [2, 3]
dtype = "float64"
device = "cpu"
pair = [1, 7]
note = {none = true}

[[test.samples]]
values = {shape = [2]}
offsets = {values = [0, 2, 2]}
boxes = []
maybe = []
bias = {shape = [2]}
sizes = []
dtype = "int32"
device = "cpu"
note = "n"
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> tuple[ModuleType, list[dict]]:
    root = tmp_path_factory.mktemp("lang")
    (root / "ops").mkdir()
    (root / "opgen.toml").write_text('[project]\nnamespace = "lang"\npackage = "lang"\n')
    (root / "ops" / "take.toml").write_text(textwrap.dedent(SPEC).lstrip())
    result = run_cli("generate", cwd=root)
    assert result.exit_code == 0, result.output
    test = (root / "tests" / "test_take.py").read_text()
    block = re.search(r"^SAMPLES = \[\n.*?^\]\n", test, re.M | re.S)
    assert block, test
    scope = {"TensorSpec": testing.TensorSpec, "torch": torch}
    exec(block.group(0), scope)
    assert "check_optional_coverage" in test and "check_dtype_coverage(SAMPLES, DTYPES" in test
    return _samples, scope["SAMPLES"]


def test_every_value_kind_is_materialized_as_written(generated) -> None:
    module, samples = generated
    first, second = module.materialize(samples, "cpu", torch.float32, ["values", "boxes"])
    assert first["values"].requires_grad and (first["values"].diff(dim=-1) >= 0).all()
    offsets = first["offsets"]
    assert offsets.dtype == torch.int64 and offsets[0] == 0 and offsets.shape == (6,)
    assert ((offsets.diff() >= 1) & (offsets.diff() <= 2)).all()  # lengths in [low, high)
    boxes, ints = first["boxes"]
    assert boxes.tolist() == [[0, 0, 10, 10], [1, 1, 11, 11]] and boxes.dtype == torch.float32
    assert ints.tolist() == [1, 2] and ints.dtype == torch.int32 and not ints.is_contiguous()
    maybe = first["maybe"]
    assert maybe[0] is None and ((maybe[1] >= 5) & (maybe[1] <= 6)).all()
    assert first["bias"] is None and first["note"] is None
    assert (first["sizes"], first["dtype"], first["pair"]) == ([2, 3], torch.float64, (1, 7))
    assert first["device"] == "cpu"
    assert second["offsets"].tolist() == [0.0, 2.0, 2.0]  # values without dtype: the test's
    assert second["bias"].shape == (2,) and second["note"] == "n" and "pair" not in second
    assert second["boxes"] == [] and second["dtype"] == torch.int32


def test_the_same_samples_give_the_same_tensors(generated) -> None:
    module, samples = generated
    again = list(module.materialize(samples, "cpu", torch.float32))
    for a, b in zip(module.materialize(samples, "cpu", torch.float32), again, strict=True):
        torch.testing.assert_close(a["values"], b["values"])


def test_coverage_names_which_samples_gave_each_optional(generated) -> None:
    module, samples = generated
    lines = module.optional_coverage(samples, ("bias", "pair", "note"))
    assert lines["bias"] == "bias: given in samples [2], None in samples [1]"
    assert lines["pair"] == "pair: given in samples [1], None in samples [2]"


def test_an_optional_path_no_sample_runs_is_a_warning(generated) -> None:
    module, samples = generated
    # both paths
    testing.check_optional_coverage(samples, optional=("bias", "pair"), spec="ops/take.toml")
    with pytest.warns(
        testing.OptionalPathWarning,
        match=r"(?s)ops/take.toml.*bias: given in "
        r"samples none, None in samples \[1\]\n.*name = \{none = true\}",
    ):
        testing.check_optional_coverage(
            samples[:1], optional=("bias", "pair"), spec="ops/take.toml"
        )


def test_coverage_names_which_samples_hold_each_dtype(generated) -> None:
    module, samples = generated
    lines = module.dtype_coverage(samples, (torch.float32, torch.int32))
    assert lines["float32"] == "float32: in samples [1, 2]"
    assert lines["int32"] == "int32: in samples [1, 2]"  # a sample's own int32, then the test's
    pinned = [
        {"x": module.TensorSpec((2,), dtype="float32"), "i": module.TensorSpec((1,), "int64")}
    ]
    assert module.dtype_coverage(pinned, (torch.float16,)) == {
        "float16": "float16: in samples none (their tensors are float32, int64)"
    }


def test_a_dtype_no_sample_holds_is_a_warning() -> None:
    samples = [{"x": testing.TensorSpec((2,)), "i": testing.TensorSpec((1,), dtype="int64")}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        testing.check_dtype_coverage(samples, (torch.float32, torch.int64), spec="ops/take.toml")

    def ignores_dtype(device: str, dtype: torch.dtype) -> list[dict]:
        return [{"x": torch.ones(2, device=device)}]

    with pytest.warns(
        testing.DtypeCoverageWarning,
        match=r"(?s)ops/take.toml.*bfloat16: in samples none \(their tensors are float32\)",
    ):
        testing.check_dtype_coverage([ignores_dtype], (torch.bfloat16,), spec="ops/take.toml")
    assert issubclass(testing.DtypeCoverageWarning, testing.CoverageWarning)
    assert issubclass(testing.OptionalPathWarning, testing.CoverageWarning)


def test_flatten_opens_lists_and_tuples_and_keeps_none(generated) -> None:
    module, _ = generated
    t = torch.ones(1)
    assert module.flatten((t, [t, None], 3, "s")) == [t, t, None, 3, "s"]
    assert module.tensors_of((t, [None, t], 2)) == [t, t]


def test_the_helpers_module_is_the_users_it_stays_when_no_spec_names_it(tmp_path: Path) -> None:
    (tmp_path / "ops").mkdir()
    (tmp_path / "opgen.toml").write_text('[project]\nnamespace = "hh"\npackage = "hh"\n')
    spec = tmp_path / "ops" / "foo.toml"
    spec.write_text(
        'name = "hh::foo"\nschema = "(Tensor x) -> Tensor"\nbackend = "python"\n'
        '[fake]\nlike = "x"\n[test]\nreference_from = "foo_reference"\n'
    )
    assert run_cli("generate", cwd=tmp_path).exit_code == 0
    helpers = tmp_path / "hh" / "testing_helpers.py"
    text = helpers.read_text()
    assert "def foo_reference(x) -> Any:" in text and "# opgen: placeholder" in text
    mine = text.replace(text[text.index("    raise NotImplementedError") :], "    return x * 2\n")
    helpers.write_text(mine)
    spec.write_text(spec.read_text().replace('reference_from = "foo_reference"', 'reference = "x"'))
    result = run_cli("generate", cwd=tmp_path)
    assert result.exit_code == 0 and "kept" in result.output, result.output
    assert helpers.read_text() == mine
    spec.write_text(spec.read_text() + '\n[bench]\ninputs_from = "foo_inputs"\n')
    assert run_cli("generate", cwd=tmp_path).exit_code == 0
    merged = helpers.read_text()
    assert (
        "    return x * 2\n" in merged
        and "def foo_inputs(device: str, dtype: torch.dtype" in merged
    )
