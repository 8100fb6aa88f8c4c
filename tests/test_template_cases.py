"""Each template's rendered output, one case file per situation.

A case file holds a spec, then one `# output: PATH` section per generated file
to compare. Regenerate the expected text (after reviewing the change) with
OPGEN_UPDATE_CASES=1 python -m pytest tests/test_template_cases.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from opgen.generate import render_all
from opgen.project.load import Project
from opgen.spec.config import build_config
from opgen.spec.load import LoadedToml, _scan_lines
from opgen.spec.validate import build_op_spec
from opgen.write.manifest import Manifest

CASES = sorted((Path(__file__).parent / "template_cases").glob("*.txt"))
_SECTION = re.compile(r"^# output: (\S+)\n", re.M)
_CONFIG = {"project": {"namespace": "mylib", "package": "mylib"}, "options": {}}


def _parse_case(text: str) -> tuple[str, dict[str, str]]:
    parts = _SECTION.split(text)
    spec, rest = parts[0], parts[1:]
    return spec, {rest[i]: rest[i + 1] for i in range(0, len(rest), 2)}


def _render(spec_text: str, root: Path) -> dict[str, str]:
    import tomllib

    config = build_config(LoadedToml(root / "opgen.toml", _CONFIG, {}))
    data = tomllib.loads(spec_text)
    name = data["name"].split("::")[1]
    doc = LoadedToml(root / "ops" / f"{name}.toml", data, _scan_lines(spec_text))
    op = build_op_spec(doc, config, frozenset({name}))
    return {r.path: r.content for r in render_all(Project(config, (op,)), Manifest())}


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_template_case(case: Path, tmp_path: Path):
    spec, expected = _parse_case(case.read_text(encoding="utf-8"))
    rendered = _render(spec, tmp_path)
    if os.environ.get("OPGEN_UPDATE_CASES"):
        sections = "".join(f"# output: {path}\n{rendered[path]}" for path in expected)
        case.write_text(spec + sections, encoding="utf-8")
        return
    assert expected, f"{case.name} names no output to compare"
    for path, text in expected.items():
        assert path in rendered, f"{case.name}: {path} was not generated"
        assert rendered[path] == text, f"{case.name}: {path} differs from the expected text"
