"""Where a run's time goes: seconds per stage, for `opgen generate --timings` and the speed benchmark."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

__all__ = ["Stages", "STAGES"]

STAGES = ("load", "validate", "render", "format", "write")


class Stages:
    """Seconds spent per stage. A stage entered inside another pauses it, so no time counts twice."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[str] = []
        self._since = 0.0

    def _charge(self, now: float) -> None:
        if self._stack:
            name = self._stack[-1]
            self.seconds[name] = self.seconds.get(name, 0.0) + now - self._since
        self._since = now

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self._charge(time.perf_counter())
        self._stack.append(name)
        try:
            yield
        finally:
            self._charge(time.perf_counter())
            self._stack.pop()

    @staticmethod
    def line_of(seconds: dict[str, float]) -> str:
        """`load 0.012 s, validate 0.000 s, ...`: every stage, in pipeline order."""
        names = [*STAGES, *sorted(set(seconds) - set(STAGES))]
        return ", ".join(f"{name} {seconds.get(name, 0.0):.3f} s" for name in names)
