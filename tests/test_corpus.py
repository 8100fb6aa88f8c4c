"""Every bad-input message opgen prints, pinned (see tests/corpus/README.md).

Each folder under tests/corpus/ is one case: the bad project files and
`expected.txt`, the exact stderr of `opgen generate`. A folder without an
`opgen.toml` gets the default one below. The run must exit 1, print exactly
the expected text, print nothing on stdout and leave the tree untouched.

Rewrite the expected files after an intended wording change with
    OPGEN_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_corpus.py
and review the diff.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opgen.cli import app

CORPUS = Path(__file__).parent / "corpus"
EXPECTED = "expected.txt"
DEFAULT_PROJECT = '[project]\nnamespace = "mylib"\npackage = "mylib"\n'
UPDATE = os.environ.get("OPGEN_UPDATE_SNAPSHOTS") == "1"

CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file and folder under root with its mode and bytes."""
    tree: dict[str, tuple[int, bytes]] = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        tree[path.relative_to(root).as_posix()] = (stat.st_mode, data)
    return tree


def build_case(name: str, dest: Path) -> Path:
    source = CORPUS / name
    root = dest / "project"
    shutil.copytree(source, root, ignore=shutil.ignore_patterns(EXPECTED))
    if not (root / "opgen.toml").exists():
        (root / "opgen.toml").write_text(DEFAULT_PROJECT, encoding="utf-8")
    return root


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize("name", CASES)
def test_bad_input(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = build_case(name, tmp_path)
    before = snapshot(tmp_path)
    monkeypatch.chdir(root)
    result = CliRunner().invoke(app, ["generate"])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    expected_path = CORPUS / name / EXPECTED
    if UPDATE:
        expected_path.write_text(result.stderr, encoding="utf-8")
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr == expected_path.read_text(encoding="utf-8")
    assert snapshot(tmp_path) == before, "a failed run changed the project"


@pytest.mark.parametrize("name", CASES)
def test_message_names_file_line_and_fix(name: str) -> None:
    """Each error points at a file (with a line when the file parsed) and carries a hint."""
    text = (CORPUS / name / EXPECTED).read_text(encoding="utf-8")
    blocks = [b for b in text.split("\n") if not b.startswith("  ")]
    assert blocks and blocks[-1] == ""
    for line in blocks[:-1]:
        where, _, message = line.partition(": error: ")
        assert message, f"not a diagnostic: {line!r}"
        named = where.endswith(".toml") or ".toml:" in where or ".j2:" in where or where == "ops"
        assert named, f"no file named: {line!r}"
    assert text.count("\n  hint: ") >= len(blocks) - 1, "every error needs a hint"
