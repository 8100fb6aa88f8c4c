"""opgen.write.merge.merge3: the three-way merge of user-owned files. See Note [Merge rules]."""

from __future__ import annotations

from collections import Counter
from difflib import SequenceMatcher

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opgen.write.merge import has_conflict_markers, merge3


def _lines(*items: str) -> str:
    return "".join(f"{item}\n" for item in items)


BASE = _lines("import torch", "", "", "def foo(x):", "    raise NotImplementedError", "")

# (id, base, ours, theirs, expected text, expected conflicts)
CLEAN = [
    ("ours only", BASE, BASE.replace("    raise NotImplementedError", "    return x"), BASE, BASE.replace("    raise NotImplementedError", "    return x"), 0),
    ("theirs only", BASE, BASE, BASE.replace("(x)", "(x, a)"), BASE.replace("(x)", "(x, a)"), 0),
    (
        "signature and the body line under it (adjacent)",
        BASE,
        BASE.replace("    raise NotImplementedError", "    y = x + 1\n    return y"),
        BASE.replace("(x)", "(x, a)"),
        _lines("import torch", "", "", "def foo(x, a):", "    y = x + 1", "    return y", ""),
        0,
    ),
    (
        "user inserts above the def that opgen changes",
        BASE,
        BASE.replace("def foo", "@decorator\ndef foo"),
        BASE.replace("(x)", "(x, a)"),
        _lines("import torch", "", "", "@decorator", "def foo(x, a):", "    raise NotImplementedError", ""),
        0,
    ),
    (
        "user inserts right after the line opgen changes",
        BASE,
        BASE.replace("def foo(x):\n", "def foo(x):\n    # note\n"),
        BASE.replace("(x)", "(x, a)"),
        _lines("import torch", "", "", "def foo(x, a):", "    # note", "    raise NotImplementedError", ""),
        0,
    ),
    ("both make the same edit", BASE, BASE.replace("(x)", "(x, a)"), BASE.replace("(x)", "(x, a)"), BASE.replace("(x)", "(x, a)"), 0),
    (
        "opgen appends a function, user filled the last body",
        _lines("def f(x):", "    raise E"),
        _lines("def f(x):", "    return x"),
        _lines("def f_cpu(x):", "    raise E", "", "", "def f_cuda(x):", "    raise E"),
        _lines("def f_cpu(x):", "    return x", "", "", "def f_cuda(x):", "    raise E"),
        0,
    ),
]


@pytest.mark.parametrize("base, ours, theirs, expected, conflicts", [c[1:] for c in CLEAN], ids=[c[0] for c in CLEAN])
def test_clean_merges(base: str, ours: str, theirs: str, expected: str, conflicts: int) -> None:
    result = merge3(base, ours, theirs)
    assert (result.text, result.conflicts) == (expected, conflicts)


def test_insertions_at_the_same_point_conflict() -> None:
    base = _lines("a", "b")
    result = merge3(base, _lines("a", "mine", "b"), _lines("a", "theirs", "b"))
    assert result.conflicts == 1
    assert result.text == _lines("a", "<<<<<<< yours", "mine", "||||||| previous scaffold", "=======", "theirs", ">>>>>>> opgen", "b")
    assert has_conflict_markers(result.text)


def test_overlapping_edits_conflict_and_keep_both_versions() -> None:
    base = _lines("def foo(x):", "    raise NotImplementedError")
    ours = _lines("def foo(x):  # mine", "    return x")
    theirs = _lines("def foo(x, a):", "    raise NotImplementedError")
    result = merge3(base, ours, theirs)
    assert result.conflicts == 1
    text = result.text
    assert "def foo(x):  # mine\n" in text and "def foo(x, a):\n" in text and "    return x\n" in text
    assert text.index("<<<<<<< yours") < text.index("def foo(x):  # mine") < text.index("||||||| previous scaffold")
    assert text.index("=======") < text.index("def foo(x, a):") < text.index(">>>>>>> opgen")


