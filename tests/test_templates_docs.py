"""docs/templates.md documents exactly the variables the templates really receive."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from opgen.project.load import load_project
from opgen.render.overrides import builtin_names
from opgen.scaffold.texts import compose_new_op
from opgen.targets.project import collect_artifacts

DOC = Path(__file__).resolve().parent.parent / "docs" / "templates.md"
_DEVICE_KEYS = {"cpu", "cuda"}

# op name, schema (None: the default sine op), backend, devices
_OPS = [
    ("mylib::sine", None, "python", ["cpu"]),
    ("mylib::scaled", "(Tensor x, float alpha=1.0) -> Tensor", "python", ["cpu", "cuda"]),
    ("mylib::addmut", "(Tensor(a!) x, Tensor y) -> ()", "python", ["cpu"]),
    ("mylib::cadd", "(Tensor x, Tensor y, float alpha=1.0) -> Tensor", "cpp", ["cpu", "cuda"]),
    ("mylib::tadd", "(Tensor x, Tensor? y, float alpha=1.0) -> Tensor", "triton", ["cpu", "cuda"]),
]


def _flatten(value: Any, prefix: str, out: set[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            name = "<device>" if key in _DEVICE_KEYS else "<role>" if prefix == "op.names" else key
            _flatten(item, f"{prefix}.{name}" if prefix else name, out)
    elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        for item in value:
            _flatten(item, f"{prefix}[]", out)
    else:
        out.add(prefix)


@pytest.fixture(scope="module")
def contexts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    root = tmp_path_factory.mktemp("docs_project")
    for name, schema, backend, devices in _OPS:
        for path, text in compose_new_op(root, name, schema, backend, devices).sources.items():
            if name == "mylib::scaled":
                text = text.replace("backend =", "per_device = true\nbackend =", 1)
                text += '\n[sharding]\nrule = "custom"\n'  # a user function, keyed on alpha
            if name == "mylib::tadd":  # the inner op's fake kernel gets the checks too
                text = text.replace("[fake]\n", '[fake]\nchecks = ["x.dim() >= 1"]\n', 1)
            if name == "mylib::addmut":
                text += '\n[sharding]\nrule = "elementwise"\n'  # keeps the mutated x
            (root / path).parent.mkdir(exist_ok=True)
            (root / path).write_text(text)
    variables: dict[str, set[str]] = {}
    for artifact in collect_artifacts(load_project(root)):
        _flatten(artifact.context, "", variables.setdefault(artifact.template, set()))
    return variables


def _documented() -> set[str]:
    text = DOC.read_text()
    section = text[text.index("## Variables") :]
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE))


def _template_table() -> dict[str, set[str]]:
    text = DOC.read_text()
    section = text[text.index("## What each template receives") : text.index("## Variables")]
    rows = re.findall(r"^\| `([^`]+)` \|.*\| ([^|]*) \|$", section, re.MULTILINE)
    return {name: set(re.findall(r"`([^`]+)`", variables)) for name, variables in rows}


def test_every_variable_is_documented_and_every_documented_one_exists(
    contexts: dict[str, set[str]],
) -> None:
    real = set().union(*contexts.values())
    documented = _documented()
    missing, stale = sorted(real - documented), sorted(documented - real)
    assert not missing, f"add these to the Variables section of docs/templates.md: {missing}"
    assert not stale, f"docs/templates.md documents variables no template receives: {stale}"


def test_template_table_lists_every_template_and_what_it_receives(
    contexts: dict[str, set[str]],
) -> None:
    table = _template_table()
    assert sorted(table) == builtin_names(), "docs/templates.md: one row per built-in template"
    for template, names in contexts.items():
        top = {name.split(".")[0].split("[")[0] for name in names}
        assert table[template] == top, f"docs/templates.md row of {template}"
