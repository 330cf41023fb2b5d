"""``artune verify``: does an existing table still hold on this machine?

For every band bound of a plan (where one algorithm hands over to the next,
or to the fallback) the two algorithms are re-measured together, just below
the bound (the lower band's side) and just above it (the upper band's side),
by a factor of sqrt(2) or less when a band is narrower. The bound *holds*
when neither side's algorithm is beaten on its own side by more than noise
(the tuner's noise rule); drift is reported per bound as the margins on both
sides. An open-ended last band claims that its algorithm beats the fallback
at every larger size: it is re-measured against the fallback at a few sizes
across it (from its first size to the largest size ``artune tune``
measures), and it *holds* when the fallback beats it by more than noise at
none of them. So a one-band table is verified too.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from artune.measure.records import Candidate
from artune.sizes import format_size, format_span
from artune.table.model import Plan
from artune.tune.config import TuneConfig
from artune.tune.derive import MeasureFn
from artune.tune.grid import midpoint, quantize
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


def _fallback(plan: Plan) -> Candidate:
    return Candidate.of(plan.fallback, plan.params_for(plan.fallback))


def bounds_of(plan: Plan, available: Collection[str]) -> list[Bound]:
    """Every hand-over of ``plan`` between two different algorithms runnable here."""
    fallback = _fallback(plan)
    runs = [(lo, hi, _runs(plan, names, available) or fallback) for lo, hi, names in plan.spans()]
    found: list[Bound] = []
    for (lo, hi, cand), (_nlo, nhi, ncand) in itertools.pairwise(runs):
        if cand != ncand and hi is not None:
            found.append(Bound(hi + 1, cand, ncand, lo, nhi))
    return found


@dataclass(frozen=True)
class OpenBand:
    """An open-ended last band: ``algorithm`` claims every size from ``lower`` up over ``fallback``."""

    lower: int
    algorithm: Candidate
    fallback: Candidate


def open_band_of(plan: Plan, available: Collection[str]) -> OpenBand | None:
    """The open-ended last band when it runs an algorithm other than the fallback here, else ``None``."""
    if not plan.open_ended:
        return None
    lower, _upto, names = plan.spans()[-1]
    fallback = _fallback(plan)
    algorithm = _runs(plan, names, available) or fallback
    return None if algorithm == fallback else OpenBand(lower, algorithm, fallback)


def across(lower: int, top: int, itemsize: int = 4, start: int = TuneConfig.min_size) -> list[int]:
    """A few sizes across ``[lower, inf)``: its first size (at least ``start``), ``top`` and their midpoint."""
    first = -(-max(lower, start, itemsize) // itemsize) * itemsize
    if first >= top:
        return [first]
    return sorted({first, midpoint(first, top, itemsize), top // itemsize * itemsize})


@dataclass(frozen=True)
class BandCheck:
    """The re-measurement of an open-ended last band against the fallback."""

    world_size: int
    band: OpenBand
    sizes: tuple[int, ...]
    margins: tuple[float, ...]  # how much faster the band's algorithm is at each size
    noises: tuple[float, ...]
    lost: tuple[bool, ...]  # the fallback beat it by more than noise (or it failed) at each size

    @property
    def holds(self) -> bool:
        """The fallback beats the band's algorithm by more than noise at none of the sizes."""
        return not any(self.lost)

    def describe(self) -> str:
        """One line: the band, the margin at each size and the verdict."""
        b = self.band
        parts = []
        for size, lead, noise in zip(self.sizes, self.margins, self.noises, strict=True):
            if math.isinf(lead):
                text = f"{b.fallback.key if lead > 0 else b.algorithm.key} failed"
            elif lead >= 0:
                text = f"{b.algorithm.key} {lead:.0%} faster"
            else:
                text = f"{b.fallback.key} {-lead:.0%} faster"
            parts.append(f"at {format_size(size)} {text} (noise {noise:.0%})")
        verdict = "holds" if self.holds else "DRIFTED"
        return (
            f"ws={self.world_size} band {format_span(b.lower, None)} ({b.algorithm.key} over fallback "
            f"{b.fallback.key}): {'; '.join(parts)}: {verdict}"
        )


Check = BoundCheck | BandCheck


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
    top: int = TuneConfig.max_size,
) -> list[Check]:
    """Re-measure both sides of every bound of ``plan``, then its open-ended last band across
    ``[lower, top]`` against the fallback (collective when ``measure`` is)."""
    found = bounds_of(plan, available)
    band = open_band_of(plan, available)
    share = budget_s / max(1, len(found) + (band is not None))
    checks: list[Check] = []
    for bound in found:
        below, above = sides(bound, itemsize)
        got = measure([bound.lower, bound.upper], [below, above], share)
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
    if band is not None:
        sizes = across(band.lower, top, itemsize)
        at = {(m.candidate, m.size_bytes): m for m in measure([band.algorithm, band.fallback], sizes, share)}
        pairs = [(at[(band.algorithm, size)], at[(band.fallback, size)]) for size in sizes]
        checks.append(
            BandCheck(
                plan.world_size,
                band,
                tuple(sizes),
                tuple(margin(a, f) for a, f in pairs),
                tuple(rule.noise(a, f) for a, f in pairs),
                tuple(rule.beats(f, a) or not usable(a) for a, f in pairs),
            )
        )
    return checks
