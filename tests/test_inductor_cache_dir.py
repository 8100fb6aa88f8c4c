"""The generated tests' Inductor cache: one folder per set of op schemas, inside the project,
unless the environment names another than torch's default (which Inductor itself writes into
the environment of any process that compiled, and subprocesses inherit)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from opgen.testing import inductor_cache_dir, use_inductor_cache_dir


def _project(root: Path, schema: str) -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "ramp.toml").write_text(f'name = "fac::ramp"\nschema = "{schema}"\n')
    return root


def test_two_schemas_of_one_op_get_two_folders(tmp_path: Path) -> None:
    one = _project(tmp_path / "one", "(SymInt n) -> Tensor")
    two = _project(tmp_path / "two", "(SymInt n, ScalarType? dtype=None) -> Tensor")
    assert Path(inductor_cache_dir(one)).name != Path(inductor_cache_dir(two)).name


def test_torch_default_in_the_environment_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path, "(SymInt n) -> Tensor")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    default = cache_dir()  # what Inductor writes into the environment of a process that compiled
    assert torch.__version__ and default
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default)
    use_inductor_cache_dir(root)
    assert Path(inductor_cache_dir(root)) == Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])


def test_a_folder_the_user_names_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path, "(SymInt n) -> Tensor")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    use_inductor_cache_dir(root)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")
