"""Helpers of the C++ tests: run the opgen CLI in a subprocess and make small C++ projects."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ALL_TYPES_STABLE = (
    "(Tensor x, Tensor? y, Tensor[] ts, int n, SymInt s, float a, bool b, str st, int[] il, SymInt[] sl, "
    "float[] fl, bool[] bl, ScalarType dt, Device dev, int? on, int[]? oil, float? of, str? ostr, ScalarType? odt, "
    "Tensor?[] ots, Tensor[]? olt) -> (Tensor, Tensor)"
)
ALL_TYPES_CLASSIC = ALL_TYPES_STABLE.replace(
    "Tensor[]? olt)", "Tensor[]? olt, Scalar sc, Scalar? osc, (int, SymInt)? tup)"
)
ALL_RETURNS = (
    "(Tensor x) -> (Tensor, Tensor?, Tensor[], int, SymInt, float, bool, str, str[], ScalarType)"
)


def opgen(
    *args: str, cwd: Path, check: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "opgen", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"opgen {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def python(code: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def types_project(root: Path, target: str) -> Path:
    """A project with one op taking every schema type the target carries, plus list and void returns."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "opgen.toml").write_text(
        f'[project]\nnamespace = "typ"\npackage = "typ"\n\n[options]\nbackend = "cpp"\ncpp_target = "{target}"\n'
    )
    schema = ALL_TYPES_STABLE if target == "stable" else ALL_TYPES_CLASSIC
    opgen("new", "typ::alltypes", "--devices", "cpu,cuda", "--schema", schema, cwd=root)
    opgen(
        "new",
        "typ::listret",
        "--devices",
        "cpu,cuda",
        "--schema",
        "(Tensor x) -> Tensor[]",
        cwd=root,
    )
    opgen(
        "new",
        "typ::outop",
        "--devices",
        "cpu,cuda",
        "--schema",
        "(Tensor x, Tensor(a!) out) -> ()",
        cwd=root,
    )
    opgen("new", "typ::allrets", "--devices", "cpu,cuda", "--schema", ALL_RETURNS, cwd=root)
    if target == "classic":
        spec = root / "ops" / "listret.toml"
        spec.write_text(
            spec.read_text().replace('backend = "cpp"', 'backend = "cpp"\npybind = true')
        )
        opgen("generate", cwd=root)
    return root


CALL_ALL_TYPES = """
import torch, typ
x = torch.randn(3)
calls = {
    "alltypes": lambda: torch.ops.typ.alltypes(x, None, [x], 3, 4, 1.0, True, "hi", [1, 2], [1, 2], [1.0, 2.0], [True, False],
        torch.float32, torch.device("cpu"), None, [1], 2.0, "a", None, [x, None], None%s),
    "listret": lambda: torch.ops.typ.listret(x),
    "outop": lambda: torch.ops.typ.outop(x, torch.empty(3)),
    "allrets": lambda: torch.ops.typ.allrets(x),
}
for name, call in calls.items():
    try:
        call()
    except RuntimeError as exc:
        assert "typ::%%s is not implemented on CPU" %% name in str(exc), str(exc)
    print("unboxed", name)
"""