def test_conflict_keeps_common_lines_outside_the_markers() -> None:
    base = _lines("a", "b", "c")
    result = merge3(base, _lines("a", "same", "X", "same2", "c"), _lines("a", "same", "Y", "same2", "c"))
    assert result.text == _lines(
        "a", "same", "<<<<<<< yours", "X", "||||||| previous scaffold", "b", "=======", "Y", ">>>>>>> opgen", "same2", "c"
    )


@pytest.mark.parametrize("ours_ending", ["\n", ""])
def test_missing_final_newline_of_the_user_is_kept(ours_ending: str) -> None:
    base = _lines("def foo(x):", "    raise E")
    ours = "def foo(x):\n    return x" + ours_ending
    result = merge3(base, ours, _lines("def foo(x, a):", "    raise E"))
    assert result.text == "def foo(x, a):\n    return x" + ours_ending


def test_missing_final_newline_in_base_and_theirs_is_no_edit() -> None:
    result = merge3("a\nb", "a\nb\nc\n", "z\nb")
    assert result.text == "z\nb\nc\n" and result.conflicts == 0


def test_crlf_user_file_merges_and_stays_crlf() -> None:
    base = _lines("def foo(x):", "    raise E")
    ours = "def foo(x):\r\n    return x\r\n"
    result = merge3(base, ours, _lines("def foo(x, a):", "    raise E"))
    assert result.conflicts == 0
    assert result.text == "def foo(x, a):\r\n    return x\r\n"


def test_markers_of_other_tools_are_not_ours() -> None:
    assert not has_conflict_markers(_lines("<<<<<<< HEAD", "x", "=======", "y", ">>>>>>> branch"))
    assert not has_conflict_markers(_lines("text = '<<<<<<< yours'"))


# ---- placeholder lines: Note [Placeholder lines] -------------------------------------------------

_PY_OLD = '    raise NotImplementedError(f"not implemented: edit {__file__}")  # opgen: placeholder'
_PY_NEW = '    raise NotImplementedError(f"TODO: write {__file__}")  # opgen: placeholder'


def _py_stub(signature: str = "def foo(x):", placeholder: str = _PY_OLD) -> str:
    return _lines("import torch", "", "", signature, placeholder)


def _cpp_stub(op: str = "foo", arg: str = "x", check: str = "STD_TORCH_CHECK") -> str:
    """The shape of csrc/cpu/<op>.cpp: input checks and a contiguous copy above the placeholder."""
    return _lines(
        "namespace mylib {",
        "",
        f"Tensor {op}_cpu(const Tensor& {arg}) {{",
        f'  {check}({arg}.is_cpu(), "mylib::{op}: {arg} must be a CPU tensor");',
        f'  {check}({arg}.scalar_type() == Float, "mylib::{op}: {arg} must be float32");',
        f"  const Tensor {arg}_c = contiguous({arg});",
        f'  {check}(false, "mylib::{op} is not implemented on CPU: edit csrc/cpu/{op}.cpp");  // opgen: placeholder',
        "}",
        "",
        "}  // namespace mylib",
    )


def _fill(stub: str, *body: str) -> str:
    """The user replaces the placeholder line with `body`."""
    lines = stub.splitlines(True)
    at = next(i for i, line in enumerate(lines) if "opgen: placeholder" in line)
    lines[at : at + 1] = [f"{line}\n" for line in body]
    return "".join(lines)


