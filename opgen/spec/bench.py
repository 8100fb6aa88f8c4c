"""The `[bench]` table of an op spec: how `opgen bench` times the op.

```toml
[bench]
sizes = [{n = 1024, d = 1024}, {n = 4096, d = 1024}]   # or plain ints: values of n
inputs = {x = ["n", "d"], weight = ["d"], eps = 1e-5}  # shape templates over the size variables
# or inputs_from = "boxes"  # testing_helpers.boxes(device, dtype, **size)[0]
native = "F.layer_norm(x, [x.shape[-1]], weight, bias, eps)"
original = "apex.normalization.fused_layer_norm(x, (d,), weight, bias, eps)"  # where apex imports
bytes = "..."        # or flops = "2 * n * d"; default: bytes of inputs + outputs
backward = true      # time forward + backward
dtypes = ["float32", "bfloat16"]   # or dtype = "float32": every size in each dtype
```
"""

from __future__ import annotations

import ast
from typing import Any

from ..errors import DiagnosticSink
from .expr import ExprProblem, check_expression, parse_expression
from .fields import check_keys, shown, typed
from .load import LoadedToml
from .model import Arg, BenchSpec
from .samples import helper_name
from .types import DTYPES

__all__ = ["BENCH_KEYS", "build_bench", "original_modules"]

BENCH_KEYS = (
    "sizes",
    "inputs",
    "inputs_from",
    "native",
    "original",
    "reference",
    "bytes",
    "flops",
    "backward",
    "dtype",
    "dtypes",
)
_SIZE_HINT = "write sizes = [1000, 1000000] (values of n) or sizes = [{n = 512, d = 1024}]"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _sizes(
    sink: DiagnosticSink, doc: LoadedToml, value: Any
) -> tuple[tuple[tuple[str, int], ...], ...]:
    line = doc.line("bench", "sizes")
    if not isinstance(value, list) or not value:
        sink.error(line, f"bench.sizes must be a non-empty list, not {shown(value)}", _SIZE_HINT)
        return ()
    out: list[tuple[tuple[str, int], ...]] = []
    for raw in value:
        item = {"n": raw} if _is_int(raw) else raw
        if (
            not isinstance(item, dict)
            or not item
            or not all(_is_int(v) and v > 0 for v in item.values())
        ):
            sink.error(
                line,
                f"bench.sizes entry {shown(raw)} is not a positive integer or a table of them",
                _SIZE_HINT,
            )
            return ()
        if out and sorted(item) != sorted(dict(out[0])):
            sink.error(line, "every bench.sizes entry must name the same variables", _SIZE_HINT)
            return ()
        out.append(tuple(sorted(item.items())))
    return tuple(out)


def _inputs(
    sink: DiagnosticSink, doc: LoadedToml, value: Any, args: tuple[Arg, ...], variables: set[str]
) -> tuple[tuple[str, Any], ...]:
    if not typed(sink, doc, value, dict, "bench", "inputs"):
        return ()
    by_name = {a.name: a for a in args}
    out: list[tuple[str, Any]] = []
    for name, template in value.items():
        line = doc.line("bench", "inputs", name)
        arg = by_name.get(name)
        if arg is None:
            sink.error(
                line,
                f"bench.inputs names unknown argument {name!r}",
                f"arguments: {', '.join(by_name) or 'none'}",
            )
            continue
        if arg.is_tensor:
            if not isinstance(template, list) or not all(
                _is_int(d) or isinstance(d, str) for d in template
            ):
                sink.error(
                    line,
                    f"bench.inputs.{name} must be a shape template, not {shown(template)}",
                    f'e.g. {name} = ["n", 1024]',
                )
                continue
            for dim in template:
                if isinstance(dim, str):
                    try:
                        check_expression(
                            dim, variables | {"min", "max", "int"}, f"bench.inputs.{name}"
                        )
                    except ExprProblem as exc:
                        sink.error(line, exc.message, exc.hint)
            template = tuple(template)
        elif isinstance(template, list):
            template = tuple(template)  # hashable, and a valid int[] argument
        out.append((name, template))
    return tuple(out)


