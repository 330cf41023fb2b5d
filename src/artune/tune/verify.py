"""``artune verify``: does an existing table still hold on this machine?

For every band bound of a plan (where one algorithm hands over to the next,
or to the fallback) the two algorithms are re-measured together, just below
the bound (the lower band's side) and just above it (the upper band's side),
by a factor of sqrt(2) or less when a band is narrower. The bound *holds*
when neither side's algorithm is beaten on its own side by more than noise
(the tuner's noise rule); drift is reported per bound as the margins on both
sides. A band whose upper end is the largest size (no hand-over) has nothing
to verify.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from artune.measure.records import Candidate
from artune.sizes import MAX_SIZE, format_size
from artune.table.model import Plan
from artune.tune.derive import MeasureFn
from artune.tune.grid import quantize
from artune.tune.noise import NoiseRule, margin, usable

SIDE_FACTOR = math.sqrt(2.0)


@dataclass(frozen=True)
class Bound:
    """One hand-over in a plan: ``lower`` runs up to ``at - 1``, ``upper`` from ``at``."""

    at: int
    lower: Candidate
    upper: Candidate
    lower_from: int  # the lower band's first size
    upper_to: int | None  # the upper band's last size (None: no end, the fallback)


@dataclass(frozen=True)
class BoundCheck:
    """The re-measurement of one bound."""

    world_size: int
    bound: Bound
    below_size: int
    above_size: int
    below_margin: float  # how much faster the lower algorithm is just below the bound
    below_noise: float
    above_margin: float  # how much faster the upper algorithm is just above the bound
    above_noise: float
    below_lost: bool  # the upper algorithm beat the lower one by more than noise below the bound
    above_lost: bool  # the lower algorithm beat the upper one by more than noise above the bound

    @property
    def holds(self) -> bool:
        """Neither side is lost by more than noise."""
        return not self.below_lost and not self.above_lost

    def describe(self) -> str:
        """One line: the bound, both sides' margins and the verdict."""
        b = self.bound

        def side(size: int, winner: Candidate, loser: Candidate, lead: float, noise: float) -> str:
            if math.isinf(lead):
                text = f"{loser.key} failed" if lead > 0 else f"{winner.key} failed"
            elif lead >= 0:
                text = f"{winner.key} {lead:.0%} faster"
            else:
                text = f"{loser.key} {-lead:.0%} faster"
            return f"at {format_size(size)} {text} (noise {noise:.0%})"

        verdict = "holds" if self.holds else "DRIFTED"
        return (
            f"ws={self.world_size} bound {format_size(b.at)} ({b.lower.key} -> {b.upper.key}): "
            f"{side(self.below_size, b.lower, b.upper, self.below_margin, self.below_noise)}; "
            f"{side(self.above_size, b.upper, b.lower, self.above_margin, self.above_noise)}: {verdict}"
        )


def _runs(plan: Plan, names: Sequence[str], available: Collection[str]) -> Candidate | None:
    for name in names:
        if name in available:
            return Candidate.of(name, plan.params_for(name))
    return None


def bounds_of(plan: Plan, available: Collection[str]) -> list[Bound]:
    """Every hand-over of ``plan`` between two different algorithms runnable here."""
    fallback = Candidate.of(plan.fallback, plan.params_for(plan.fallback))
    runs: list[tuple[int, int | None, Candidate]] = []
    lower = 0
    for band in plan.bands:
        if band.upto < lower:
            continue
        runs.append((lower, band.upto, _runs(plan, band.candidates, available) or fallback))
        lower = band.upto + 1
    if lower <= MAX_SIZE:
        runs.append((lower, None, fallback))
    found: list[Bound] = []
    for (lo, hi, cand), (_nlo, nhi, ncand) in itertools.pairwise(runs):
        if cand != ncand and hi is not None and hi < MAX_SIZE:
            found.append(Bound(hi + 1, cand, ncand, lo, nhi))
    return found


def sides(bound: Bound, itemsize: int = 4, factor: float = SIDE_FACTOR) -> tuple[int, int]:
    """The sizes just below and just above ``bound``, inside the two bands."""
    below = min(quantize(bound.at / factor, itemsize), (bound.at - 1) // itemsize * itemsize)
    below = max(below, -(-bound.lower_from // itemsize) * itemsize, itemsize)
    above = max(quantize(bound.at * factor, itemsize), -(-bound.at // itemsize) * itemsize)
    if bound.upper_to is not None:
        above = min(above, bound.upper_to // itemsize * itemsize)
    return below, max(above, below + itemsize)


def verify_plan(
    measure: MeasureFn,
    plan: Plan,
    available: Collection[str],
    rule: NoiseRule,
    budget_s: float,
    itemsize: int = 4,
) -> list[BoundCheck]:
    """Re-measure both sides of every bound of ``plan`` (collective when ``measure`` is)."""
    found = bounds_of(plan, available)
    checks: list[BoundCheck] = []
    for bound in found:
        below, above = sides(bound, itemsize)
        got = measure([bound.lower, bound.upper], [below, above], budget_s / max(1, len(found)))
        at = {(m.candidate, m.size_bytes): m for m in got}
        lo_l, lo_u = at[(bound.lower, below)], at[(bound.upper, below)]
        hi_l, hi_u = at[(bound.lower, above)], at[(bound.upper, above)]
        checks.append(
            BoundCheck(
                plan.world_size,
                bound,
                below,
                above,
                margin(lo_l, lo_u),
                rule.noise(lo_l, lo_u),
                margin(hi_u, hi_l),
                rule.noise(hi_u, hi_l),
                rule.beats(lo_u, lo_l) or not usable(lo_l),
                rule.beats(hi_l, hi_u) or not usable(hi_u),
            )
        )
    return checks
