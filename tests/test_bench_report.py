"""`opgen bench` without timing anything: ratios, tables, JSON, the [bench] spec and cases."""

from __future__ import annotations

import pytest
import torch

from opgen.bench.cases import CaseError, build_case, size_points
from opgen.bench.report import (
    NOISY,
    OVERHEAD,
    Result,
    best_baseline,
    format_time,
    from_json,
    noisy_warnings,
    op_table,
    overhead_line,
    overhead_table,
    speedup,
    stat_note,
    throughput,
    to_json,
)
from opgen.bench.timing import Timing
from opgen.errors import OpgenError

from _specs import op_from_toml

_SPEC = """
name = "mylib::ln"
schema = "(Tensor x, Tensor weight, float eps=1e-05) -> Tensor"
[grad]
x = "grad * weight"
[fake]
like = "x"
[test]
reference = "x * weight"
[[test.samples]]
x = {shape = [2, 3]}
weight = {shape = [3]}
"""


def _results() -> list[Result]:
    return [
        Result("gelu", "opgen", "1000", 2e-6, bytes=8000.0, derived_bytes=True),
        Result("gelu", "reference", "1000", 4e-6, bytes=8000.0, derived_bytes=True),
        Result("gelu", "native", "1000", 1e-6, bytes=8000.0, derived_bytes=True),
        Result("gelu", "opgen", "10000000", 2e-2, bytes=8e7, derived_bytes=True),
        Result("gelu", "native", "10000000", 2.2e-2, bytes=8e7, derived_bytes=True),
    ]


def test_speedup_is_other_time_over_opgen_time():
    at = _results()[:3]
    assert speedup(at, "opgen", "reference") == pytest.approx(2.0)
    assert speedup(at, "opgen", "native") == pytest.approx(0.5)
    assert speedup(at, "opgen", "missing") is None


def test_throughput_prefers_flops_then_bytes():
    assert throughput(Result("m", "opgen", "1", 0.5, flops=2e9)) == (4.0, "GFLOP/s")
    assert throughput(Result("m", "opgen", "1", 0.5, bytes=1e9)) == (2.0, "GB/s")
    assert throughput(Result("m", "opgen", "1", 0.5)) is None


@pytest.mark.parametrize("seconds, text", [(2.5, "2.5 s"), (0.0123, "12.3 ms"), (2.04e-6, "2.04 µs"), (8.5e-7, "850 ns")])
def test_format_time(seconds, text):
    assert format_time(seconds) == text


def test_op_table_rows_name_the_best_baseline_and_the_ratio_against_it():
    table = op_table(_results())
    lines = table.splitlines()
    assert lines[0].startswith("### gelu (forward; GB/s from input+output bytes")
    assert "vs best = time(fastest baseline) / time(opgen)" in lines[0]
    assert [c.strip() for c in lines[2].split("|")[1:-1]] == [
        "size", "opgen time", "reference time", "native time", "opgen GB/s", "best baseline", "vs best",
    ]
    first = [c.strip() for c in lines[4].split("|")[1:-1]]
    assert first == ["1000", "2 µs (IQR 0%)", "4 µs (IQR 0%)", "1 µs (IQR 0%)", "4.0", "native", "0.50×"]
    last = [c.strip() for c in lines[5].split("|")[1:-1]]
    assert last == ["10000000", "20 ms (IQR 0%)", "–", "22 ms (IQR 0%)", "4.0", "native", "1.10×"]


def test_best_baseline_is_the_fastest_other_implementation_by_the_statistic_shown():
    at = [
        Result("n", "opgen", "1", 2e-6, best=1.0e-6),
        Result("n", "reference", "1", 3e-6, best=2.9e-6),
        Result("n", "compiled", "1", 4e-6, best=1.5e-6),
    ]
    assert best_baseline(at).impl == "reference"
    assert best_baseline(at, "min").impl == "compiled"
    assert best_baseline(at[:1]) is None
    row = [c.strip() for c in op_table(at[:1]).splitlines()[4].split("|")[1:-1]]
    assert row[-2:] == ["–", "–"]


