"""From measurements to a plan: the winner at each size, crossovers by bisection, bands.

The rules (they are what ``artune tune`` promises; see also ``noise``):

1. Only *usable* candidates are chosen: the run finished, its result matched
   the reference (``nwrong == 0``) and it has a finite time. A candidate that
   gave wrong numbers at any size is banned everywhere.
2. At each size, the candidates within noise of the fastest are *tied*. Among
   tied candidates the *incumbent* (the winner at the next smaller size)
   stays; otherwise the simplest wins: the process-group baseline first, then
   the order in which the bench lists its algorithms. So a band never flips on
   noise, and the tuner never prefers a variant for a difference it cannot
   tell from noise.
3. Where the winner changes between two coarse sizes, the crossover is found
   by bisection between them (geometric midpoints, quantized to tidy sizes):
   at each midpoint only the two algorithms are measured, and the upper one
   takes the midpoint only if it beats the lower one by more than noise (the
   lower band keeps ties, rule 2). Bisection stops when the bracket is within
   the resolution; the band bound is the bracket's geometric midpoint.
4. Bands end at the crossovers; the winner at the largest measured size keeps
   every larger size (an open-ended last band, ``upto = "inf"``), unless it is
   the fallback (the process group), which needs no band.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from artune.measure.records import Candidate, Measurement
from artune.table.model import Band, Plan, freeze_params
from artune.tune.grid import midpoint
from artune.tune.noise import NoiseRule, Timed, margin, usable

MeasureFn = Callable[[Sequence[Candidate], Sequence[int], float], list[Measurement]]


@dataclass(frozen=True)
class Pick:
    """The winner at one size and why."""

    size: int
    winner: Candidate
    why: str
    fastest: Candidate
    margin: float  # how much faster the winner is than the runner-up (negative: kept within noise)
    noise: float


@dataclass(frozen=True)
class Step:
    """One bisection step: the midpoint measured and who took it."""

    size: int
    winner: str
    margin: float  # how much faster the upper candidate was (negative: slower)
    noise: float


@dataclass(frozen=True)
class Crossover:
    """Where the band of ``below`` ends and the band of ``above`` begins.

    ``below`` wins (or ties) at ``lo``, ``above`` beats it by more than noise
    at ``hi``; the band bound ``at`` is the first size given to ``above``.
    ``margin``/``noise`` are the upper candidate's lead at ``hi``.
    """

    below: Candidate
    above: Candidate
    coarse: tuple[int, int]
    lo: int
    hi: int
    at: int
    margin: float
    noise: float
    steps: tuple[Step, ...] = ()

    @property
    def confidence(self) -> float:
        """``margin / noise`` at ``hi``: above 1 means the crossover is not noise."""
        return self.margin / self.noise if self.noise > 0 else math.inf

    @property
    def resolution(self) -> float:
        """The final bracket's ratio ``hi / lo``."""
        return self.hi / self.lo


def preference_key(preference: Sequence[str]) -> Callable[[Candidate], tuple[int, int, str]]:
    """Sort key: earlier in ``preference`` is simpler; default parameters before tuned ones."""
    rank = {name: i for i, name in enumerate(preference)}
    return lambda c: (rank.get(c.algorithm, len(rank)), len(c.params), c.key)


def pick(
    size: int,
    measurements: Sequence[Timed],
    rule: NoiseRule,
    preference: Sequence[str],
    incumbent: Candidate | None = None,
    banned: Collection[Candidate] = (),
) -> Pick | None:
    """The winner among ``measurements`` at one size (rule 2), or ``None`` when none is usable."""
    ok = [m for m in measurements if usable(m) and m.candidate not in banned]
    if not ok:
        return None
    fastest = min(ok, key=lambda m: (m.time_us, preference_key(preference)(m.candidate)))
    tied = [m for m in ok if not rule.beats(fastest, m)]
    by_name = {m.candidate: m for m in tied}
    if incumbent is not None and incumbent in by_name:
        chosen, why = by_name[incumbent], "fastest" if incumbent == fastest.candidate else "incumbent"
    else:
        chosen = min(tied, key=lambda m: preference_key(preference)(m.candidate))
        why = "fastest" if chosen is fastest else "simpler"
    others = [m for m in ok if m is not chosen]
    if not others:
        return Pick(size, chosen.candidate, "only usable", fastest.candidate, math.inf, rule.floor)
    runner = min(others, key=lambda m: m.time_us)
    return Pick(size, chosen.candidate, why, fastest.candidate, margin(chosen, runner), rule.noise(chosen, runner))


