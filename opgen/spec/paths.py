"""Where a project keeps its inputs: `opgen.toml` at the root, one spec per op under `ops/`."""

from __future__ import annotations

__all__ = ["CONFIG_FILE", "OPS_DIR"]

CONFIG_FILE = "opgen.toml"
OPS_DIR = "ops"
