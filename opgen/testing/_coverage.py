"""Warnings for what the samples leave under no check.

They are warnings rather than failures, so that a spec with many optional
arguments or dtypes is tested before its samples cover them all; pytest's
`-W error::opgen.testing.CoverageWarning` makes every one of them a failure.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import torch

from ._samples import Samples, dtype_coverage, materialize, optional_coverage

__all__ = [
    "CoverageWarning",
    "DtypeCoverageWarning",
    "OptionalPathWarning",
    "ShapeCoverageWarning",
    "check_dtype_coverage",
    "check_optional_coverage",
]


class CoverageWarning(UserWarning):
    """The samples leave part of what the spec declares under no check."""


class OptionalPathWarning(CoverageWarning):
    """No sample runs one of the paths (given, None) of an optional argument."""


class DtypeCoverageWarning(CoverageWarning):
    """No sample holds a tensor of one of the test's dtypes."""


class ShapeCoverageWarning(CoverageWarning):
    """The dynamic-shape or export test found no size of its sample that the op accepts grown."""


def check_optional_coverage(
    samples: Samples, *, optional: Iterable[str], spec: str = "the spec"
) -> None:
    """Warn when an optional argument is not given in some sample and None (or left out) in
    another: one path of the kernel then runs under no check (an `OptionalPathWarning`)."""
    lines = optional_coverage(list(materialize(samples, "cpu", torch.float32)), optional)
    missing = [line for line in lines.values() if "samples none" in line]
    if missing:
        warnings.warn(
            OptionalPathWarning(
                f"the samples of {spec} run only one path of an optional argument:\n  "
                + "\n  ".join(missing)
                + "\nadd a [[test.samples]] entry that gives it, or one with name = {none = true}"
            ),
            stacklevel=2,
        )


def check_dtype_coverage(
    samples: Samples, dtypes: Iterable[Any], *, spec: str = "the spec"
) -> None:
    """Warn when a dtype of `[test] dtypes` reaches no tensor of any sample: the reference check
    parametrized by that dtype then checks another one (a `DtypeCoverageWarning`)."""
    lines = dtype_coverage(samples, dtypes)
    missing = [line for line in lines.values() if "samples none" in line]
    if missing:
        warnings.warn(
            DtypeCoverageWarning(
                f"the samples of {spec} never hold a tensor of a test dtype:\n  "
                + "\n  ".join(missing)
                + "\nleave `dtype` out of a sample's tensors (they then take the test's dtype), "
                "or build them with the `dtype` a samples_from generator is given"
            ),
            stacklevel=2,
        )