def test_overhead_table_shows_ratio_to_native():
    rows = [
        Result("add (baseline)", "torch.add(a, b)", "1", 1e-6, best=0.5e-6, kind="native"),
        Result("add (baseline)", "torch.ops handle", "1", 2.5e-6, best=2e-6, kind="python library"),
    ]
    cells = lambda table: [[c.strip() for c in line.split("|")[1:-1]] for line in table.splitlines()[2:]]  # noqa: E731
    assert cells(overhead_table(rows))[1] == ["add (baseline)", "python library", "torch.ops handle", "2.5 µs (IQR 0%)", "2.50×"]
    assert cells(overhead_table(rows, "min"))[1] == ["add (baseline)", "python library", "torch.ops handle", "2 µs (median +25%)", "4.00×"]


def _smallest(opgen: float, native: float, one_opgen: list[float], one_native: list[float]) -> list[Result]:
    ones = {"baseline": "native", "opgen": one_opgen, "base": one_native}
    return [
        Result("mm", "opgen", "128", opgen, best=opgen * 0.9, extra={OVERHEAD: ones}),
        Result("mm", "native", "128", native, best=native * 0.9),
        Result("mm", "compiled", "128", native * 2, best=native * 2),
        Result("mm", "opgen", "1024", 1e-3),
        Result("mm", "native", "1024", 1e-3),
    ]


def test_the_smallest_size_sets_its_gap_against_the_overhead_timed_with_it():
    within = overhead_line(_smallest(30e-6, 23e-6, [9e-6, 8e-6], [1e-6, 1e-6]))
    assert within == (
        "smallest size (128): opgen 7 µs behind native; call overhead 8 µs (opgen − native on "
        "1-element inputs, timed in the same turns): within it"
    )
    over = overhead_line(_smallest(30e-6, 20e-6, [9e-6, 6e-6], [1e-6, 1e-6]))
    assert over is not None and over.endswith("call overhead 8 µs (opgen − native on 1-element inputs, timed in the same turns): over it by 2 µs")
    # --stat min: the fastest blocks of both sizes (27 - 18 = 9 µs against 6 - 1 = 5 µs)
    assert overhead_line(_smallest(30e-6, 20e-6, [9e-6, 6e-6], [1e-6, 1e-6]), "min").endswith("over it by 4 µs")  # type: ignore[union-attr]
    ahead = overhead_line(_smallest(20e-6, 25e-6, [9e-6, 8e-6], [1e-6, 1e-6]))
    assert ahead is not None and "opgen 5 µs ahead of native" in ahead and ahead.endswith("within it")
    assert overhead_line(_results()) is None  # no 1-element calls timed with this group
    # a reference slower than opgen on 1-element inputs leaves a negative overhead
    cheaper = overhead_line(_smallest(30e-6, 40e-6, [9e-6, 8e-6], [11e-6, 10e-6]))
    assert cheaper is not None and "call overhead −2 µs" in cheaper and cheaper.endswith("within it")


def test_each_figure_shows_its_spread_and_noisy_ones_are_marked():
    """A busy machine once printed 194x for an op that is 0.7-0.9x: the spread and a warning say when not to trust a figure."""
    quiet = Result("gelu", "opgen", "1000", 2e-6, best=1.9e-6, iqr=0.1e-6, disagreement=0.05)
    busy = Result("gelu", "native", "1000", 4e-6, best=1e-6, iqr=2e-6, disagreement=0.5)
    table = op_table([quiet, busy])
    row = [c.strip() for c in table.splitlines()[4].split("|")[1:-1]]
    assert row[1:3] == ["2 µs (IQR 5%)", "4 µs (IQR 50%)*"] and row[-1] == "2.00×*"
    assert [c.strip() for c in op_table([quiet, busy], "min").splitlines()[4].split("|")[1:-1]][1:3] == [
        "1.9 µs (median +5%)",
        "1 µs (median +300%)*",
    ]
    (warning,) = noisy_warnings([quiet, busy])
    assert warning.startswith("gelu native at 1000 (forward): timing blocks and rounds disagree by 50%")
    assert "median timing block of the least disturbed of 3 rounds" in stat_note("median")
    assert "fastest timing block" in stat_note("min") and f"more than {NOISY:.0%}" in stat_note("min")


def test_rounds_that_disagree_make_a_timing_noisy():
    steady = Timing(1e-6, 0.9e-6, 0.05e-6, 10, 1000, (1e-6, 1.05e-6, 1.02e-6))
    assert steady.disagreement == pytest.approx(0.05)
    jumpy = Timing(1e-6, 0.9e-6, 0.05e-6, 10, 1000, (1e-6, 2e-6, 1e-6))  # one round disturbed
    assert jumpy.disagreement == pytest.approx(1.0)


