"""Summaries of raw timing samples: median, p20, p80, p99, cv%, count; and how ratios average.

Pure functions on sequences of numbers. Quantiles use linear interpolation
between order statistics (numpy's default), so a summary of one sample is
that sample for every quantile. An empty sequence summarises to ``nan``
everywhere with ``count == 0``: callers decide what a missing figure means.
Ratios (regrets, speedups, one time over another) average by ``geomean``,
the one geometric mean of the house, the runtime's and the engine analysis's
alike (a leaf: it imports nothing of artune).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

NAN = float("nan")


@dataclass(frozen=True)
class Summary:
    """Order statistics of one set of samples (same unit as the samples)."""

    count: int
    median: float
    p20: float
    p80: float
    p99: float
    mean: float
    std: float  # population standard deviation (ddof=0)
    minimum: float
    maximum: float

    @property
    def cv_pct(self) -> float:
        """Coefficient of variation in percent: ``std / mean * 100`` (``nan`` when the mean is 0)."""
        if self.count == 0 or self.mean == 0 or math.isnan(self.mean):
            return NAN
        return self.std / self.mean * 100.0

    def as_dict(self) -> dict[str, float | int]:
        """Plain data (quantiles and cv%), for JSON."""
        return {
            "count": self.count,
            "median": self.median,
            "p20": self.p20,
            "p80": self.p80,
            "p99": self.p99,
            "mean": self.mean,
            "std": self.std,
            "cv_pct": self.cv_pct,
            "min": self.minimum,
            "max": self.maximum,
        }


EMPTY = Summary(0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN)


def summarize(samples: Sequence[float] | np.ndarray) -> Summary:
    """The summary of ``samples``; ``EMPTY`` for no samples. Non-finite samples are an error."""
    values = np.asarray(samples, dtype=np.float64).ravel()
    if values.size == 0:
        return EMPTY
    if not np.all(np.isfinite(values)):
        raise ValueError(f"summarize(): samples must be finite, got {values[~np.isfinite(values)][:3]}")
    p20, median, p80, p99 = np.percentile(values, [20.0, 50.0, 80.0, 99.0])
    return Summary(
        count=int(values.size),
        median=float(median),
        p20=float(p20),
        p80=float(p80),
        p99=float(p99),
        mean=float(values.mean()),
        std=float(values.std()),
        minimum=float(values.min()),
        maximum=float(values.max()),
    )


def median(samples: Sequence[float] | np.ndarray) -> float:
    """The median of ``samples`` (``nan`` when empty)."""
    return summarize(samples).median


def geomean(values: Iterable[float]) -> float:
    """The geometric mean of positive ``values``: ``nan`` for none, ``inf`` when one is infinite. Ratios average
    this way, so ``x`` and ``1 / x`` cancel. A value of 0 or below has no logarithm: ``ValueError``, on every
    Python (``statistics.geometric_mean`` returns 0 for a 0 from 3.12 on)."""
    values = list(values)
    if not values:
        return NAN
    if any(v <= 0 for v in values):
        raise ValueError(f"geomean(): the values must be positive, got {min(values)}")
    return statistics.geometric_mean(values)
