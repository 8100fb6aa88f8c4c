"""What one template render may spend: seconds, and characters written or built.

Note [Bounded rendering] in render/sandbox.py says how the sandbox spends it; this
module holds the bounds, the budget and the measure of a value, and imports no
jinja2.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import Diagnostic, OpgenError

__all__ = [
    "RenderLimits",
    "RenderBudget",
    "RenderLimitExceeded",
    "SECONDS_VARIABLE",
    "MB_VARIABLE",
    "ITEM",
]

SECONDS_VARIABLE = "OPGEN_RENDER_SECONDS"
MB_VARIABLE = "OPGEN_RENDER_MB"
_V = TypeVar("_V")  # a value a template built, returned as it came

_MIB = 1 << 20
ITEM = 8  # what an item of a list (a reference) counts, in characters
_MAX_INT_BITS = 1 << 16  # integers a template builds with * and **: ~20,000 digits
_MAX_DEPTH = 200  # nesting of a value a template prints (Python's repr stops near 1000)


@dataclass(frozen=True)
class RenderLimits:
    """The bounds on rendering one template: seconds, and characters written and built."""

    seconds: float = 10.0
    chars: int = 64 * _MIB

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> RenderLimits:
        """The defaults, or what OPGEN_RENDER_SECONDS and OPGEN_RENDER_MB say.

        Read from the environment, not opgen.toml: whoever runs opgen sets them, and a
        pull request cannot raise them for `opgen generate --check`."""
        seconds, megabytes = cls.seconds, float(cls.chars // _MIB)
        problems = []
        for name, default in ((SECONDS_VARIABLE, seconds), (MB_VARIABLE, megabytes)):
            text = environ.get(name, "").strip()
            if not text:
                continue
            try:
                value = float(text)
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and value > 0):
                problems.append(
                    Diagnostic(
                        None,
                        None,
                        f"{name}={text!r} is not a positive number",
                        f"unset it (the default is {default:g}) or set it to a larger bound, "
                        f"e.g. {name}={default * 3:g}",
                    )
                )
            elif name == SECONDS_VARIABLE:
                seconds = value
            else:
                megabytes = value
        if problems:
            raise OpgenError(problems)
        return cls(seconds, max(1, int(megabytes * _MIB)))

    def describe_chars(self) -> str:
        return f"{self.chars / _MIB:g} MiB"


class RenderLimitExceeded(Exception):
    """A render went past a bound of `RenderLimits`; render/environment.py names the template and line."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


_TIME_HINT = (
    "a template only lays out the variables it receives: remove the loop or the recursion "
    f"that runs this long; for a template you trust that needs longer, raise {SECONDS_VARIABLE}"
)
_SIZE_HINT = (
    "a template only lays out the variables it receives: make it write and build less text; "
    f"for a template you trust that needs more, raise {MB_VARIABLE}"
)


class RenderBudget:
    """One render's deadline, and the characters it may still write and build.

    What a template writes (its output) and what it builds (values made by
    operators, filters, method calls, slices) are counted apart, each up to
    `limits.chars`. `write` and `build` count; `need` refuses, before it is
    built, a value larger than what is left to build (it counts nothing)."""

    def __init__(self, limits: RenderLimits, checked: bool = True) -> None:
        self.limits = limits
        self.checked = checked  # False: a render of opgen's own templates, counted at the end
        self.left = limits.chars  # to build
        self.left_to_write = limits.chars
        self.deadline = time.monotonic() + limits.seconds
        self.active = True

    # -- time ------------------------------------------------------------------------------

    def tick(self) -> None:
        """Stop the render once past its deadline."""
        if time.monotonic() > self.deadline:
            raise self.timed_out()

    def timed_out(self) -> RenderLimitExceeded:
        self.active = False
        return RenderLimitExceeded(
            f"rendering this template took more than {self.limits.seconds:g} s (the bound on "
            "one template); it was stopped here",
            _TIME_HINT,
        )

    # -- size ------------------------------------------------------------------------------

    def need(self, size: int, what: str) -> None:
        """Refuse to build a value of `size` characters when less than that is left."""
        if size > self.left:
            raise self._too_large(what, size)

    def build(self, size: int, what: str) -> None:
        self.left -= size
        if self.left < 0:
            raise self._too_large(what, size)

    def build_value(self, value: _V, what: str) -> _V:
        """Count a value the template built (a text, bytes or a container); returns it."""
        if isinstance(value, (str, bytes)):
            self.build(len(value), what)
        elif isinstance(value, (list, tuple, dict, set, frozenset)):
            self.build(len(value) * ITEM, what)
        return value

    def _too_large(self, what: str, size: int) -> RenderLimitExceeded:
        return RenderLimitExceeded(
            f"{what} would build {size} characters, past the {self.limits.describe_chars()} "
            "one template may build in all (values made by operators, filters and calls)",
            _SIZE_HINT,
        )

    def write(self, size: int, what: str) -> None:
        self.left_to_write -= size
        if self.left_to_write < 0:
            raise self._too_much_output(what)

    def check_output(self, size: int) -> None:
        """The whole text a render wrote (built-in templates are not counted as they write)."""
        if size > self.limits.chars:
            raise self._too_much_output("the text written")

    def _too_much_output(self, what: str) -> RenderLimitExceeded:
        return RenderLimitExceeded(
            f"{what}: the template writes more than {self.limits.describe_chars()}, the bound "
            "on one template's output",
            _SIZE_HINT,
        )

    def text(self, value: Any, what: str = "writing a value") -> str:
        """`str(value)` for the output, measured before it is made, and counted as written."""
        if type(value) is str:
            text: str = value
        else:
            if self.measure(value) > self.left_to_write:
                raise self._too_much_output(what)
            text = str(value)
        self.write(len(text), what)
        return text

    def measure(self, value: Any) -> int:
        """An estimate of `len(str(value))`, from above where it can be, without building it.

        A container is walked (each distinct one once, so shared items cost
        their size each time they would be printed, not the walk); nesting
        deeper than `_MAX_DEPTH` is refused."""
        if isinstance(value, str):
            return len(value)
        if value is None or isinstance(value, (bool, int, float)):
            return _Measure.scalar(value)
        return _Measure(self).size(value, 0, top=True)

    def bits(self, bits: int, what: str) -> None:
        """Refuse an integer of more than `_MAX_INT_BITS` bits (multiplying such is slow)."""
        if bits > _MAX_INT_BITS:
            raise RenderLimitExceeded(
                f"{what} would build an integer of about {bits} bits, more than the "
                f"{_MAX_INT_BITS} a template may build",
                "a template only lays out the variables it receives: compute less",
            )


