"""The figures a report shows, computed from a tuning result (pure, no plotting).

- ``latency_series``: per candidate, its measured medians (with p20/p80) by size, every call
  at a size pooled;
- ``band_spans``: the plan's bands clipped to the measured range, the
  fallback above the last band;
- ``speedups``: at every size where the table's choice and the process-group
  baseline were both measured, ``time(baseline) / time(choice)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from artune.measure.records import Candidate
from artune.measure.stats import geomean
from artune.tune.compare import usable
from artune.tune.regret import choice
from artune.tune.tuner import WorldResult, plan_table


@dataclass(frozen=True)
class Point:
    """One measured median with its p20/p80."""

    size: int
    time_us: float
    p20_us: float
    p80_us: float


@dataclass(frozen=True)
class Speedup:
    """The table's choice against the baseline at one size."""

    size: int
    choice: Candidate
    choice_us: float
    baseline_us: float

    @property
    def ratio(self) -> float:
        """``baseline / choice``: how many times faster the table's choice is."""
        return self.baseline_us / self.choice_us


def latency_series(result: WorldResult) -> dict[str, list[Point]]:
    """Usable measurements per candidate key, sorted by size (the baseline's first)."""
    series: dict[str, dict[int, Point]] = {}
    for m in result.pooled():
        if usable(m):
            series.setdefault(m.candidate.key, {})[m.size_bytes] = Point(m.size_bytes, m.time_us, m.p20_us, m.p80_us)
    order = sorted(series, key=lambda k: (k != result.baseline, k))
    return {k: [series[k][s] for s in sorted(series[k])] for k in order}


def band_spans(result: WorldResult) -> list[tuple[int, int, str]]:
    """``(lower, upper, algorithm)`` of each band, clipped to the measured sizes."""
    sizes = [m.size_bytes for m in result.measurements]
    if not sizes:
        return []
    lo_all, hi_all = min(sizes), max(sizes)
    spans = [(lower, hi_all if upto is None else upto, names[0]) for lower, upto, names in result.plan.spans()]
    return [(max(lo, lo_all), min(hi, hi_all), name) for lo, hi, name in spans if hi >= lo_all and lo <= hi_all]


def speedups(result: WorldResult) -> list[Speedup]:
    """The table's choice against the baseline at every size where both were measured."""
    table = plan_table(result.plan)
    times: dict[tuple[Candidate, int], float] = {
        (m.candidate, m.size_bytes): m.time_us for m in result.pooled() if usable(m)
    }
    base = Candidate(result.baseline)
    out: list[Speedup] = []
    for size in sorted({m.size_bytes for m in result.measurements}):
        picked = choice(table, size, result.world_size, result.algorithms, result.plan.hosts)
        if (picked, size) in times and (base, size) in times:
            out.append(Speedup(size, picked, times[(picked, size)], times[(base, size)]))
    return out


def speedup_summary(points: list[Speedup]) -> tuple[float, float, Speedup | None]:
    """``(max, geometric mean, the point of the max)`` of the speedups (nan when there are none)."""
    if not points:
        return math.nan, math.nan, None
    best = max(points, key=lambda p: p.ratio)
    return best.ratio, geomean(p.ratio for p in points), best
