"""What a [sharding] table generates, run in one process (the distributed runs: test_sharding_distributed.py).

The rules module is imported only where DTensor already is; the generated
rule helpers give the placements the rule table of docs/sharding.md promises; a mutating
op refuses what it cannot keep; the cache key is widened only where a
decision depends on a non-tensor argument; a custom rule is the user's file.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from opgen.generate import generate
from opgen.scaffold.new_op import new_op

from _sharding_support import make_project
from _support import EXAMPLE


def _project(root: Path, rule: str | None, schema: str = "(Tensor x, float alpha) -> Tensor") -> Path:
    new_op(root, "mylib::foo", schema=schema)
    spec = root / "ops" / "foo.toml"
    text = spec.read_text()
    if rule:
        text += f'\n[sharding]\nrule = "{rule}"\n'
    spec.write_text(text)
    assert not generate(root).failed
    return root


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_a_project_without_rules_has_no_sharding_files(tmp_path: Path) -> None:
    root = _project(tmp_path, None)
    assert not (root / "mylib" / "sharding.py").exists()
    assert not (root / "tests" / "test_sharding.py").exists()
    assert "sys" not in (root / "mylib" / "__init__.py").read_text()
    assert "dist_pool" not in (root / "tests" / "conftest.py").read_text()


@pytest.mark.slow  # over 5 s: the full suite runs it
def test_the_rules_load_only_with_dtensor(tmp_path: Path) -> None:
    root = _project(tmp_path, "elementwise")
    run = _python(
        """
        import sys
        import mylib
        assert "torch.distributed.tensor" not in sys.modules, "the package imported DTensor"
        assert "mylib.sharding" not in sys.modules
        import torch.distributed.tensor
        from torch.distributed.tensor import DTensor
        import mylib.sharding
        funcs = DTensor._op_dispatcher.sharding_propagator.op_strategy_funcs
        assert mylib.sharding.RULES.keys() == {"mylib::foo"}
        assert any(str(op) == "mylib.foo.default" for op in funcs), "no rule registered"
        """,
        root,
    )
    assert run.returncode == 0, run.stderr
    run = _python(
        """
        import sys
        import torch.distributed.tensor
        import mylib
        assert "mylib.sharding" in sys.modules, "DTensor was loaded: the package registers its rules"
        """,
        root,
    )
    assert run.returncode == 0, run.stderr


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The generated rules module of a project with elementwise, rowwise and mutating ops."""
    root = make_project(tmp_path_factory.mktemp("rules"))
    sys.path.insert(0, str(root))
    try:
        import shardlib.sharding
    finally:
        sys.path.remove(str(root))
    return shardlib.sharding


def _spec(shape: tuple[int, ...], *placements: Any, mesh: int = 2) -> SimpleNamespace:
    import torch

    return SimpleNamespace(
        shape=torch.Size(shape), ndim=len(shape), placements=placements, mesh=SimpleNamespace(size=lambda: mesh)
    )


def test_elementwise_shards_each_dim_of_the_broadcast_shape(rules: Any) -> None:
    from torch.distributed.tensor import Replicate as R
    from torch.distributed.tensor import Shard as S

    x, b = _spec((5, 3), R()), _spec((3,), R())
    assert rules._elementwise((x, b, 2.0)) == [
        ([R()], [R(), R(), None]),
        ([S(0)], [S(0), R(), None]),  # b has no dim 0: it stays whole
        ([S(1)], [S(1), S(0), None]),
    ]
    ones = _spec((5, 1), R())
    assert rules._elementwise((x, ones))[2] == ([S(1)], [S(1), R()])  # broadcast along dim 1


def test_rowwise_never_shards_the_last_dim_and_sums_the_weight_gradients(rules: Any) -> None:
    from torch.distributed.tensor import Partial as P
    from torch.distributed.tensor import Replicate as R
    from torch.distributed.tensor import Shard as S

    grad, x, weight = _spec((3, 5, 7), R()), _spec((3, 5, 7), R()), _spec((7,), R())
    assert rules._rowwise((grad, x, weight, 1e-5), ("rows", "sum", "sum")) == [
        ([R(), R(), R()], [R(), R(), R(), None]),
        ([S(0), P(), P()], [S(0), S(0), R(), None]),
        ([S(1), P(), P()], [S(1), S(1), R(), None]),
    ]


