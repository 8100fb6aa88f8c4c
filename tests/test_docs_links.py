"""Every relative link of the README and docs/ reaches a file, and its `#anchor` a heading there.

Anchors follow GitHub's rule for heading ids: lower case, punctuation other than `-` and `_`
dropped, spaces turned into `-`, and `-1`, `-2`, ... appended to repeated headings.
"""

from __future__ import annotations

import re
from pathlib import Path

from _support import REPO

# Pages linked from the docs that another change adds; checked like any page once they exist.
WRITTEN_ELSEWHERE = {REPO / "docs" / "triton.md"}

FENCE = re.compile(r"^```.*?^```$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+?)#*$", re.MULTILINE)


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    ids = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        ids.add(slug if count == 0 else f"{slug}-{count}")
    return ids


def links(page: Path) -> list[str]:
    prose = INLINE_CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return [target for target in LINK.findall(prose) if not re.match(r"[a-z]+:", target)]


def test_anchor_ids_follow_github() -> None:
    page = REPO / "docs" / "spec.md"
    assert {"schemas", "formula-names", "opgentoml"} <= anchors(page)
    assert "torchfunc-vmap-and-the-raw-torchops-handle" in anchors(
        REPO / "docs" / "generated-code.md"
    )


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in pages():
        for target in links(page):
            path, _, anchor = target.partition("#")
            destination = (page.parent / path).resolve() if path else page
            if destination in WRITTEN_ELSEWHERE and not destination.exists():
                continue
            where = f"{page.relative_to(REPO)}: ({target})"
            if not destination.exists():
                broken.append(f"{where}: no file {destination.relative_to(REPO)}")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{where}: no heading with id #{anchor}")
    assert not broken, "\n".join(broken)


# The sections the README held before they moved to docs/ (the README now only introduces opgen).
MOVED_FROM_README = (
    "A spec",
    "Schemas",
    "Samples",
    "Testing helpers",
    "Names",
    "Formula names",
    "What the generated tests prove",
    "What a generated project needs",
    "torch.func, vmap",
    "Commands",
    "Adopting an existing extension",
    "Trust and safety",
    "C++ and CUDA operators",
    "Sharded (DTensor) use",
    "Generated layout",
    "Reference set",
    "Performance",
    "How `opgen bench` measures",
    "Call overhead",
    "opgen's own speed",
    "Changelog",
)


def test_nothing_points_to_a_section_that_left_the_readme() -> None:
    """A line that names the README and one of the sections that moved to docs/ is stale."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    sources = [*pages(), *sorted((REPO / "opgen").rglob("*.py")), *sorted(REPO.glob("tests/*.py"))]
    stale = []
    for source in sources:
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            if "README" not in line or source == Path(__file__):
                continue
            for title in MOVED_FROM_README:
                if title in line and f"## {title}" not in readme:
                    stale.append(f"{source.relative_to(REPO)}:{number}: {line.strip()}")
    assert not stale, "\n".join(stale)


def test_the_readme_example_is_a_spec_and_kernel_that_work(tmp_path: Path) -> None:
    """The README's example spec generates, and its kernel computes the spec's reference."""
    import torch
    from torch import Tensor

    from _support import run_cli

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    spec = re.search(r"^```toml\n(.*?)^```$", readme, re.MULTILINE | re.DOTALL)
    kernel = re.search(r"^```python\n(.*?)^```$", readme, re.MULTILINE | re.DOTALL)
    assert spec and kernel
    assert run_cli("new", "mylib::softplus", cwd=tmp_path).exit_code == 0
    (tmp_path / "ops" / "softplus.toml").write_text(spec[1])
    generate = run_cli("generate", cwd=tmp_path)
    assert generate.exit_code == 0, generate.output
    namespace = {"torch": torch, "Tensor": Tensor}
    exec(kernel[1], namespace)
    x = torch.randn(8, 16, dtype=torch.float64)
    expected = torch.nn.functional.softplus(x, 2.0)
    assert torch.allclose(namespace["softplus"](x, 2.0), expected)
