"""Build OpSpecs from inline TOML for unit tests."""

from __future__ import annotations

import tomllib
from pathlib import Path

from opgen.spec.load import LoadedToml, _scan_lines
from opgen.spec.model import OpSpec, ProjectConfig
from opgen.spec.validate import build_op_spec

ROOT = Path("/project")
CONFIG = ProjectConfig(root=ROOT, path=ROOT / "opgen.toml", namespace="mylib", package="mylib")


def op_from_toml(text: str, other_ops: frozenset[str] = frozenset(), config: ProjectConfig = CONFIG) -> OpSpec:
    doc = LoadedToml(ROOT / "ops" / "op.toml", tomllib.loads(text), _scan_lines(text))
    return build_op_spec(doc, config, other_ops)


def simple_op(
    schema: str,
    grad: dict[str, str] | None = None,
    mutates: list[str] | None = None,
    fake: str = 'like = "x"',
    sample: str = "x = {shape = [2]}",
    jvp: dict[str, object] | None = None,
) -> OpSpec:
    lines = ['name = "mylib::foo"', f"schema = {schema!r}".replace("'", '"') if '"' not in schema else f"schema = '{schema}'"]
    if mutates:
        lines.append("mutates = [" + ", ".join(f'"{m}"' for m in mutates) + "]")
    if grad:
        lines.append("[grad]")
        lines += [f'"{k}" = "{v}"' for k, v in grad.items()]
    if jvp:
        lines.append("[jvp]")
        lines += [f"{k} = {'true' if v is True else repr(v)}".replace("'", '"') for k, v in jvp.items()]
    lines += ["[fake]", fake, "[test]", "[[test.samples]]", sample]
    return op_from_toml("\n".join(lines) + "\n")