def test_json_round_trip():
    meta = {"threads": 2, "torch": torch.__version__}
    text = to_json(_results(), meta)
    assert from_json(text) == (meta, _results())


def test_bench_table_is_validated_with_lines():
    bad = _SPEC + '[bench]\nsizes = [0]\ninputs = {y = ["n"], x = "n"}\nnative = "q(x)"\nspeed = 1\n'
    with pytest.raises(OpgenError) as info:
        op_from_toml(bad)
    messages = " | ".join(d.message for d in info.value.diagnostics)
    for expected in ("bench.sizes entry 0", "unknown argument 'y'", "bench.inputs.x must be a shape template", "unknown name 'q'", "unknown key 'bench.speed'"):
        assert expected in messages


def test_cases_from_shape_templates_and_defaults():
    op = op_from_toml(_SPEC + '[bench]\nsizes = [{n = 4, d = 3}]\ninputs = {x = ["n", "d"], weight = ["d"]}\nnative = "x * weight"\nbackward = true\n')
    assert size_points(op, quick=False) == [{"d": 3, "n": 4}]
    fn = lambda x, weight, eps=1e-5: x * weight  # noqa: E731
    case = build_case(op, fn, {}, {"n": 4, "d": 3}, "cpu", backward=False)
    assert case.globals["x"].shape == (4, 3) and case.globals["eps"] == 1e-05
    assert [i.name for i in case.impls] == ["opgen", "reference", "native"]
    assert case.bytes == 4 * (12 + 3 + 12) and case.derived_bytes and case.numel == 12
    back = build_case(op, fn, {}, {"n": 4, "d": 3}, "cpu")
    assert back.mode == "forward+backward" and back.impls[0].stmt.startswith("_grad((_op(x, weight, eps))")
    for impl in back.impls:
        eval(impl.stmt, back.globals)


def test_default_inputs_need_a_template_for_several_variables():
    op = op_from_toml(_SPEC + "[bench]\nsizes = [{n = 4, d = 3}]\n")
    with pytest.raises(CaseError, match="add bench.inputs.x"):
        build_case(op, None, {}, {"n": 4, "d": 3}, "cpu")
    plain = op_from_toml(_SPEC)
    assert size_points(plain, quick=True) == [{"n": 256}]


def test_bench_dtypes_are_validated_with_lines():
    both = _SPEC + '[bench]\ndtype = "float32"\ndtypes = ["float64"]\n'
    unknown = _SPEC + '[bench]\ndtypes = ["float32", "float128"]\n'
    empty = _SPEC + "[bench]\ndtypes = []\n"
    for text, expected in (
        (both, "bench.dtype and bench.dtypes both give the dtype"),
        (unknown, "unknown dtype 'float128'"),
        (empty, "bench.dtypes must be a non-empty list"),
    ):
        with pytest.raises(OpgenError) as info:
            op_from_toml(text)
        assert expected in " | ".join(d.message for d in info.value.diagnostics), text


def test_each_bench_dtype_is_a_case_labelled_with_it():
    op = op_from_toml(_SPEC + '[bench]\nsizes = [4]\ninputs = {x = ["n"], weight = ["n"]}\ndtypes = ["float64", "bfloat16"]\n')
    assert op.bench.dtypes == ("float64", "bfloat16")
    fn = lambda x, weight, eps=1e-5: x * weight  # noqa: E731
    first = build_case(op, fn, {}, {"n": 4}, "cpu", backward=False)
    other = build_case(op, fn, {}, {"n": 4}, "cpu", backward=False, dtype="bfloat16")
    assert first.globals["x"].dtype == torch.float64 and first.size_label == "4 float64"
    assert other.globals["x"].dtype == torch.bfloat16 and other.size_label == "4 bfloat16"
    single = op_from_toml(_SPEC + '[bench]\nsizes = [4]\ninputs = {x = ["n"], weight = ["n"]}\ndtype = "float64"\n')
    case = build_case(single, fn, {}, {"n": 4}, "cpu", backward=False)
    assert case.globals["x"].dtype == torch.float64 and case.size_label == "4"