# (id, base, ours, theirs, expected text): all merge without a conflict
PLACEHOLDER_CLEAN = [
    (
        "python: opgen rewords the placeholder the user replaced",
        _py_stub(),
        _fill(_py_stub(), "    return torch.sin(x)"),
        _py_stub(placeholder=_PY_NEW),
        _fill(_py_stub(), "    return torch.sin(x)"),
    ),
    (
        "python: and changes the def line right above it",
        _py_stub(),
        _fill(_py_stub(), "    y = x + 1", "    return y"),
        _py_stub("def foo(x, a):", _PY_NEW),
        _fill(_py_stub("def foo(x, a):"), "    y = x + 1", "    return y"),
    ),
    (
        "python: the user deleted the placeholder",
        _py_stub(),
        _fill(_py_stub()),
        _py_stub(placeholder=_PY_NEW),
        _fill(_py_stub()),
    ),
    (
        "python: a placeholder the user left alone gets the new wording",
        _py_stub(),
        _py_stub().replace("import torch\n", "import torch\nimport numpy\n"),
        _py_stub("def foo(x, a):", _PY_NEW),
        _py_stub("def foo(x, a):", _PY_NEW).replace("import torch\n", "import torch\nimport numpy\n"),
    ),
    (
        "python: written before the markers existed (unmarked base)",
        _py_stub(placeholder=_PY_OLD.split("  #")[0]),
        _fill(_py_stub(), "    return x"),
        _py_stub("def foo(x, a):"),
        _fill(_py_stub("def foo(x, a):"), "    return x"),
    ),
    (
        "c++: op rename rewrites the untouched checks and the replaced placeholder",
        _cpp_stub(),
        _fill(_cpp_stub(), "  return x_c.sin();"),
        _cpp_stub(op="bar"),
        _fill(_cpp_stub(op="bar"), "  return x_c.sin();"),
    ),
    (
        "c++: argument rename: checks and the contiguous copy update, the body stays",
        _cpp_stub(),
        _fill(_cpp_stub(), "  auto out = empty_like(x_c);", "  return out;"),
        _cpp_stub(arg="input"),
        _fill(_cpp_stub(arg="input"), "  auto out = empty_like(x_c);", "  return out;"),
    ),
    (
        "c++: classic target rewrites every check and the placeholder",
        _cpp_stub(),
        _fill(_cpp_stub(), "  return x_c.sin();"),
        _cpp_stub(check="TORCH_CHECK"),
        _fill(_cpp_stub(check="TORCH_CHECK"), "  return x_c.sin();"),
    ),
]


@pytest.mark.parametrize("base, ours, theirs, expected", [c[1:] for c in PLACEHOLDER_CLEAN], ids=[c[0] for c in PLACEHOLDER_CLEAN])
def test_a_replaced_placeholder_is_the_users(base: str, ours: str, theirs: str, expected: str) -> None:
    result = merge3(base, ours, theirs)
    assert (result.text, result.conflicts) == (expected, 0)


def test_an_edited_check_line_still_conflicts_with_a_renamed_argument() -> None:
    """Input checks are not placeholders: the user's edit of one meets opgen's rename."""
    ours = _fill(_cpp_stub(), "  return x_c.sin();").replace("must be float32", "must be float (mine)")
    result = merge3(_cpp_stub(), ours, _cpp_stub(arg="input"))
    assert result.conflicts == 1
    text = result.text
    assert "must be float (mine)" in text and "  return x_c.sin();\n" in text
    assert text.count("<<<<<<< yours") == 1
    # the block is the dtype check only; the body the user wrote is outside it
    assert text.index("<<<<<<< yours") < text.index("must be float (mine)") < text.index(">>>>>>> opgen") < text.index("return x_c.sin()")


def test_a_conflict_elsewhere_is_still_reported() -> None:
    """User and opgen both change the def; the placeholder rewording shows in opgen's side."""
    ours = _fill(_py_stub("def foo(x, beta=3):"), "    return x")
    result = merge3(_py_stub(), ours, _py_stub("def foo(x, a):", _PY_NEW))
    assert result.conflicts == 1
    assert result.text == _lines(
        "import torch", "", "",
        "<<<<<<< yours", "def foo(x, beta=3):", "    return x",
        "||||||| previous scaffold", "def foo(x):", _PY_OLD,
        "=======", "def foo(x, a):", _PY_NEW,
        ">>>>>>> opgen",
    )


def test_an_unmarked_line_the_user_replaced_still_conflicts() -> None:
    base = _lines("def foo(x):", "    raise E('old')")
    result = merge3(base, _lines("def foo(x):", "    return x"), _lines("def foo(x):", "    raise E('new')"))
    assert result.conflicts == 1