def pick_all(
    by_size: Mapping[int, Sequence[Timed]],
    rule: NoiseRule,
    preference: Sequence[str],
    banned: Collection[Candidate] = (),
) -> list[Pick]:
    """Winners from the smallest size up, each size's incumbent being the previous winner."""
    picks: list[Pick] = []
    incumbent: Candidate | None = None
    for size in sorted(by_size):
        found = pick(size, by_size[size], rule, preference, incumbent, banned)
        if found is not None:
            picks.append(found)
            incumbent = found.winner
    return picks


def bisect_crossover(
    measure: MeasureFn,
    below: Candidate,
    above: Candidate,
    lo: int,
    hi: int,
    rule: NoiseRule,
    resolution: float,
    budget_per_step: float,
    itemsize: int = 4,
    at_hi: tuple[Timed, Timed] | None = None,
) -> Crossover:
    """Refine the crossover between ``below`` (wins at ``lo``) and ``above`` (wins at ``hi``) (rule 3).

    ``at_hi`` is ``(below, above)`` measured at ``hi`` when known, for the
    reported margin; the steps' measurements replace it as ``hi`` moves down
    (when neither is available, both are measured at ``hi`` once more).
    """
    coarse = (lo, hi)
    steps: list[Step] = []
    lead = (margin(at_hi[1], at_hi[0]), rule.noise(at_hi[1], at_hi[0])) if at_hi else (math.nan, rule.floor)
    while hi / lo > resolution:
        mid = midpoint(lo, hi, itemsize)
        if not lo < mid < hi:
            break
        got = {m.candidate: m for m in measure([below, above], [mid], budget_per_step)}
        low_m, up_m = got[below], got[above]
        step_margin, step_noise = margin(up_m, low_m), rule.noise(up_m, low_m)
        if rule.beats(up_m, low_m):
            hi, lead = mid, (step_margin, step_noise)
            steps.append(Step(mid, above.key, step_margin, step_noise))
        else:
            lo = mid
            steps.append(Step(mid, below.key, step_margin, step_noise))
    if math.isnan(lead[0]):  # hi never moved and its measurements were not given: measure it
        got = {m.candidate: m for m in measure([below, above], [hi], budget_per_step)}
        lead = (margin(got[above], got[below]), rule.noise(got[above], got[below]))
    at = midpoint(lo, hi, itemsize)
    if not lo < at <= hi:
        at = hi
    return Crossover(below, above, coarse, lo, hi, at, lead[0], lead[1], tuple(steps))


def bands_from(
    picks: Sequence[Pick], crossovers: Sequence[Crossover], fallback: str, top: int | None = None
) -> tuple[Band, ...]:
    """Bands ending at the crossovers (rule 4), adjacent equal bands merged, no trailing fallback band.

    ``top``: where the last band ends (``None``: it is open-ended).
    """
    if not picks:
        return ()
    names = [c.below.algorithm for c in crossovers] + [picks[-1].winner.algorithm]
    bounds: list[int | None] = [c.at - 1 for c in crossovers] + [top]
    bands: list[Band] = []
    for name, upto in zip(names, bounds, strict=True):
        if bands and bands[-1].candidates == (name,):
            bands[-1] = Band(upto, (name,))
        else:
            bands.append(Band(upto, (name,)))
    while bands and bands[-1].candidates == (fallback,):
        bands.pop()
    return tuple(bands)


def plan_from(
    world_size: int,
    picks: Sequence[Pick],
    crossovers: Sequence[Crossover],
    fallback: str,
    params: Mapping[str, Mapping[str, object]],
    top: int | None = None,
    mode: str = "eager",
    hosts: int = 1,
) -> Plan:
    """The plan for ``mode`` on ``hosts`` hosts: bands, the process group as fallback, parameters of the
    algorithms it uses."""
    bands = bands_from(picks, crossovers, fallback, top)
    used = {name for band in bands for name in band.candidates} | {fallback}
    kept = {name: dict(values) for name, values in params.items() if name in used and values}
    return Plan(world_size, mode, bands, fallback, freeze_params(kept), hosts=hosts)  # type: ignore[arg-type]


def changes(picks: Sequence[Pick]) -> list[tuple[Pick, Pick]]:
    """Consecutive picks whose winning *algorithms* differ: where crossovers are bisected."""
    return [(a, b) for a, b in itertools.pairwise(picks) if a.winner.algorithm != b.winner.algorithm]
