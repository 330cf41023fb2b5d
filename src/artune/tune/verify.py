"""``artune verify``: does an existing table still hold on this machine?

For every band bound of a plan (where one algorithm hands over to the next,
or to the fallback) the two algorithms are re-measured together, just below
the bound (the lower band's side) and just above it (the upper band's side),
by a factor of sqrt(2) or less when a band is narrower. The bound *holds*
when neither side's algorithm is slower on its own side (the tuner's rule,
``artune.tune.compare``: the paired interval beyond the tie band); drift is
reported per bound as the time ratio and its interval on both sides. An
open-ended last band claims that its algorithm beats the fallback at every
larger size: it is re-measured against the fallback at a few sizes
across it (from its first size to the largest size ``artune tune``
measures), and it *holds* when it is slower than the fallback at none of
them. So a one-band table is verified too. A side whose verdict is unsure
is measured again (up to ``EXTRA_CALLS`` times, within the check's share of
the budget); one still unsure holds as far as anyone can tell, and says so
(``artune verify`` then does not say that the table holds).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from artune.grid import midpoint, quantize
from artune.measure.records import Candidate
from artune.sizes import format_size, format_span
from artune.table.types import Plan
from artune.tune.compare import SLOWER, UNSURE, Comparison, FasterRule
from artune.tune.config import TuneConfig
from artune.tune.derive import EXTRA_CALLS, Sampler

SIDE_FACTOR = math.sqrt(2.0)


@dataclass(frozen=True)
class Bound:
    """One hand-over in a plan: ``lower`` runs up to ``at - 1``, ``upper`` from ``at``."""

    at: int
    lower: Candidate
    upper: Candidate
    lower_from: int  # the lower band's first size
    upper_to: int | None  # the upper band's last size (None: no end, the fallback)


def _verdict(holds: bool, unsure: bool) -> str:
    if not holds:
        return "DRIFTED"
    return "holds (unsure: too few rounds to be sure; a larger --budget decides)" if unsure else "holds"


def _side(size: int, c: Comparison) -> str:
    """``at 16KiB shm_one_shot/shm_two_shot 0.912x [0.900, 0.925]: faster``."""
    return f"at {format_size(size)} {c.describe()}"


@dataclass(frozen=True)
class BoundCheck:
    """The re-measurement of one bound."""

    world_size: int
    bound: Bound
    below_size: int
    above_size: int
    below: Comparison  # the lower algorithm against the upper one, just below the bound
    above: Comparison  # the upper algorithm against the lower one, just above the bound

    @property
    def below_lost(self) -> bool:
        """The lower algorithm is slower than the upper one below the bound (or failed there)."""
        return self.below.verdict == SLOWER

    @property
    def above_lost(self) -> bool:
        """The upper algorithm is slower than the lower one above the bound (or failed there)."""
        return self.above.verdict == SLOWER

    @property
    def holds(self) -> bool:
        """Neither side is lost."""
        return not self.below_lost and not self.above_lost

    @property
    def unsure(self) -> bool:
        """A side is still unsure after the re-measurements (it holds, but not surely)."""
        return UNSURE in (self.below.verdict, self.above.verdict)

    def describe(self) -> str:
        """One line: the bound, both sides' ratios and the verdict."""
        b = self.bound
        verdict = _verdict(self.holds, self.unsure)
        return (
            f"ws={self.world_size} bound {format_size(b.at)} ({b.lower.key} -> {b.upper.key}): "
            f"{_side(self.below_size, self.below)}; {_side(self.above_size, self.above)}: {verdict}"
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


def across(lower: int, top: int, grain: int = 4, start: int = TuneConfig.min_size) -> list[int]:
    """A few sizes across ``[lower, inf)``: its first size (at least ``start``), ``top`` and their midpoint."""
    first = -(-max(lower, start, grain) // grain) * grain
    if first >= top:
        return [first]
    return sorted({first, midpoint(first, top, grain), top // grain * grain})


@dataclass(frozen=True)
class BandCheck:
    """The re-measurement of an open-ended last band against the fallback."""

    world_size: int
    band: OpenBand
    sizes: tuple[int, ...]
    comparisons: tuple[Comparison, ...]  # the band's algorithm against the fallback at each size

    @property
    def lost(self) -> tuple[bool, ...]:
        """Whether the band's algorithm is slower than the fallback (or failed) at each size."""
        return tuple(c.verdict == SLOWER for c in self.comparisons)

    @property
    def holds(self) -> bool:
        """The band's algorithm is slower than the fallback at none of the sizes."""
        return not any(self.lost)

    @property
    def unsure(self) -> bool:
        """A size is still unsure after the re-measurements (it holds, but not surely)."""
        return any(c.verdict == UNSURE for c in self.comparisons)

    def describe(self) -> str:
        """One line: the band, the ratio at each size and the verdict."""
        b = self.band
        parts = [_side(size, c) for size, c in zip(self.sizes, self.comparisons, strict=True)]
        verdict = _verdict(self.holds, self.unsure)
        return (
            f"ws={self.world_size} band {format_span(b.lower, None)} ({b.algorithm.key} over fallback "
            f"{b.fallback.key}): {'; '.join(parts)}: {verdict}"
        )


Check = BoundCheck | BandCheck


def sides(bound: Bound, grain: int = 4, factor: float = SIDE_FACTOR) -> tuple[int, int]:
    """The sizes just below and just above ``bound``, inside the two bands."""
    below = min(quantize(bound.at / factor, grain), (bound.at - 1) // grain * grain)
    below = max(below, -(-bound.lower_from // grain) * grain, grain)
    above = max(quantize(bound.at * factor, grain), -(-bound.at // grain) * grain)
    if bound.upper_to is not None:
        above = min(above, bound.upper_to // grain * grain)
    return below, max(above, below + grain)


def _settled(
    sampler: Sampler, rule: FasterRule, a: Candidate, b: Candidate, size: int, got: Comparison, budget_s: float
) -> Comparison:
    """``got`` (``a`` against ``b`` at ``size``), measured again while unsure, up to ``EXTRA_CALLS`` times."""
    for _ in range(EXTRA_CALLS):
        if got.verdict != UNSURE:
            break
        at = {m.candidate: m for m in sampler.more([a, b], size, budget_s)}
        got = rule.compare(at[a], at[b])
    return got


def verify_plan(
    sampler: Sampler,
    plan: Plan,
    available: Collection[str],
    rule: FasterRule,
    budget_s: float,
    grain: int = 4,
    top: int = TuneConfig.max_size,
) -> list[Check]:
    """Re-measure both sides of every bound of ``plan``, then its open-ended last band across
    ``[lower, top]`` against the fallback (collective when ``sampler`` is).

    Each check gets an equal share of ``budget_s``: half for the first call, the rest for measuring
    again a side whose verdict is unsure.
    """
    found = bounds_of(plan, available)
    band = open_band_of(plan, available)
    share = budget_s / max(1, len(found) + (band is not None))
    checks: list[Check] = []
    for bound in found:
        below, above = sides(bound, grain)
        got = sampler.measure([bound.lower, bound.upper], [below, above], share / 2)
        at = {(m.candidate, m.size_bytes): m for m in got}
        extra = share / 2 / (2 * EXTRA_CALLS)
        lower_side = rule.compare(at[(bound.lower, below)], at[(bound.upper, below)])
        lower_side = _settled(sampler, rule, bound.lower, bound.upper, below, lower_side, extra)
        upper_side = rule.compare(at[(bound.upper, above)], at[(bound.lower, above)])
        upper_side = _settled(sampler, rule, bound.upper, bound.lower, above, upper_side, extra)
        checks.append(BoundCheck(plan.world_size, bound, below, above, lower_side, upper_side))
    if band is not None:
        sizes = across(band.lower, top, grain)
        got = sampler.measure([band.algorithm, band.fallback], sizes, share / 2)
        at = {(m.candidate, m.size_bytes): m for m in got}
        extra = share / 2 / (len(sizes) * EXTRA_CALLS)
        found_ = tuple(
            _settled(
                sampler, rule, band.algorithm, band.fallback, size,
                rule.compare(at[(band.algorithm, size)], at[(band.fallback, size)]), extra,
            )
            for size in sizes
        )  # fmt: skip
        checks.append(BandCheck(plan.world_size, band, tuple(sizes), found_))
    return checks
