"""Fenced regions in the three-way merge (Note [Fenced regions] in opgen/spec/fences.py)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from opgen.write.merge import has_conflict_markers, merge3

BEGIN = "  // opgen: begin checks (regenerated from ops/foo.toml; edit the spec, not these lines)\n"
END = "  // opgen: end checks\n"


def _stub(checks: list[str], body: str = '  CHECK(false, "edit me");  // opgen: placeholder\n', head: str = "") -> str:
    fence = BEGIN + "".join(f"  {c}\n" for c in checks) + END if checks is not None else ""
    return f"// CPU kernel of foo.\n{head}#include \"../foo.h\"\n\nTensor foo_cpu(const Tensor& x) {{\n{fence}  const Tensor x_c = contiguous(x);\n{body}}}\n"


FLOAT = 'CHECK(x.dtype() == Float, "x must be float32");'
FLOAT_DOUBLE = 'CHECK(x.dtype() == Float || x.dtype() == Double, "x must be float32 or float64");'
DEVICE = 'CHECK(x.is_cpu(), "x must be a CPU tensor");'
BODY = "  Tensor out = empty_like(x_c);\n  kernel(x_c, out);\n  return out;\n"


def test_a_new_dtype_in_the_checks_merges_into_an_edited_body() -> None:
    base = _stub([DEVICE, FLOAT])
    ours = _stub([DEVICE, FLOAT], BODY)
    theirs = _stub([DEVICE, FLOAT_DOUBLE])
    result = merge3(base, ours, theirs)
    assert result.conflicts == 0 and result.replaced == ()
    assert result.text == _stub([DEVICE, FLOAT_DOUBLE], BODY)


def test_fenced_lines_edited_by_the_user_are_rewritten_and_reported() -> None:
    base = _stub([DEVICE, FLOAT])
    ours = _stub([DEVICE, FLOAT.replace("float32", "a float")], BODY)
    theirs = _stub([DEVICE, FLOAT_DOUBLE])
    result = merge3(base, ours, theirs)
    assert result.conflicts == 0 and result.replaced == ("checks",)
    assert result.text == _stub([DEVICE, FLOAT_DOUBLE], BODY)


def test_an_unchanged_scaffold_still_rewrites_an_edited_fence() -> None:
    """Every run rewrites the fence, not only runs whose scaffold changed."""
    scaffold = _stub([DEVICE, FLOAT])
    ours = _stub([DEVICE], BODY)  # the user dropped the dtype check
    result = merge3(scaffold, ours, scaffold)
    assert result.replaced == ("checks",) and result.text == _stub([DEVICE, FLOAT], BODY)
    untouched = _stub([DEVICE, FLOAT], BODY)
    assert merge3(scaffold, untouched, scaffold).text == untouched


def test_a_deleted_fence_stays_deleted() -> None:
    """Deleting both fence lines and what is between them opts out of opgen's checks."""
    base = _stub([DEVICE, FLOAT])
    ours = _stub(None, BODY)  # type: ignore[arg-type]
    theirs = _stub([DEVICE, FLOAT_DOUBLE])
    result = merge3(base, ours, theirs)
    assert result.conflicts == 0 and result.text == ours


def test_lines_the_user_adds_next_to_a_fence_stay() -> None:
    base = _stub([DEVICE, FLOAT])
    ours = base.replace(BEGIN, "  CHECK(x.dim() == 2, \"x must be 2-D\");\n" + BEGIN).replace(END, END + "  // my note\n")
    theirs = _stub([DEVICE, FLOAT_DOUBLE])
    result = merge3(base, ours, theirs)
    assert result.conflicts == 0
    assert "x must be 2-D" in result.text and "// my note" in result.text and FLOAT_DOUBLE in result.text


def test_a_fence_arrives_in_a_file_written_before_fences() -> None:
    legacy_base = _stub([DEVICE, FLOAT]).replace(BEGIN, "").replace(END, "")
    ours = legacy_base.replace('  CHECK(false, "edit me");  // opgen: placeholder\n', BODY)
    result = merge3(legacy_base, ours, _stub([DEVICE, FLOAT]))
    assert result.conflicts == 0 and result.text == _stub([DEVICE, FLOAT], BODY)