# ---- property: the merge never drops a line the user added -------------------------------------

_LINE = st.sampled_from(
    ["a", "b", "c", "", "    pass", "    return x", "def f(x):", "x = 1", "    raise E(1)  # opgen: placeholder", "    raise E(2)  # opgen: placeholder"]
)


@st.composite
def _edited(draw, base: list[str]) -> list[str]:
    lines = list(base)
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["insert", "replace", "delete"]))
        at = draw(st.integers(0, len(lines)))
        new = draw(st.lists(_LINE, min_size=1, max_size=3))
        if kind == "insert" or not lines or at == len(lines):
            lines[at:at] = new
        elif kind == "replace":
            lines[at : at + 1] = new
        else:
            del lines[at]
    return lines


@st.composite
def _triples(draw):
    base = draw(st.lists(_LINE, max_size=8))
    return base, draw(_edited(base)), draw(_edited(base))


def _added(base: list[str], other: list[str]) -> Counter:
    matcher = SequenceMatcher(None, base, other, autojunk=False)
    return Counter(line for tag, _, _, j1, j2 in matcher.get_opcodes() if tag != "equal" for line in other[j1:j2])


@settings(max_examples=300, deadline=None)
@given(_triples(), st.booleans())
def test_merge_never_drops_a_user_line(triple, trailing_newline: bool) -> None:
    base, ours, theirs = triple
    join = lambda lines: "\n".join(lines) + ("\n" if trailing_newline and lines else "")  # noqa: E731
    result = merge3(join(base), join(ours), join(theirs))
    merged = Counter(result.text.splitlines())
    # compare the texts as written (without a final newline, [] and [""] are the same file)
    base_lines, ours_lines, theirs_lines = (join(x).splitlines() for x in (base, ours, theirs))
    for line, count in _added(base_lines, ours_lines).items():
        assert merged[line] >= count, (line, result.text)
    if result.conflicts == 0:
        assert not has_conflict_markers(result.text)
        # a clean merge holds every line the new scaffold added, too, except a
        # placeholder that yielded to the user's replacement (Note [Placeholder lines])
        for line, count in _added(base_lines, theirs_lines).items():
            assert merged[line] >= count or "opgen: placeholder" in line, (line, result.text)
    if ours == base:
        assert result.text == join(theirs)
    if theirs == base:
        assert result.text == join(ours)


_STUB = _lines(
    "from __future__ import annotations",
    "",
    "from collections.abc import Sequence",
    "",
    "import torch",
    "from torch import Tensor",
    "",
    "",
    "def foo(x: Tensor) -> Tensor:",
    "    raise NotImplementedError  # opgen: placeholder",
)


def test_a_scaffold_that_drops_imports_keeps_them_in_an_edited_file() -> None:
    """Note [Imports the scaffold drops]: the user's body may use a name the stub stopped importing."""
    ours = _STUB.replace("    raise NotImplementedError  # opgen: placeholder", "    return torch.sin(x)")
    theirs = _lines(
        "from __future__ import annotations",
        "",
        "from torch import Tensor",
        "",
        "",
        "def foo(x: Tensor, n: int) -> Tensor:",
        "    raise NotImplementedError  # opgen: placeholder",
    )
    merged = merge3(_STUB, ours, theirs)
    assert merged.conflicts == 0
    assert merged.text == ours.replace("def foo(x: Tensor)", "def foo(x: Tensor, n: int)")
    # an import the scaffold rewrites along with other lines is kept too
    theirs = theirs.replace("from torch import Tensor", "import numpy\nfrom torch import Tensor")
    merged = merge3(_STUB, ours, theirs)
    assert merged.conflicts == 0
    assert "import torch\n" in merged.text and "import numpy\n" in merged.text
    # an untouched stub becomes the new scaffold, imports and all
    assert merge3(_STUB, _STUB, theirs).text == theirs
