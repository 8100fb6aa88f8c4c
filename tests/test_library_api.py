"""The command line is a thin layer: the library API works without typer, and `opgen --help`
imports none of the heavy modules a command needs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

_LIBRARY = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    from opgen.build.run import build_project
    from opgen.generate import generate
    from opgen.scaffold.new_op import new_op
    from opgen.render.overrides import acknowledge, eject, list_templates, template_folder, upstream_diff

    root = Path(sys.argv[1])
    made = new_op(root, "mylib::foo")
    assert made.spec == "ops/foo.toml" and not made.generated.failed
    assert generate(root, check=True).stale == []
    target, set_option = eject(root, template_folder(root), "python/kernel.py.j2")
    assert set_option and target.is_file()
    assert any(info.overridden for info in list_templates(root, template_folder(root)))
    assert upstream_diff(root, template_folder(root), "python/kernel.py.j2") == ""
    acknowledge(root, "python/kernel.py.j2")
    outcome = build_project(root)
    assert outcome.ok and "nothing to build" in outcome.build.summary, outcome.build.summary
    assert "typer" not in sys.modules, "the library imported typer"
    print("ok")
    """
)


def test_the_library_api_runs_without_typer(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", _LIBRARY, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_help_imports_no_heavy_module(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "opgen", "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "generate" in run.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "opgen.cli" in imported and "opgen.commands.generate" in imported
    heavy = sorted(m for m in imported if m.split(".")[0] in ("torch", "torchgen", "jinja2", "black", "numpy", "rich", "markdown_it"))
    assert not heavy, heavy
