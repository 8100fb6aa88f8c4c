"""Property: random spec edits, user edits and regenerations never lose a line the user wrote.

Each user line is kept, merged, or left inside a reported conflict whose backup
holds the user's version. Renders in-process through opgen.generate.generate,
with a template override that rewords the stub's placeholder line as a later
opgen might (Note [Placeholder lines]).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from opgen.generate import generate
from opgen.render.environment import builtin_templates_dir
from opgen.write.merge import has_conflict_markers

KERNEL = "mylib/kernels/foo.py"
_ARGS = ("float alpha=1.0", "int k=2", "bool flag=False")
_FORMULAS = ("grad * x.cos()", "grad * 2 * x", "grad")
_DEVICES = (('["cpu"]', False), ('["cpu", "cuda"]', True), ('["cpu", "cuda"]', False))
_USER = "# user"
_STUB = "python/kernel.py.j2"
_WORDINGS = ("not implemented: edit", "TODO: write the kernel in", "fill in")


def _spec(state: dict) -> str:
    schema = ", ".join(["Tensor x", *(a for i, a in enumerate(_ARGS) if i in state["args"])])
    devices, per_device = _DEVICES[state["devices"]]
    return f'''name = "mylib::foo"
schema = "({schema}) -> Tensor"
doc = "{state['doc']}"
devices = {devices}
backend = "python"
per_device = {str(per_device).lower()}

[grad]
x = "{_FORMULAS[state['formula']]}"

[fake]
like = "x"

[test]
reference = "torch.sin(x)"

[[test.samples]]
x = {{shape = [4]}}
'''


_STEP = st.one_of(
    st.tuples(st.just("toggle_arg"), st.integers(0, len(_ARGS) - 1)),
    st.tuples(st.just("formula"), st.integers(0, len(_FORMULAS) - 1)),
    st.tuples(st.just("devices"), st.integers(0, len(_DEVICES) - 1)),
    st.tuples(st.just("doc"), st.sampled_from(["First doc.", "Second doc.", "A longer doc line."])),
    st.tuples(st.just("wording"), st.integers(0, len(_WORDINGS) - 1)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.integers(1, 3)),
    st.tuples(st.just("replace"), st.floats(0, 1), st.integers(1, 3)),
    st.tuples(st.just("fill_body"), st.floats(0, 1), st.integers(1, 2)),
    st.tuples(st.just("edit_def"), st.floats(0, 1), st.integers(1, 1)),
    st.tuples(st.just("regenerate")),
)


def _user_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if _USER in line]


def _resolve(text: str) -> str:
    """What a user might do: keep both sides, drop the markers and the old scaffold."""
    out, skipping = [], False
    for line in text.splitlines(True):
        if line.startswith("||||||| "):
            skipping = True
        elif line.startswith("======="):
            skipping = False
        elif not (line.startswith("<<<<<<< ") or line.startswith(">>>>>>> ") or skipping):
            out.append(line)
    return "".join(out)


def _regenerate(root: Path, templates: Path) -> None:
    kernel = root / KERNEL
    before = kernel.read_text()
    result = generate(root, templates=templates)
    assert not any(c.action == "edited" for c in result.changes)
    after = kernel.read_text()
    missing = [line for line in _user_lines(before) if line not in after.splitlines()]
    assert not missing, (missing, before, after)
    action = next(c.action for c in result.changes if c.path == KERNEL)
    event(f"kernel file: {action}")
    if action == "conflict":
        assert result.failed and has_conflict_markers(after)
        assert (root / ".opgen/backup" / KERNEL).read_text() == before
        kernel.write_text(_resolve(after))
    else:
        assert not has_conflict_markers(after)
    assert generate(root, check=True, templates=templates).stale == []


@pytest.mark.slow  # over 5 s: the full suite runs it
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_STEP, max_size=10))
def test_no_user_line_is_ever_lost(steps) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "ops").mkdir()
        (root / "opgen.toml").write_text('[project]\nnamespace = "mylib"\npackage = "mylib"\n')
        state = {"args": set(), "formula": 0, "devices": 0, "doc": "First doc."}
        (root / "ops/foo.toml").write_text(_spec(state))
        templates = root / "overrides"
        stub = (builtin_templates_dir() / _STUB).read_text()
        (templates / _STUB).parent.mkdir(parents=True)
        (templates / _STUB).write_text(stub)
        generate(root, templates=templates)
        kernel = root / KERNEL
        counter = 0
        for step in [*steps, ("regenerate",)]:
            kind = step[0]
            if kind == "toggle_arg":
                state["args"] ^= {step[1]}
            elif kind in ("formula", "devices", "doc"):
                state[kind] = step[1]
            elif kind == "wording":
                (templates / _STUB).write_text(stub.replace(_WORDINGS[0], _WORDINGS[step[1]]))
            elif kind == "regenerate":
                (root / "ops/foo.toml").write_text(_spec(state))
                _regenerate(root, templates)
                continue
            else:
                lines = kernel.read_text().splitlines(True)
                new = []
                for _ in range(step[2]):
                    counter += 1
                    new.append(f"    _u{counter} = {counter}  {_USER}\n")
                if kind in ("fill_body", "edit_def"):
                    marker = "raise NotImplementedError" if kind == "fill_body" else "def "
                    found = [i for i, line in enumerate(lines) if marker in line and _USER not in line]
                    if not found:
                        continue
                    at = found[int(step[1] * (len(found) - 1))]
                    if kind == "edit_def":  # e.g. the user adds an argument of their own
                        new = [lines[at].replace(")", f", _u{counter}=None)", 1).rstrip("\n") + f"  {_USER}\n"]
                    lines[at : at + 1] = new
                else:
                    at = int(step[1] * len(lines))
                    lines[at : at + (kind == "replace")] = new
                kernel.write_text("".join(lines))
            (root / "ops/foo.toml").write_text(_spec(state))