def test_a_mutated_argument_keeps_its_placement_or_the_call_refuses(rules: Any) -> None:
    from torch.distributed.tensor import Replicate as R
    from torch.distributed.tensor import Shard as S

    keep = rules._keeping("mylib::add_out", lambda a, b, out: rules._elementwise((a, b, out), 0), {"out": 2})
    a = _spec((7, 13), S(0))
    assert keep(a, a, _spec((7, 13), S(1))) == [([], [S(1), S(1), S(1)])]
    assert keep(a, a, _spec((7, 13), R())) == [([], [R(), R(), R()])]
    with pytest.raises(NotImplementedError, match=r"`out` is placed \(Shard\(dim=0\), Replicate\(\)\); it needs one placement"):
        keep(a, a, _spec((7, 13), S(0), R()))  # a 2-D mesh
    with pytest.raises(NotImplementedError, match=r"`out` is Shard\(dim=0\) \(dim 0 is smaller than the mesh\)"):
        keep(a, a, _spec((1, 13), S(0)))
    norm = rules._keeping("mylib::rms_norm", lambda out, x, w, eps: rules._rowwise((out, x, w, eps), ()), {"out": 0})
    with pytest.raises(NotImplementedError, match=r"`out` is Shard\(dim=1\), which this rule cannot keep: redistribute it to one of Replicate\(\), Shard\(dim=0\)"):
        norm(_spec((5, 4), S(1)), _spec((5, 4), R()), _spec((4,), R()), 1e-6)


def test_the_cache_key_is_widened_only_where_a_decision_depends_on_it() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "opgen", "generate", "--check"],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=300,
    )
    warned = {line.split(":")[0] for line in run.stderr.splitlines() if "sharding cache" in line}
    # crop's output shape depends on box (an int[]: not in DTensor's key); crop and paste are custom rules.
    # layer_norm's eps and muladd's c are floats no built-in rule or output shape depends on.
    assert warned == {"ops/crop.toml", "ops/paste.toml"}, run.stderr
    assert "sharding_cache_key" not in (EXAMPLE / "example_ops" / "sharding.py").read_text()


def _opt_in(root: Path) -> None:
    config = root / "opgen.toml"
    text = config.read_text().replace("[options]\n", '[options]\nprivate_torch = ["sharding_cache_key"]\n')
    config.write_text(text)


def test_a_fake_shape_from_a_float_widens_the_key(tmp_path: Path) -> None:
    root = _project(tmp_path, "replicate", "(Tensor x, float scale) -> Tensor")
    spec = root / "ops" / "foo.toml"
    text = spec.read_text()
    assert 'like = "x"' in text
    spec.write_text(text.replace('like = "x"', 'expr = "x.new_empty(int(x.shape[0] * scale))"'))
    result = generate(root)
    assert not result.failed
    assert [w.message.split(",")[0] for w in result.spec_warnings] == [
        "the sharding decision depends on scale"
    ]
    _opt_in(root)
    result = generate(root)
    assert not result.failed and not result.spec_warnings
    text = (root / "mylib" / "sharding.py").read_text()
    assert "sharding_cache_key(torch.ops.mylib.foo.default, 1, ())" in text


def test_without_the_private_names_the_rules_register_and_warn(tmp_path: Path) -> None:
    root = _project(tmp_path, "custom", "(Tensor x, bool flag) -> Tensor")
    _opt_in(root)
    assert not generate(root).failed
    rule = root / "mylib" / "sharding_rules" / "foo.py"
    rule.write_text(rule.read_text().replace(
        'raise NotImplementedError(f"not implemented: edit {__file__}")  # opgen: placeholder',
        "return [([Replicate()], [Replicate(), None])]",
    ))
    run = _python(
        """
        import warnings
        import torch.distributed.tensor._op_schema as schema
        import torch.distributed.tensor.experimental  # has its own reference to the name
        del schema.RuntimeSchemaInfo  # what a torch that moved it looks like to _private_torch.py
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import mylib.sharding
        messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(messages) == 1 and "private_torch check is not installed" in messages[0], messages
        import mylib._private_torch
        assert mylib._private_torch.MISSING, mylib._private_torch.MISSING
        from torch.distributed.tensor import DTensor
        funcs = DTensor._op_dispatcher.sharding_propagator.op_strategy_funcs
        assert any(str(op) == "mylib.foo.default" for op in funcs), "the rule was not registered"
        """,
        root,
    )
    assert run.returncode == 0, run.stderr


def test_a_custom_rule_is_the_users_file_and_takes_schema_changes(tmp_path: Path) -> None:
    root = _project(tmp_path, "custom", "(Tensor x) -> Tensor")
    rule = root / "mylib" / "sharding_rules" / "foo.py"
    assert "def strategies(x) -> list" in rule.read_text()
    mine = "return [([Replicate()], [Replicate()]), ([Shard(0)], [Shard(0)])]  # mine"
    rule.write_text(rule.read_text().replace(
        'raise NotImplementedError(f"not implemented: edit {__file__}")  # opgen: placeholder', mine
    ))
    spec = root / "ops" / "foo.toml"
    spec.write_text(spec.read_text().replace('"(Tensor x) -> Tensor"', '"(Tensor x, int k=1) -> Tensor"'))
    result = generate(root)
    assert not result.failed, result.summary()
    text = rule.read_text()
    assert "def strategies(x, k=1) -> list" in text and mine in text
    assert "return foo_rule.strategies(x, k)" in (root / "mylib" / "sharding.py").read_text()
