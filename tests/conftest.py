"""Fixtures shared by the test suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def chdir(tmp_path: Path):
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(old)
