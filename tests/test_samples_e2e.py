"""Real operators' schemas, verbatim, tested with what they need: the generated tests of a fresh
project pass with correct kernels and fail with deliberately wrong ones.

- FBGEMM's `dense_to_jagged` (`-> (Tensor, Tensor[])`, with a gradient) and
  `jagged_to_padded_dense`, with real offsets (`offsets = true`, and exact `values`) and the
  optional `total_L` both given and left out;
- vLLM's `rotary_embedding` (`Tensor! query, Tensor!? key`) with key given and `{none = true}`,
  checked against a reference of `testing_helpers.py`;
- torchvision's `nms` with real overlapping boxes from a generator of `testing_helpers.py` and a
  reference with a loop;
- an op taking a value of every non-tensor schema type and returning `(Tensor, Tensor?, int)`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _cpp_support import opgen

pytestmark = pytest.mark.slow  # builds a fresh project and runs its generated tests twice

PLACEHOLDER = re.compile(r"^[ \t]*raise .*# opgen: placeholder$", re.M)

SPECS = {
    "dense_to_jagged": """
        name = "real::dense_to_jagged"
        schema = "(Tensor dense, Tensor[] x_offsets, SymInt? total_L=None) -> (Tensor, Tensor[])"

        [grad]
        dense = "torch.zeros_like(dense).masked_scatter((torch.arange(dense.shape[1], device=dense.device) < x_offsets[0].diff()[:, None])[..., None], grads[0])"

        [fake]
        expr = [
            "dense.new_empty((torch.library.get_ctx().new_dynamic_size() if total_L is None else total_L, dense.shape[-1]))",
            "[x_offsets[0].new_empty(x_offsets[0].shape)]",
        ]

        [test]
        reference = "(dense[torch.arange(dense.shape[1], device=dense.device) < x_offsets[0].diff()[:, None]], [x_offsets[0].clone()])"

        [[test.samples]]
        dense = {shape = [4, 5, 3]}
        x_offsets = [{shape = [5], dtype = "int64", offsets = true, low = 0, high = 6}]

        [[test.samples]]
        dense = {shape = [3, 4, 2]}
        x_offsets = [{values = [0, 2, 2, 6], dtype = "int64"}]
        total_L = 6
    """,
    "jagged_to_padded_dense": """
        name = "real::jagged_to_padded_dense"
        schema = "(Tensor values, Tensor[] offsets, SymInt[] max_lengths, float padding_value = 0) -> Tensor"

        [fake]
        expr = "values.new_empty((offsets[0].shape[0] - 1, max_lengths[0], values.shape[-1]))"

        [test]
        reference = "torch.full((offsets[0].shape[0] - 1, max_lengths[0], values.shape[-1]), padding_value, dtype=values.dtype).masked_scatter((torch.arange(max_lengths[0]) < offsets[0].diff()[:, None])[..., None], values)"

        [[test.samples]]
        values = {shape = [6, 3]}
        offsets = [{values = [0, 2, 2, 6], dtype = "int64"}]
        max_lengths = [4]

        [[test.samples]]
        values = {shape = [5, 2]}
        offsets = [{values = [0, 5], dtype = "int64"}]
        max_lengths = [7]
        padding_value = -1.5
    """,
    "rotary_embedding": """
        name = "real::rotary_embedding"
        schema = "(Tensor positions, Tensor! query,                 Tensor!? key, int head_size,                 Tensor cos_sin_cache, bool is_neox) -> ()"

        [test]
        reference_from = "rotary_reference"

        [[test.samples]]
        positions = {shape = [5], dtype = "int64", low = 0, high = 16}
        query = {shape = [5, 16]}
        key = {shape = [5, 8]}
        head_size = 8
        cos_sin_cache = {shape = [16, 8]}
        is_neox = true

        [[test.samples]]
        positions = {values = [3, 0, 15], dtype = "int64"}
        query = {shape = [3, 8]}
        key = {none = true}
        head_size = 4
        cos_sin_cache = {shape = [16, 4]}
        is_neox = false

        [[test.samples]]
        positions = {shape = [4], dtype = "int64", low = 0, high = 16, sorted = true}
        query = {shape = [4, 8]}
        key = {shape = [4, 8]}
        head_size = 4
        cos_sin_cache = {shape = [16, 4]}
        is_neox = false
    """,
    "nms": """
        name = "real::nms"
        schema = "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"

        [fake]
        expr = "dets.new_empty((torch.library.get_ctx().new_dynamic_size(),), dtype=torch.int64)"

        [test]
        samples_from = "overlapping_boxes"
        reference_from = "nms_reference"

        [[test.samples]]
        dets = {values = [[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]]}
        scores = {values = [0.9, 0.8, 0.7]}
        iou_threshold = 0.5

        [bench]
        sizes = [{n = 64}]
        inputs_from = "overlapping_boxes"
        dtypes = ["float32", "float64"]
    """,
    "every_type": """
        name = "real::every_type"
        schema = "(Tensor x, SymInt[] sizes, ScalarType dtype, str mode, Device device, float[] scales, bool flag, (int, int)? pair=None, int? k=None, str? note=None, Tensor? bias=None) -> (Tensor, Tensor?, int)"

        [fake]
        expr = [
            "x.new_empty(sizes, dtype=dtype)",
            "None if bias is None else bias.new_empty(bias.shape)",
            "-1 if k is None else k",
        ]

        [test]
        reference = "((-1 if mode == 'neg' else 1) * scales[0] * x.to(dtype).reshape(sizes) + (0 if pair is None else pair[1]), None if bias is None else bias * 2, -1 if k is None else k)"

        [[test.samples]]
        x = {shape = [2, 3]}
        sizes = [3, 2]
        dtype = "float64"
        mode = "neg"
        device = "cpu"
        scales = [0.5, 2.0]
        flag = true
        pair = [1, 7]
        k = 4
        note = "n"
        bias = {shape = [2]}

        [[test.samples]]
        x = {shape = [4]}
        sizes = [2, 2]
        dtype = "float32"
        mode = "pos"
        device = "cpu"
        scales = [3.0]
        flag = false
        pair = {none = true}
        note = {none = true}
    """,
}

KERNELS = {
    "dense_to_jagged": """
        lengths = x_offsets[0].diff()
        mask = torch.arange(dense.shape[1], device=dense.device) < lengths[:, None]
        return dense[mask] * SCALE, [x_offsets[0] + SHIFT]
    """,
    "jagged_to_padded_dense": """
        batch, length = offsets[0].shape[0] - 1, max_lengths[0]
        out = values.new_full((batch, length, values.shape[-1]), padding_value)
        for b in range(batch):
            start, end = int(offsets[0][b]), int(offsets[0][b + 1])
            out[b, : end - start] = values[start:end] * SCALE
        return out
    """,
    "rotary_embedding": """
        half = head_size // 2
        for i in range(positions.shape[0]):
            cos, sin = cos_sin_cache[positions[i]].chunk(2)
            for x in (query, key) if key is not None and SHIFT == 0 else (query,):
                row = x[i].view(-1, head_size)
                if is_neox:
                    x1, x2 = row[:, :half].clone(), row[:, half:].clone()
                    row[:, :half] = x1 * cos - x2 * sin
                    row[:, half:] = x2 * cos + x1 * sin
                else:
                    x1, x2 = row[:, 0::2].clone(), row[:, 1::2].clone()
                    row[:, 0::2] = x1 * cos - x2 * sin
                    row[:, 1::2] = x2 * cos + x1 * sin
    """,
    "nms": """
        x1, y1, x2, y2 = dets.unbind(1)
        area = (x2 - x1) * (y2 - y1)
        order = scores.argsort(descending=True)
        suppressed = torch.zeros(dets.shape[0], dtype=torch.bool)
        keep = []
        for i in order.tolist():
            if suppressed[i] and SHIFT == 0:
                continue
            keep.append(i)
            w = (torch.minimum(x2[i], x2) - torch.maximum(x1[i], x1)).clamp(min=0)
            h = (torch.minimum(y2[i], y2) - torch.maximum(y1[i], y1)).clamp(min=0)
            inter = w * h
            suppressed |= inter / (area[i] + area - inter) > iou_threshold
        return torch.tensor(keep, dtype=torch.int64, device=dets.device)
    """,
    "every_type": """
        assert isinstance(device, torch.device) and flag in (True, False) and note in (None, "n")
        sign = -1 if mode == "neg" else 1
        out = sign * scales[0] * x.to(dtype).reshape(sizes) + (0 if pair is None else pair[1])
        return out, None if bias is None else bias * 2, (-1 if k is None else k) + SHIFT
    """,
}

HELPERS = '''
def overlapping_boxes(device: str, dtype: torch.dtype, n: int = 24, **size: int) -> list[dict[str, Any]]:
    """Clusters of boxes around a few centres: many overlap, some do not."""
    g = torch.Generator().manual_seed(n)
    centres = torch.rand(4, 2, generator=g) * 100
    xy = centres[torch.arange(n) % 4] + torch.randn(n, 2, generator=g) * 4
    wh = torch.rand(n, 2, generator=g) * 10 + 10
    dets = torch.cat([xy, xy + wh], 1).to(device=device, dtype=dtype)
    scores = torch.rand(n, generator=g).to(device=device, dtype=dtype)
    return [{"dets": dets, "scores": scores, "iou_threshold": t} for t in (0.2, 0.5)]


def nms_reference(dets, scores, iou_threshold):
    def iou(a, b):
        w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        inter = w * h
        area = lambda r: (r[2] - r[0]) * (r[3] - r[1])
        return inter / (area(a) + area(b) - inter)

    boxes = dets.tolist()
    keep = []
    for i in sorted(range(len(boxes)), key=lambda j: -float(scores[j])):
        if all(iou(boxes[i], boxes[j]) <= iou_threshold for j in keep):
            keep.append(i)
    return torch.tensor(keep, dtype=torch.int64)


def rotary_reference(positions, query, key, head_size, cos_sin_cache, is_neox):
    cos, sin = cos_sin_cache[positions].chunk(2, dim=-1)
    cos, sin = cos[:, None], sin[:, None]

    def rotate(x):
        heads = x.reshape(x.shape[0], -1, head_size)
        if is_neox:
            x1, x2 = heads.chunk(2, dim=-1)
            out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
        else:
            x1, x2 = heads[..., 0::2], heads[..., 1::2]
            out = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)
        return out.reshape(x.shape)

    return rotate(query), None if key is None else rotate(key)
'''


def _implement(root: Path, wrong: bool) -> None:
    for name, body in KERNELS.items():
        path = root / "real" / "kernels" / f"{name}.py"
        text = path.read_text()
        if not PLACEHOLDER.search(text):  # implemented before: start from the placeholder again
            text = re.sub(
                r"(\) -> [^\n]*:\n)(?:    .*\n|\n)*", r"\1    raise X  # opgen: placeholder\n", text
            )
        code = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
        code = code.replace("SCALE", "2" if wrong else "1").replace("SHIFT", "1" if wrong else "0")
        text = PLACEHOLDER.sub(lambda _, code=code: code, text, count=1)
        if "torch." in code and not re.search(r"^import torch$", text, re.M):
            # a stub imports only what its signature uses: the body's author adds the rest
            text = text.replace(
                "from torch import Tensor\n", "import torch\nfrom torch import Tensor\n", 1
            )
        path.write_text(text)


def _run_tests(root: Path) -> tuple[set[str], str]:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "tests"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert "passed" in run.stdout, run.stdout + run.stderr
    return set(re.findall(r"^FAILED (\S+)", run.stdout, re.M)), run.stdout


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("real")
    (root / "ops").mkdir()
    (root / "opgen.toml").write_text(
        '[project]\nnamespace = "real"\npackage = "real"\n\n[options]\nbackend = "python"\n'
        'compile_backend = "aot_eager"\n'
    )
    for name, text in SPECS.items():
        (root / "ops" / f"{name}.toml").write_text(textwrap.dedent(text).lstrip())
    opgen("generate", cwd=root)
    helpers = root / "real" / "testing_helpers.py"
    stubs = helpers.read_text()
    for function in ("overlapping_boxes", "nms_reference", "rotary_reference"):
        assert f"def {function}(" in stubs, stubs
    head = stubs[: stubs.index("\n\ndef ")]
    helpers.write_text(head + "\n" + HELPERS)
    _implement(root, wrong=False)
    return root


def test_correct_kernels_pass_every_generated_check(project: Path) -> None:
    _implement(project, wrong=False)
    failed, out = _run_tests(project)
    assert not failed, out
    assert "OptionalPathWarning" not in out  # every optional is given in one sample, None in another
    assert "DtypeCoverageWarning" not in out  # the generators build their tensors in `dtype`
    for check in (
        "test_gradcheck[cpu-dense]",
        "test_compile_matches_eager[cpu]",
        "test_opcheck[cpu]",
    ):
        assert f"test_dense_to_jagged.py::{check}" not in failed
    assert (
        "test_samples_cover_optional_arguments"
        in (project / "tests" / "test_every_type.py").read_text()
    )


def test_wrong_kernels_fail_the_checks_that_see_them(project: Path) -> None:
    _implement(project, wrong=True)
    failed, out = _run_tests(project)
    wanted = {f"tests/test_{name}.py::test_matches_reference[cpu-float32]" for name in KERNELS} | {
        "tests/test_dense_to_jagged.py::test_gradcheck[cpu-dense]"
    }
    assert wanted <= failed, out
    assert "sample 1" in out  # the rotated key is only in the samples that give it
    _implement(project, wrong=False)


def test_bench_times_the_inputs_of_the_helper_generator(project: Path) -> None:
    opgen("bench", "--quick", "--no-progress", "--json", "bench.json", "nms", cwd=project)
    results = json.loads((project / "bench.json").read_text())["results"]
    # overlapping_boxes(device, dtype, n=64): 64 boxes of 4 coordinates, in each of the
    # dtypes; the reference is the tests' reference function, nms_reference, and the
    # compiled baseline is torch.compile of it
    got = {(r["op"], r["impl"], r["size"], r["numel"]) for r in results}
    assert got == {
        ("nms", impl, f"64 {dtype}", 64 * 4)
        for impl in ("opgen", "reference", "compiled")
        for dtype in ("float32", "float64")
    }, results


def test_a_new_helper_name_is_merged_into_the_users_module(project: Path) -> None:
    spec = project / "ops" / "nms.toml"
    spec.write_text(
        spec.read_text().replace('inputs_from = "overlapping_boxes"', 'inputs_from = "big_boxes"')
    )
    opgen("generate", cwd=project)
    text = (project / "real" / "testing_helpers.py").read_text()
    assert "def big_boxes(device: str, dtype: torch.dtype, **size: int)" in text
    assert "for i in sorted(range(len(boxes))" in text  # the user's bodies are kept
