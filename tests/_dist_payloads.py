"""Functions the tests send to the ranks of an `opgen.testing.DistPool` (importable there: `tests/` is on sys.path)."""

from __future__ import annotations

import os
from typing import Any


def world(mesh: Any) -> tuple[int, int]:
    import torch.distributed as dist

    return dist.get_rank(), dist.get_world_size()


def pids(mesh: Any) -> int:
    return os.getpid()


def loaded_modules(mesh: Any) -> list[str]:
    import sys

    return sorted(sys.modules)


def raise_everywhere(mesh: Any) -> None:
    raise ValueError("the same failure on every rank")


def raise_on_rank1(mesh: Any) -> None:
    import torch.distributed as dist

    if dist.get_rank() == 1:
        raise ValueError("boom on rank 1")
    dist.barrier()  # rank 0 waits here for a rank that will not come


def collective_on_rank0_only(mesh: Any) -> None:
    import torch.distributed as dist

    if dist.get_rank() == 0:
        dist.barrier()


def die_on_rank0(mesh: Any) -> None:
    import torch.distributed as dist

    if dist.get_rank() == 0:
        os._exit(3)
    dist.barrier()


def docs_example(mesh: Any, source: str) -> tuple[bool, bool, str]:
    """Run the tensor-parallel example of docs/sharding.md; compare it with its block unparallelised.

    Returns whether the outputs and the gradients match, and the placement of
    the norm's weight gradient (a partial sum over the sequence, reduced).
    """
    import torch

    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(source, "docs/sharding.md", "exec"), namespace)
    torch.manual_seed(0)  # the example seeds the same way before building its block
    reference = namespace["Block"]()
    x = namespace["x"]
    expected = reference(x)
    expected.sum().backward()
    block, y = namespace["block"], namespace["y"]
    values = bool(torch.allclose(y, expected, atol=1e-5))
    grads = all(
        torch.allclose(getattr(p.grad, "full_tensor", lambda g=p.grad: g)(), q.grad, atol=1e-4)
        for p, q in zip(block.parameters(), reference.parameters(), strict=True)
    )
    return values, grads, str(block.norm.weight.grad.placements)


def stall_rank1(mesh: Any, marker: str, times: int) -> None:
    """Rank 1 sleeps past the collective timeout on its first `times` calls (counted in the file
    `marker`), while rank 0 waits for it in a barrier."""
    import time
    from pathlib import Path

    import torch.distributed as dist

    if dist.get_rank() == 1:
        path = Path(marker)
        calls = int(path.read_text()) if path.exists() else 0
        path.write_text(str(calls + 1))
        if calls < times:
            time.sleep(8)
    dist.barrier()
