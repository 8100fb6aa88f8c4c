"""The generated tests, run: one python-backend project with an op per autograd situation.

tests/runtime_matrix/ holds the project (opgen.toml, ops/), the kernels written over
the stubs, a pytest plugin that records each test's outcome and gradcheck calls, and
checks of the opgen.testing helpers themselves (copied in as tests/test_harness.py).
The project is generated in-process once per module and its tests run in one
pytest subprocess (compile_backend = "aot_eager" keeps it to seconds).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from opgen.generate import generate

pytestmark = pytest.mark.slow  # runs a generated test suite (torch.compile)

FIXTURE = Path(__file__).parent / "runtime_matrix"
PACKAGE = "rtm_ops"

# test file stem: what the op shows
CASES = {
    "opt_add": "Tensor? b=None with a formula for b; one sample omits b",
    "list_weighted": "Tensor[] xs without a formula, formula for w only",
    "list_scale": "Tensor[] xs with a formula; a sample omits the defaulted alpha",
    "affine_kw": "keyword-only float arguments used in the formula",
    "exp_square": "two outputs: grads[0], grads[1], result0",
    "sum_shape": "formula reads only x.shape; positional defaults, beta given without alpha",
    "scale_tensor": "overload rtm::scale.tensor, registration = library",
    "double_into": "mutating op returning nothing",
    "two_names": "arguments x and x_t: tangents x_tt and x_t_tt in the [jvp] formula",
    "row_sum": 'vmap = "leading" and auto_linear forward mode',
    "harness": "the opgen.testing helpers: binding, missing-sample messages, tolerances",
}

# gradcheck calls each generated gradcheck test must make: one per sample that
# gives the input a tensor requiring grad, plus one through the typed wrapper.
GRADCHECKS = {
    "test_two_names.py::test_gradcheck[cpu-x]": 1 + 1,
    "test_two_names.py::test_gradcheck[cpu-x_t]": 1 + 1,
    "test_row_sum.py::test_gradcheck[cpu-x]": 2 + 1,
    "test_opt_add.py::test_gradcheck[cpu-x]": 2 + 1,
    "test_opt_add.py::test_gradcheck[cpu-b]": 1 + 1,
    "test_list_weighted.py::test_gradcheck[cpu-w]": 1 + 1,
    "test_list_scale.py::test_gradcheck[cpu-xs]": 2 + 1,
    "test_affine_kw.py::test_gradcheck[cpu-x]": 3 + 1,
    "test_exp_square.py::test_gradcheck[cpu-x]": 1 + 1,
    "test_sum_shape.py::test_gradcheck[cpu-x]": 3 + 1,
    "test_scale_tensor.py::test_gradcheck[cpu-x]": 1 + 1,
    "test_scale_tensor.py::test_gradcheck[cpu-s]": 1 + 1,
}


@dataclass(frozen=True)
class MatrixRun:
    returncode: int
    output: str
    outcomes: dict[str, str]
    gradchecks: dict[str, int]
    forward_gradchecks: dict[str, int]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> MatrixRun:
    root = tmp_path_factory.mktemp("runtime_matrix")
    shutil.copy(FIXTURE / "opgen.toml", root / "opgen.toml")
    shutil.copytree(FIXTURE / "ops", root / "ops")
    result = generate(root)
    assert result.written and not result.failed, result.summary()
    for kernel in sorted((FIXTURE / "kernels").glob("*.py")):
        target = root / PACKAGE / "kernels" / kernel.name
        assert target.exists(), f"opgen made no kernel stub {target.name}"
        shutil.copy(kernel, target)
    shutil.copy(FIXTURE / "harness_checks.py", root / "tests" / "test_harness.py")
    shutil.copy(FIXTURE / "gradcheck_counter.py", root / "gradcheck_counter.py")
    report = root / "report.json"
    env = dict(
        os.environ,
        RTM_REPORT=str(report),
        PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "gradcheck_counter",
            "tests",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    empty = {"outcomes": {}, "gradchecks": {}, "forward_gradchecks": {}}
    data = json.loads(report.read_text()) if report.exists() else empty
    strip = lambda nodeid: nodeid.removeprefix("tests/")  # noqa: E731
    return MatrixRun(
        run.returncode,
        run.stdout[-8000:] + run.stderr[-2000:],
        {strip(k): v for k, v in data["outcomes"].items()},
        {strip(k): v for k, v in data["gradchecks"].items()},
        {strip(k): v for k, v in data["forward_gradchecks"].items()},
    )


def test_generated_tests_pass(matrix: MatrixRun):
    assert matrix.returncode == 0, matrix.output


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_case(matrix: MatrixRun, case: str):
    tests = {k: v for k, v in matrix.outcomes.items() if k.startswith(f"test_{case}.py::")}
    assert tests, f"no test of {case} ran ({CASES[case]})\n{matrix.output}"
    failed = sorted(k for k, v in tests.items() if v != "passed")
    assert not failed, f"{case} ({CASES[case]}): {failed} did not pass\n{matrix.output}"


def test_each_gradcheck_test_ran_gradcheck(matrix: MatrixRun):
    ran = {k: v for k, v in matrix.gradchecks.items() if "::test_gradcheck[" in k}
    assert set(ran) | set(GRADCHECKS) == set(
        GRADCHECKS
    ), f"unexpected gradcheck tests: {sorted(set(ran) - set(GRADCHECKS))}"
    generated = {k for k in matrix.outcomes if "::test_gradcheck[" in k}
    assert generated == set(GRADCHECKS), "the generated gradcheck tests are not the expected ones"
    for nodeid, calls in GRADCHECKS.items():
        if matrix.outcomes.get(nodeid) == "passed":
            assert (
                ran.get(nodeid, 0) == calls
            ), f"{nodeid} called gradcheck {ran.get(nodeid, 0)} times, expected {calls}"


def test_each_gradcheck_test_checks_forward_mode_too(matrix: MatrixRun):
    """Every op of the matrix has a [jvp] table: each sample's gradcheck is paired with a
    forward-mode one through the typed wrapper. register_autograd gives the registered op
    no forward mode, so the extra backward gradcheck through the wrapper has no pair."""
    for nodeid, calls in GRADCHECKS.items():
        if matrix.outcomes.get(nodeid) == "passed":
            samples = calls - 1
            assert matrix.forward_gradchecks.get(nodeid, 0) == samples, (
                f"{nodeid} made {matrix.forward_gradchecks.get(nodeid, 0)} forward-mode "
                f"gradchecks, expected one per sample ({samples})"
            )
