"""A small project of Python ops with sharding rules: right ones, and wrong ones its generated tests must catch.

`make_project` writes the specs, generates, fills in the kernels and the
`custom` rules, then breaks two rules on purpose:

* `rownorm` (centre each row) has a custom rule that also shards the
  normalised last dim: each rank centres part of a row, so the values are wrong;
* `center` (subtract the mean of the whole tensor) has rule = "replicate", and
  its generated rule is edited to promise a Shard output as well;
* `normalize_unkeyed` is `normalize` without the widened cache key
  (Note [Private torch checks], `sharding_cache_key`): its rule depends on a bool argument. Its samples
  come from a generator of `testing_helpers.py`.

`scale` (elementwise, with a gradient), `rms_norm` and `fused_add_rms_norm`
(rowwise and mutating, with vLLM's schemas; `out` for `result`, a name opgen
keeps for gradient formulas) and `normalize` are right.
"""

from __future__ import annotations

from pathlib import Path

from opgen.generate import generate

# the project widens DTensor's cache key (Note [Private torch checks]) so that normalize_unkeyed
# can show what happens without it
CONFIG = (
    '[project]\nnamespace = "shard"\npackage = "shardlib"\n\n[options]\ncompile_backend = "aot_eager"\n'
    'private_torch = ["sharding_cache_key"]\n'
)

_SAMPLE_2D = '[[test.samples]]\nx = {shape = [5, 6]}\n'

SPECS = {
    "rownorm": (
        '(Tensor x) -> Tensor',
        'like = "x"',
        "custom",
        _SAMPLE_2D,
        "return x - x.mean(-1, keepdim=True)",
    ),
    "center": ('(Tensor x) -> Tensor', 'like = "x"', "replicate", _SAMPLE_2D, "return x - x.mean()"),
    "scale": (
        '(Tensor x, float alpha) -> Tensor',
        'like = "x"',
        "elementwise",
        '[[test.samples]]\nx = {shape = [5, 6]}\nalpha = 2.0\n\n[[test.samples]]\nx = {shape = [7]}\nalpha = -1.5\n',
        "return x * alpha",
    ),
    "rms_norm": (
        '(Tensor out, Tensor input, Tensor weight, float epsilon) -> ()',
        'checks = ["out.shape == input.shape", "weight.shape == input.shape[-1:]"]',
        "rowwise",
        "[[test.samples]]\nout = {shape = [5, 4], requires_grad = false}\ninput = {shape = [5, 4]}\n"
        "weight = {shape = [4]}\nepsilon = 1e-6\n\n[[test.samples]]\n"
        "out = {shape = [3, 5, 4], requires_grad = false}\ninput = {shape = [3, 5, 4]}\n"
        "weight = {shape = [4]}\nepsilon = 1e-3\n",
        "out.copy_(input * torch.rsqrt(input.pow(2).mean(-1, keepdim=True) + epsilon) * weight)",
    ),
    "fused_add_rms_norm": (
        '(Tensor input, Tensor residual, Tensor weight, float epsilon) -> ()',
        'checks = ["residual.shape == input.shape"]',
        "rowwise",
        "[[test.samples]]\ninput = {shape = [5, 4]}\nresidual = {shape = [5, 4]}\n"
        "weight = {shape = [4]}\nepsilon = 1e-6\n",
        "residual.add_(input); input.copy_(residual * torch.rsqrt(residual.pow(2).mean(-1, keepdim=True) + epsilon) * weight)",
    ),
}
# The same shape twice: only `last` tells the two samples apart.
_NORMALIZE = (
    '(Tensor x, bool last) -> Tensor',
    'like = "x"',
    "custom",
    '[[test.samples]]\nx = {shape = [5, 6]}\nlast = true\n\n[[test.samples]]\nx = {shape = [5, 6]}\nlast = false\n',
    "return x - x.mean(dim=-1 if last else 0, keepdim=True)",
)
SPECS["normalize"] = _NORMALIZE
# The same samples from a generator of testing_helpers.py: the distributed tests run them too.
SPECS["normalize_unkeyed"] = (*_NORMALIZE[:3], 'samples_from = "normalize_samples"\n', _NORMALIZE[4])
HELPERS = (
    'return [{"x": torch.randn(5, 6, dtype=dtype, device=device), "last": last} for last in (True, False)]'
)

MUTATES = {"rms_norm": ["out"], "fused_add_rms_norm": ["input", "residual"]}

CUSTOM_RULES = {
    # Wrong on purpose: Shard(1) splits the rows that rownorm centres.
    "rownorm": "return [([Replicate()], [Replicate()]), ([Shard(0)], [Shard(0)]), ([Shard(1)], [Shard(1)])]",
    "normalize": (
        "kept = x.ndim - 1 if last else 0  # the dim the op reduces over stays whole\n"
        "    return [([Replicate()], [Replicate(), None])] + [\n"
        "        ([Shard(d)], [Shard(d), None]) for d in range(x.ndim) if d != kept\n"
        "    ]"
    ),
}
CUSTOM_RULES["normalize_unkeyed"] = CUSTOM_RULES["normalize"]

# What the edits to the generated rules module replace, and with what.
BREAKS = (
    (
        "return [_replicated((x,), 1)]",  # center: promise a Shard output too
        "return [_replicated((x,), 1), ([Shard(0)], [Shard(0)])]",
    ),
    ("sharding_cache_key(torch.ops.shard.normalize_unkeyed.default, 1, ())\n", ""),
)


def _spec(name: str) -> str:
    schema, fake, rule, samples, _ = SPECS[name]
    return (
        f'name = "shard::{name}"\nschema = "{schema}"\n'
        + (f"mutates = {MUTATES[name]!r}\n".replace("'", '"') if name in MUTATES else "")
        + ('\n[grad]\nx = "grad * alpha"\n' if name == "scale" else "")
        + f"\n[fake]\n{fake}\n\n[sharding]\nrule = \"{rule}\"\n\n"
        + f'[test]\ndtypes = ["float64"]\n\n{samples}'
    )


def _fill(path: Path, body: str) -> None:
    """Replace the placeholder line of a stub with `body` (indented like it)."""
    text = path.read_text()
    lines = [line for line in text.splitlines() if "# opgen: placeholder" in line]
    assert len(lines) == 1, path
    indent = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
    text = text.replace(lines[0], indent + body)
    if "torch." in body and "\nimport torch\n" not in text:  # the stub imports what it uses
        text = text.replace("from torch import Tensor\n", "import torch\nfrom torch import Tensor\n")
    path.write_text(text)


def make_project(root: Path) -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "opgen.toml").write_text(CONFIG)
    for name in SPECS:
        (root / "ops" / f"{name}.toml").write_text(_spec(name))
    result = generate(root)
    assert not result.failed, result.summary()
    for name, (*_, kernel) in SPECS.items():
        _fill(root / "shardlib" / "kernels" / f"{name}.py", kernel)
    for name, body in CUSTOM_RULES.items():
        _fill(root / "shardlib" / "sharding_rules" / f"{name}.py", body)
    _fill(root / "shardlib" / "testing_helpers.py", HELPERS)
    rules = root / "shardlib" / "sharding.py"
    text = rules.read_text()
    for old, new in BREAKS:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    rules.write_text(text)
    return root
