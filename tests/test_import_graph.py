"""opgen's import graph: acyclic, and each stage imports only the stages before it.

Every `import` statement of every module counts, those inside functions too
(a cycle hidden in a function-level import is still a cycle), with relative
imports resolved. Importing `a.b.c` runs the packages `a` and `a.b` first, so
it is an edge to each of them as well, except to the packages that hold the
importing module itself: they began running before it did (a package whose
`__init__` re-exports its modules, `opgen.testing`, is no cycle as long as
those modules import each other and not the package).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "opgen"


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every opgen module that importing `name` imports, directly."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets.add(source)
            targets.update(f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in modules)
    own = set(_with_parents(name)[:-1])  # the packages holding `name`: already running
    edges = {
        parent
        for target in targets
        for parent in _with_parents(target)
        if parent in modules and (parent == target or parent not in own)
    }
    edges.discard(name)
    return edges


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_walk_sees_function_level_and_relative_imports() -> None:
    graph = _graph()
    assert len(graph) > 30
    assert "opgen.project" in graph["opgen.generate"]  # `from .project import load_project`
    assert "opgen.new" in graph["opgen.commands.new"]  # imported inside the command function
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    # a sibling import does not run the package again; importing the package itself does
    assert "opgen.testing" not in graph["opgen.testing._compile"]
    assert "opgen.targets" in graph["opgen.targets.python"]  # `from . import Artifact`


def test_no_import_cycles() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# stage -> the opgen modules it may import (besides its own package)
_ALLOWED = {
    "opgen.spec": {"opgen.errors"},
    "opgen.api": {"opgen.spec", "opgen.errors"},
}


def test_early_stages_import_only_earlier_ones() -> None:
    """spec/ knows nothing of later stages; api/ is pure functions of the model: no project, targets, writer or render."""
    graph = _graph()
    for stage, allowed in _ALLOWED.items():
        for name, targets in graph.items():
            if name != stage and not name.startswith(stage + "."):
                continue
            bad = sorted(t for t in targets if t != "opgen" and t != stage and not t.startswith(stage + ".") and not any(t == a or t.startswith(a + ".") for a in allowed))
            assert not bad, f"{name} imports {bad}"


def test_the_command_line_is_a_thin_layer_over_the_library() -> None:
    """commands/* share helpers through commands/_support.py, never cli's or app's; app.py (the
    typer application) imports them up front; cli.py imports app.py only when typer must parse
    the command line (Note [Direct generate] in cli.py)."""
    graph = _graph()
    for name, targets in graph.items():
        if name.startswith("opgen.commands"):
            assert not {"opgen.cli", "opgen.app"} & targets, name
    commands = lambda targets: {t for t in targets if t.startswith("opgen.") and t != "opgen.commands" and not t.startswith("opgen.commands.")}  # noqa: E731
    assert not commands(graph["opgen.app"]), graph["opgen.app"]
    assert commands(graph["opgen.cli"]) == {"opgen.app"}, graph["opgen.cli"]
    tree = ast.parse((PACKAGE / "app.py").read_text(encoding="utf-8"))
    late = [n for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not late, "app.py imports inside a function"
    cli = ast.parse((PACKAGE / "cli.py").read_text(encoding="utf-8"))
    top = {a.name for n in cli.body if isinstance(n, ast.Import) for a in n.names}
    top |= {n.module or "" for n in cli.body if isinstance(n, ast.ImportFrom)}
    assert not {m for m in top if m.split(".")[0] in ("typer", "click", "app")}, top
