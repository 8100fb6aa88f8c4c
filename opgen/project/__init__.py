"""A project on disk: its `opgen.toml` and every op spec under `ops/`, loaded and checked together."""
