"""The reference set's ops under seeded bad calls: each a clear error naming the op, or the result
of the spec's reference; never a crash, a hang or a silent wrong result (Note [Argument checks]).

The calls (tests/_runtime_fuzz.py) take the spec's samples and break one thing: a dtype, a
device (meta, one tensor or all), a shape, strides (a strided or an expanded view), an integer
argument at an int boundary, None for a tensor, or aliasing of written and read arguments. Each
runs in a child process (tests/_runtime_calls.py), so that a segfault is counted, not fatal.
"""

from __future__ import annotations

from collections import Counter

import pytest
from _runtime_calls import fuzz, summary

# this seed's calls crashed main's roi_align twice (sampling_ratio >= 2^31)
SEED = 1
CALLS = 1500


@pytest.mark.slow
def test_bad_calls_raise_clearly_or_match_the_reference(built_example):
    records = fuzz(built_example.root, SEED, CALLS)
    report = summary(records)
    print(report)  # the counts, in the test's output (-s or a failure)
    outcomes = Counter(r["outcome"] for r in records)
    assert len(records) == CALLS, report
    assert set(outcomes) <= {"result", "error"}, report
    # the calls reach both ends: the kernels run, and the checks refuse
    assert outcomes["result"] >= CALLS // 5 and outcomes["error"] >= CALLS // 5, report
    ops = {r["op"] for r in records}
    assert len(ops) >= 20, f"only {sorted(ops)} were called"
