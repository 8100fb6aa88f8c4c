"""Generated sharding rules and their distributed tests, on real gloo processes.

The generated tests of a small project (tests/_sharding_support.py) must fail
for its deliberately wrong rules, each for the right reason, and pass for the
right ones; the pool they run on (opgen.testing.DistPool) must report failures
fast and never leave a process behind; and the tensor-parallel
example of docs/sharding.md must run as written.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from opgen.testing import DistPool
from opgen.testing._dist_pool import CollectiveTimeout

import _dist_payloads as payloads
from _sharding_support import make_project
from _support import EXAMPLE, REPO

pytestmark = pytest.mark.distributed


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("sharded"))


def _outcomes(project: Path, *args: str) -> dict[str, str]:
    """Run the project's generated tests; test name -> "" if it passed, else its failure text."""
    report = project / "report.xml"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            *args,
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode in (0, 1), run.stdout[-4000:] + run.stderr[-2000:]
    cases = ET.parse(report).getroot().iter("testcase")
    return {c.get("name", ""): "".join(f.text or "" for f in c.iter("failure")) for c in cases}


def test_the_generated_tests_catch_each_wrong_rule_and_pass_the_right_ones(project: Path) -> None:
    outcomes = _outcomes(project, "tests/test_sharding.py")
    assert sorted(outcomes) == sorted(
        f"test_{name}[float64]"
        for name in (
            "center",
            "fused_add_rms_norm",
            "normalize",
            "normalize_unkeyed",
            "rms_norm",
            "rownorm",
            "scale",
        )
    )
    for name in ("scale", "rms_norm", "fused_add_rms_norm", "normalize"):
        failure = outcomes[f"test_{name}[float64]"]
        assert failure == "", failure[-3000:]
    # A rule allowing Shard on the normalised last dim: DTensor follows it, the values are wrong.
    assert re.search(
        r"shard::rownorm, .*inputs \[Shard\(dim=1\)\], output 0: Tensor-likes are not close",
        outcomes["test_rownorm[float64]"],
    )
    # A rule promising a Shard output for an op that must replicate: the placement check fails.
    assert re.search(
        r"shard::center, .*inputs \[Shard\(dim=0\)\]: the rule promises outputs placed \[Replicate\(\)\], "
        r"DTensor produced \[Shard\(dim=0\)\]",
        outcomes["test_center[float64]"],
    )
    # Without the widened cache key, the decision made for last=True is served to last=False.
    assert re.search(
        r"shard::normalize_unkeyed, sample 2 .*inputs \[Shard\(dim=1\), None\]: the rule promises outputs placed \[Shard\(dim=1\)\]",
        outcomes["test_normalize_unkeyed[float64]"],
    )


def test_the_marker_selects_the_distributed_tests(project: Path) -> None:
    # pytest itself: `opgen test` would regenerate first, and the fixture edits a generated rule
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--co",
            "-m",
            "distributed",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    tests = [line for line in listed.stdout.splitlines() if "::" in line]
    assert tests and all(t.startswith("tests/test_sharding.py::") for t in tests), listed.stdout
    assert len(tests) == 7 and "deselected" in listed.stdout


@pytest.fixture(scope="module")
def pool(project: Path) -> Iterator[Any]:
    # The ranks inherit sys.path: the package, and the payloads in tests/.
    sys.path.insert(0, str(project))
    try:
        pool = DistPool(world_size=2, imports=["shardlib.sharding"])
        yield pool
        pool.close()
    finally:
        sys.path.remove(str(project))


def test_an_error_every_rank_shares_keeps_the_pool(pool: Any) -> None:
    assert pool.run(payloads.world) == [(0, 2), (1, 2)]
    starts = pool.starts
    with pytest.raises(
        AssertionError, match=r"(?s)--- rank 0, 1 ---\n.*the same failure on every rank"
    ):
        pool.run(payloads.raise_everywhere)
    assert pool.run(payloads.world) == [(0, 2), (1, 2)]
    assert pool.starts == starts, "a failure on every rank left the ranks idle: no restart needed"


def test_the_ranks_import_the_project_as_they_start(pool: Any) -> None:
    assert all("shardlib.sharding" in loaded for loaded in pool.run(payloads.loaded_modules))


