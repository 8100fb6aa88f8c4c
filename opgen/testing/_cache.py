"""Where the generated tests keep Inductor's compile cache.

Inductor's caches do not key on the schemas of custom ops: after a schema
change they can serve code compiled for the old schema. The tests therefore
use one cache folder per set of schemas, inside the project, named by a hash
computed when they run, from what `ops/*.toml` declare about each op's
registration (name, schema, written arguments, tags). A spec edit that
changes none of these keeps the cache; the generated files hold no hash.

A folder the environment names is kept, except torch's own default: Inductor
writes that into the environment of a process the first time it compiles, so
every project tested from such a process (a notebook, a test suite) would
otherwise share one cache, and two ops of one name with different schemas
would get each other's compiled code.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import tempfile
import tomllib
from pathlib import Path

__all__ = ["inductor_cache_dir", "schema_digest", "use_inductor_cache_dir"]

_REGISTRATION_KEYS = ("name", "schema", "mutates", "tags")


def _registration(path: Path) -> str:
    """What of one spec decides the op's registered schema; the whole text if it does not parse
    (the tests will say why, and a cache of its own is harmless)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return text
    return json.dumps({key: data.get(key) for key in _REGISTRATION_KEYS}, sort_keys=True)


def schema_digest(root: str | Path) -> str:
    """A short hash of the registrations the project's specs declare (`ops/*.toml`)."""
    specs = sorted(
        path for path in Path(root, "ops").glob("*.toml") if not path.name.startswith(".")
    )
    text = "\n".join(_registration(path) for path in specs)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def inductor_cache_dir(root: str | Path) -> str:
    """`<root>/.opgen/cache/inductor-<schema digest>`: the generated tests' TORCHINDUCTOR_CACHE_DIR."""
    return str(Path(root, ".opgen", "cache", f"inductor-{schema_digest(root)}"))


def torch_default_cache_dir() -> str:
    """The folder Inductor uses, and writes into the environment, when none is named."""
    try:
        user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    except (KeyError, OSError):
        return ""
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + user)


def use_inductor_cache_dir(root: str | Path) -> None:
    """Point TORCHINDUCTOR_CACHE_DIR at the project's folder unless the environment names one
    other than torch's default."""
    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if current is None or os.path.abspath(current) == torch_default_cache_dir():
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache_dir(root)