class _Measure:
    """One walk of `RenderBudget.measure`: sizes of the containers seen, by identity."""

    def __init__(self, budget: RenderBudget) -> None:
        self.budget = budget
        self.known: dict[int, int] = {}
        self.open: set[int] = set()

    @staticmethod
    def scalar(value: Any) -> int:
        """A number's, a bool's or None's text, from above."""
        if isinstance(value, int) and not isinstance(value, bool):
            return value.bit_length() * 3 // 10 + 2
        return 32

    def size(self, value: Any, depth: int, top: bool = False) -> int:
        if isinstance(value, str) and (top or len(value) < 4096):
            return len(value) if top else _repr_size(value)
        if value is None or isinstance(value, (bool, int, float, complex)):
            return self.scalar(value)
        key = id(value)
        if key in self.known:
            return self.known[key]
        if isinstance(value, (str, bytes, bytearray)):  # a long one: sized once per walk
            size = _repr_size(value) if isinstance(value, str) else 4 * len(value) + 3
            self.known[key] = size
            return size
        if key in self.open:
            return 5  # a value that holds itself: repr prints [...]
        if depth > _MAX_DEPTH:
            raise RenderLimitExceeded(
                f"printing a value nested more than {_MAX_DEPTH} levels deep",
                "a template only lays out the variables it receives: nest less",
            )
        self.open.add(key)
        try:
            size = self._container(value, depth)
        finally:
            self.open.discard(key)
        self.known[key] = size
        return size

    def _container(self, value: Any, depth: int) -> int:
        namespace = _namespace_attrs(value)
        if namespace is not None:
            return 14 + self.size(namespace, depth + 1)
        items: Iterable[Any]
        if isinstance(value, Mapping):
            items = (item for pair in value.items() for item in pair)
        elif isinstance(value, (list, tuple, set, frozenset)) or _is_view(value):
            items = value
        else:
            return len(repr(value))  # a value from the context, or a small object (a macro)
        total = 2
        for item in items:
            total += self.size(item, depth + 1) + 2
            if total > self.budget.limits.chars:
                break  # over any budget already: the exact figure does not matter
        return total


def _repr_size(text: str) -> int:
    """`len(repr(text))`, from above: the usual escapes take 2 characters, others at most 4."""
    size = len(text) + 2 + text.count("\\")
    if text.isprintable():
        return size
    escaped = sum(text.count(c) for c in "\n\t\r")
    plain = text.replace("\n", "").replace("\t", "").replace("\r", "")
    return size + escaped + (0 if plain.isprintable() else 3 * len(plain))


def _namespace_attrs(value: Any) -> dict[str, Any] | None:
    """The attributes of a jinja2 `namespace()`, whose repr prints them all."""
    if type(value).__name__ != "Namespace":
        return None
    attrs = getattr(value, "_Namespace__attrs", None)
    return attrs if isinstance(attrs, dict) else None


def _is_view(value: Any) -> bool:
    return type(value).__name__ in ("dict_keys", "dict_values", "dict_items")