def test_a_module_the_ranks_cannot_import_fails_the_first_run_naming_it() -> None:
    broken = DistPool(world_size=2, imports=["no_such_module_here"])
    try:
        with pytest.raises(
            AssertionError,
            match=r"(?s)starting the ranks failed.*No module named 'no_such_module_here'",
        ):
            broken.run(payloads.world)
        assert broken.starts == 1 and not broken._procs, "the ranks of a failed start stay closed"
    finally:
        broken.close()


def test_an_error_on_one_rank_is_reported_at_once(pool: Any) -> None:
    pool.run(payloads.world)  # started: time the failure alone
    begin = time.monotonic()
    with pytest.raises(AssertionError, match=r"(?s)boom on rank 1.*ranks \[0\] did not answer"):
        pool.run(payloads.raise_on_rank1)
    assert time.monotonic() - begin < 15, "waited for the collective timeout instead"
    assert pool.run(payloads.world) == [(0, 2), (1, 2)]  # a fresh pool


def test_a_hang_is_bounded_and_a_dead_rank_is_named(pool: Any) -> None:
    with pytest.raises(TimeoutError, match=r"ranks \[0\] did not answer within 5 s"):
        pool.run(payloads.collective_on_rank0_only, timeout_s=5)
    with pytest.raises(RuntimeError, match=r"rank 0 died \(exit code 3\)"):
        pool.run(payloads.die_on_rank0)
    assert pool.run(payloads.world) == [(0, 2), (1, 2)]


def test_a_stall_in_a_collective_runs_once_more_on_fresh_ranks(tmp_path: Path) -> None:
    # Rank 1 sleeps 8 s on its first call while rank 0 waits 2 s for it in a barrier.
    pool = DistPool(world_size=2, collective_timeout_s=2)
    try:
        marker = str(tmp_path / "calls")
        with pytest.warns(UserWarning, match=r"(?s)stall_rank1 stalled.*Timed out waiting") as seen:
            assert pool.run(payloads.stall_rank1, marker, 1) == [None, None]
        assert pool.starts == 2
        stalls = [str(w.message) for w in seen if "stalled" in str(w.message)]
        assert len(stalls) == 1 and "in stall_rank1" in stalls[0], "the silent rank 1's stack"
        with pytest.raises(CollectiveTimeout, match="the second attempt on fresh ranks"):
            with pytest.warns(UserWarning, match="stalled"):
                pool.run(payloads.stall_rank1, marker, 4)
        assert (tmp_path / "calls").read_text() == "4"
    finally:
        pool.close()


_ORPHANS = """
import os, sys
sys.path[:0] = [{project!r}, {tests!r}]
import _dist_payloads
from opgen.testing import DistPool
from opgen.testing._dist_pool import CollectiveTimeout
pool = DistPool()
print(*pool.run(_dist_payloads.pids), flush=True)
os.kill(os.getpid(), 9)
"""


def test_the_ranks_exit_when_the_coordinator_is_killed(project: Path) -> None:
    script = _ORPHANS.format(project=str(project), tests=str(Path(__file__).parent))
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == -signal.SIGKILL, run.stderr[-3000:]
    ranks = [int(pid) for pid in run.stdout.split()]
    assert len(ranks) == 2
    deadline = time.monotonic() + 20
    while any(Path(f"/proc/{pid}").exists() for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = [pid for pid in ranks if Path(f"/proc/{pid}").exists()]
    assert not alive, f"ranks {alive} outlived the killed coordinator"


def _docs_example() -> str:
    text = (REPO / "docs" / "sharding.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1
    return blocks[0]


def test_the_docs_tensor_parallel_example_runs_and_matches_the_block_unparallelised() -> None:
    build = subprocess.run(
        [sys.executable, "-m", "opgen", "build", "--no-generate"],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    sys.path.insert(0, str(EXAMPLE))
    try:
        pool = DistPool(world_size=2)
        try:
            results = pool.run(payloads.docs_example, _docs_example())
        finally:
            pool.close()
    finally:
        sys.path.remove(str(EXAMPLE))
    for values, grads, norm_grad in results:
        assert values and grads
        assert norm_grad == "(Partial(sum),)"  # each rank's part of the sum over the sequence