def original_modules(text: str, known: set[str]) -> tuple[str, ...]:
    """The modules `[bench] original` imports: the unknown names it reaches attributes through.

    `torchvision.ops.nms(dets, scores, iou_threshold)` imports `torchvision`; an
    unknown name used on its own (`det` for `dets`) is a typo, raised as ExprProblem.
    """
    tree = parse_expression(text, "bench.original")
    roots: dict[str, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id not in known:
                roots.setdefault(base.id, None)
    check_expression(text, known | set(roots), "bench.original")
    return tuple(roots)


def _dtypes(sink: DiagnosticSink, doc: LoadedToml, table: dict[str, Any]) -> tuple[str, ...]:
    """`dtype = "float32"` or `dtypes = [...]`: the dtypes every size is timed in."""
    if "dtype" in table and "dtypes" in table:
        sink.error(
            doc.line("bench", "dtypes"),
            "bench.dtype and bench.dtypes both give the dtype",
            'keep one: dtype = "float32" or dtypes = ["float32", "bfloat16"]',
        )
        return ("float32",)
    key = "dtypes" if "dtypes" in table else "dtype"
    value = table.get(key, "float32")
    if key == "dtypes" and (not isinstance(value, list) or not value):
        sink.error(
            doc.line("bench", key),
            f"bench.dtypes must be a non-empty list of dtype names, not {shown(value)}",
            'e.g. dtypes = ["float32", "bfloat16"]',
        )
        return ("float32",)
    names = value if key == "dtypes" else [value]
    for name in names:
        if name not in DTYPES:
            sink.error(
                doc.line("bench", key),
                f"unknown dtype {shown(name)}",
                f"one of: {', '.join(DTYPES)}",
            )
            return ("float32",)
    return tuple(dict.fromkeys(names))


def build_bench(
    sink: DiagnosticSink,
    doc: LoadedToml,
    table: dict[str, Any],
    args: tuple[Arg, ...],
    expr_globals: tuple[str, ...],
) -> BenchSpec:
    """Validate `[bench]`; problems go to `sink`, the defaults fill what is missing."""
    check_keys(sink, doc, table, BENCH_KEYS, ("bench",))
    sizes = _sizes(sink, doc, table["sizes"]) if "sizes" in table else ()
    variables = {name for name, _ in sizes[0]} if sizes else {"n"}
    inputs = _inputs(sink, doc, table["inputs"], args, variables) if "inputs" in table else ()
    allowed = {a.name for a in args} | set(expr_globals) | variables
    texts: dict[str, str | None] = {}
    for key in ("native", "reference", "bytes", "flops"):
        text = table.get(key)
        if text is not None and typed(sink, doc, text, str, "bench", key):
            try:
                shadowing = {a.name for a in args} | variables
                check_expression(text, allowed, f"bench.{key}", shadowing)
            except ExprProblem as exc:
                sink.error(doc.line("bench", key), exc.message, exc.hint)
        texts[key] = text.strip() if isinstance(text, str) else None
    original = table.get("original")
    if original is not None and typed(sink, doc, original, str, "bench", "original"):
        try:
            original_modules(original, allowed)
        except ExprProblem as exc:
            sink.error(doc.line("bench", "original"), exc.message, exc.hint)
    texts["original"] = original.strip() if isinstance(original, str) else None
    backward = table.get("backward", False)
    if not isinstance(backward, bool):
        sink.error(
            doc.line("bench", "backward"),
            f"bench.backward must be true or false, not {shown(backward)}",
            "write backward = true",
        )
        backward = False
    dtypes = _dtypes(sink, doc, table)
    inputs_from = helper_name(sink, doc, table, "bench", "inputs_from")
    if inputs_from is not None and inputs:
        sink.error(
            doc.line("bench", "inputs_from"),
            "bench.inputs and bench.inputs_from both give the inputs",
            "keep one: shape templates, or a generator of testing_helpers.py",
        )
    return BenchSpec(
        sizes=sizes,
        inputs=inputs,
        backward=backward,
        dtypes=dtypes,
        inputs_from=inputs_from,
        **texts,
    )
