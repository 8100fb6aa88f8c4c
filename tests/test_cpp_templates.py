"""Rendered output of the C++ templates, one case file per situation, and the C++ error messages.

A case in tests/cpp_template_cases/ holds `# options: {toml}` (the project's
[options]), then a spec, then one `# output: PATH` section per file to compare.
Regenerate after reviewing a change with
OPGEN_UPDATE_CASES=1 python -m pytest tests/test_cpp_templates.py
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest

from opgen.generate import render_all
from opgen.project.checks import project_problems
from opgen.project.load import Project
from opgen.spec.config import build_config
from opgen.spec.load import LoadedToml, _scan_lines
from opgen.spec.validate import build_op_spec
from opgen.write.manifest import Manifest

CASES = sorted((Path(__file__).parent / "cpp_template_cases").glob("*.txt"))
_SECTION = re.compile(r"^# output: (\S+)\n", re.M)
_OPTIONS = re.compile(r"^# options: (.*)\n", re.M)


def _project(root: Path, options: dict, *specs: str) -> Project:
    config = build_config(LoadedToml(root / "opgen.toml", {"project": {"namespace": "mylib", "package": "mylib"}, "options": options}, {}))
    docs = []
    for text in specs:
        data = tomllib.loads(text)
        docs.append(LoadedToml(root / "ops" / f"{data['name'].split('::')[1]}.toml", data, _scan_lines(text)))
    names = frozenset(d.data["name"].split("::")[1] for d in docs)
    return Project(config, tuple(build_op_spec(d, config, names) for d in docs))


def _render(project: Project) -> dict[str, str]:
    return {r.path: r.content for r in render_all(project, Manifest())}


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_cpp_template_case(case: Path, tmp_path: Path):
    text = case.read_text(encoding="utf-8")
    options = tomllib.loads(_OPTIONS.search(text).group(1).replace(";", "\n"))
    parts = _SECTION.split(_OPTIONS.sub("", text, count=1))
    spec, rest = parts[0], parts[1:]
    expected = {rest[i]: rest[i + 1] for i in range(0, len(rest), 2)}
    rendered = _render(_project(tmp_path, options, spec))
    if os.environ.get("OPGEN_UPDATE_CASES"):
        head = _OPTIONS.search(text).group(0)
        case.write_text(head + spec + "".join(f"# output: {p}\n{rendered[p]}" for p in expected), encoding="utf-8")
        return
    assert expected, f"{case.name} names no output to compare"
    for path, body in expected.items():
        assert path in rendered, f"{case.name}: {path} was not generated"
        assert rendered[path] == body, f"{case.name}: {path} differs from the expected text"


_SPEC = """
name = "mylib::{name}"
schema = "{schema}"
backend = "cpp"
{extra}
[fake]
like = "x"

[test]
[[test.samples]]
x = {{shape = [2]}}
"""


def _errors(tmp_path: Path, options: dict, *specs: tuple[str, str, str]) -> str:
    """The project-wide validation's messages (load_project reports them with every other problem)."""
    project = _project(tmp_path, options, *(_SPEC.format(name=n, schema=s, extra=e) for n, s, e in specs))
    problems = project_problems(tmp_path, list(project.ops), project.config.cpp_target)
    assert problems, "the project should have been refused"
    return "\n".join(d.format(tmp_path) for d in problems)


def test_stable_rejects_scalar_with_file_line_and_hint(tmp_path):
    text = _errors(tmp_path, {}, ("foo", "(Tensor x, Scalar s=1) -> Tensor", ""))
    assert text == (
        "ops/foo.toml:3: error: argument 's': the stable C++ target cannot carry schema type Scalar (the stable ABI has no Scalar; use float or int)\n"
        '  hint: set cpp_target = "classic" for this op; all C++ ops of a project share one target, so set it under [options] in opgen.toml'
    )


def test_stable_refuses_a_bool_list_return_with_file_line_and_hint(tmp_path):
    spec = 'name = "mylib::foo"\nbackend = "cpp"\nschema = "(Tensor x) -> (Tensor, bool[])"\n'
    project = _project(tmp_path, {}, spec)
    problems = project_problems(tmp_path, list(project.ops), project.config.cpp_target)
    text = "\n".join(d.format(tmp_path) for d in problems)
    assert text == (
        "ops/foo.toml:3: error: return 2: the stable C++ target cannot return bool[] (the stable ABI converts lists through their data pointer, which std::vector<bool> has not)\n"
        '  hint: return int[] (0 and 1), or set cpp_target = "classic" (c10::List<bool>)'
    )


def test_mixed_targets_are_refused(tmp_path):
    text = _errors(tmp_path, {"cpp_target": "stable"}, ("foo", "(Tensor x) -> Tensor", ""), ("bar", "(Tensor x) -> Tensor", 'cpp_target = "classic"'))
    assert text == (
        "ops/bar.toml:5: error: cpp_target 'classic' differs from the project's 'stable'; all C++ ops of a namespace share one library block and one ABI\n"
        '  hint: set [options] cpp_target = "classic" in opgen.toml for every op, or remove cpp_target from this spec'
    )


def test_pybind_needs_classic(tmp_path):
    text = _errors(tmp_path, {}, ("foo", "(Tensor x) -> Tensor", "pybind = true"))
    assert "ops/foo.toml:5: error: pybind = true needs the classic C++ target" in text
    assert 'hint: set cpp_target = "classic"' in text
