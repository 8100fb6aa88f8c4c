"""pytest plugin for the runtime matrix: each test's outcome and its gradcheck calls.

Loaded with `-p gradcheck_counter` in the generated project; writes a JSON report
to $RTM_REPORT: {"outcomes": {nodeid: outcome}, "gradchecks": {nodeid: calls},
"forward_gradchecks": {nodeid: calls}}. Only direct calls of torch.autograd.gradcheck
count (gradgradcheck's own calls do not); forward-mode-only calls
(check_backward_ad=False) are counted apart.
"""

from __future__ import annotations

import json
import os

import pytest
import torch

_outcomes: dict[str, str] = {}
_gradchecks: dict[str, int] = {}
_forward_gradchecks: dict[str, int] = {}
_current: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    original = torch.autograd.gradcheck

    def counting(*args, **kwargs):
        if _current:
            counts = _gradchecks if kwargs.get("check_backward_ad", True) else _forward_gradchecks
            counts[_current[-1]] = counts.get(_current[-1], 0) + 1
        return original(*args, **kwargs)

    torch.autograd.gradcheck = counting


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    _current.append(item.nodeid)
    try:
        yield
    finally:
        _current.pop()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or report.outcome != "passed":
        _outcomes[report.nodeid] = report.outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    with open(os.environ["RTM_REPORT"], "w", encoding="utf-8") as file:
        json.dump(
            {
                "outcomes": _outcomes,
                "gradchecks": _gradchecks,
                "forward_gradchecks": _forward_gradchecks,
            },
            file,
            indent=1,
            sort_keys=True,
        )
