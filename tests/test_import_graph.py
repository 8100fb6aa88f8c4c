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
    assert "opgen.project.load" in graph["opgen.generate"]  # `from .project import load_project`
    assert "opgen.scaffold.new_op" in graph["opgen.commands.new"]  # imported inside the command function
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    # a sibling import does not run the package again; importing the package itself does
    assert "opgen.testing" not in graph["opgen.testing._compile"]
    assert "opgen.targets" in graph["opgen.targets.python"]  # `from . import Artifact`


def test_no_import_cycles() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# opgen's layers, lowest first: a module may import its own layer and the layers before it, never
# one after it. Each entry is a package (or a top-level module); one layer may hold several.
_LAYERS: list[tuple[str, ...]] = [
    ("opgen", "opgen.errors", "opgen.stages"),  # the package's face, diagnostics, stage timings
    ("opgen.spec",),  # the spec model and its validation: pure
    ("opgen.api",),  # what templates print: pure functions of the model
    ("opgen.write",),  # confined file operations, the plan, merges, the manifest
    ("opgen.incremental",),  # the generate cache and what it keys on
    ("opgen.project",),  # a project loaded from disk
    ("opgen.targets",),  # the artifact table: which template makes which file
    ("opgen.render",),  # templates to text, formatted
    ("opgen.generate",),  # the orchestrator
    ("opgen.build",),  # `opgen build`
    ("opgen.scaffold",),  # `opgen new`
    ("opgen.adopt",),  # `opgen import`
    ("opgen.bench",),  # `opgen bench`
    ("opgen.commands",),
    ("opgen.app",),
    ("opgen.cli",),
    ("opgen.__main__",),
]
# shipped into generated projects (runtime/) or imported by their tests (testing/): no other opgen code
_STANDALONE = ("opgen.runtime", "opgen.testing")


def _layer(name: str) -> int | str:
    """The index of the layer holding module `name` (its longest matching entry), or a standalone package."""
    best, index = "", -1
    for i, layer in enumerate(_LAYERS):
        for entry in layer:
            if (name == entry or name.startswith(entry + ".")) and len(entry) > len(best):
                best, index = entry, i
    for entry in _STANDALONE:
        if name == entry or name.startswith(entry + "."):
            return entry
    assert index >= 0, f"{name} is in no layer of _LAYERS: add its package there"
    return index


def test_each_layer_imports_only_the_layers_below_it() -> None:
    """No arrow runs back up: write/ and incremental/ know no api/, targets/ no write/, spec/ nothing
    but errors; runtime/ and testing/ import no other opgen code."""
    graph = _graph()
    upward = []
    for name, targets in graph.items():
        mine = _layer(name)
        for target in targets:
            theirs = _layer(target)
            if isinstance(mine, str):
                if mine != theirs and target != "opgen":
                    upward.append(f"{name} -> {target}")
            elif not isinstance(theirs, str) and theirs > mine:
                upward.append(f"{name} -> {target}")
    assert not upward, "imports of a later layer: " + ", ".join(sorted(upward))


def test_the_top_level_is_the_stages() -> None:
    """`ls opgen/` shows the pipeline: stage folders and at most 8 loose modules."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= 8, loose
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    layered = {e.split(".")[1] for layer in _LAYERS for e in layer if e.count(".") == 1}
    layered |= {e.split(".")[1] for e in _STANDALONE}
    assert folders <= layered, sorted(folders - layered)


def test_the_layer_check_sees_an_upward_import() -> None:
    assert _layer("opgen.write.plan") < _layer("opgen.targets.python")
    assert _layer("opgen.api.context") < _layer("opgen.render.outputs")
    assert _layer("opgen.testing._eager") == "opgen.testing"


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