def test_a_fence_yields_to_a_user_who_rewrote_its_lines() -> None:
    """A file written before fences whose checks the user replaced: the user owns them, no fence comes in."""
    legacy_base = _stub([DEVICE, FLOAT]).replace(BEGIN, "").replace(END, "")
    ours = "// mine\n#include \"../foo.h\"\n\nTensor foo_cpu(const Tensor& x) {\n  my_checks(x);\n" + BODY + "}\n"
    result = merge3(legacy_base, ours, _stub([DEVICE, FLOAT]))
    assert result.conflicts == 0 and result.text == ours


def test_comment_changes_yield_to_a_user_who_rewrote_the_comment() -> None:
    base = _stub([DEVICE], head="// This file is yours.\n")
    ours = _stub([DEVICE], BODY, head="// Hand-written, tuned for AVX2.\n")
    theirs = _stub([DEVICE], head="// This file is yours: opgen merges\n// the new signature into it.\n")
    result = merge3(base, ours, theirs)
    assert result.conflicts == 0 and result.text == ours
    kept = _stub([DEVICE], BODY, head="// This file is yours.\n")  # the user left the comment alone
    assert merge3(base, kept, theirs).text == _stub([DEVICE], BODY, head="// This file is yours: opgen merges\n// the new signature into it.\n")


def test_a_code_change_next_to_a_rewritten_comment_still_conflicts() -> None:
    base = "// a\nint f();\n"
    ours = "// mine\nint g();\n"
    theirs = "// b\nlong f();\n"
    assert merge3(base, ours, theirs).conflicts == 1


def test_unbalanced_fence_lines_are_plain_text() -> None:
    base = _stub([DEVICE]).replace(END, "")
    ours = base.replace(DEVICE, DEVICE.replace("CPU", "host"))
    theirs = base.replace(DEVICE, DEVICE.replace("a CPU tensor", "on the CPU"))
    result = merge3(base, ours, theirs)
    assert result.conflicts == 1 and result.replaced == ()


def test_two_fences_and_crlf() -> None:
    second_begin, second_end = BEGIN.replace("checks", "shapes"), END.replace("checks", "shapes")
    base = _stub([DEVICE, FLOAT]).replace("  const Tensor", second_begin + "  CHECK(x.dim() == 1);\n" + second_end + "  const Tensor")
    theirs = base.replace(FLOAT, FLOAT_DOUBLE).replace("x.dim() == 1", "x.dim() >= 1")
    ours = base.replace('  CHECK(false, "edit me");  // opgen: placeholder\n', BODY).replace("\n", "\r\n")
    result = merge3(base, ours, theirs)
    assert result.conflicts == 0
    assert result.text == theirs.replace('  CHECK(false, "edit me");  // opgen: placeholder\n', BODY).replace("\n", "\r\n")


_FENCE_CONTENT = st.lists(st.sampled_from([DEVICE, FLOAT, FLOAT_DOUBLE, "CHECK(y);"]), max_size=3)
_USER_LINES = st.lists(st.sampled_from(["  a();\n", "  b();\n", "  // note\n", "\n"]), max_size=3)


@settings(max_examples=200, deadline=None)
@given(_FENCE_CONTENT, _FENCE_CONTENT, _FENCE_CONTENT, _USER_LINES, _USER_LINES, st.booleans())
def test_fences_never_cost_a_user_line_outside_them(base_checks, our_checks, new_checks, before, after, edited_body) -> None:
    base = _stub(base_checks)
    ours = _stub(our_checks, BODY if edited_body else '  CHECK(false, "edit me");  // opgen: placeholder\n')
    ours = ours.replace(BEGIN, "".join(before) + BEGIN).replace(END, END + "".join(after))
    theirs = _stub(new_checks)
    result = merge3(base, ours, theirs)
    assert result.conflicts == 0 and not has_conflict_markers(result.text)
    merged = Counter(result.text.splitlines(True))
    for line, count in Counter([*before, *after, *(BODY.splitlines(True) if edited_body else [])]).items():
        assert merged[line] >= count, (line, result.text)
    fence = result.text[result.text.index(BEGIN) : result.text.index(END) + len(END)]
    assert fence == BEGIN + "".join(f"  {c}\n" for c in new_checks) + END  # the spec's version, whole
    assert result.replaced == (("checks",) if our_checks not in (base_checks, new_checks) else ())
