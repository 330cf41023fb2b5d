"""From measurements to a plan: the winner at each size, crossovers by bisection, bands.

The rules (they are what ``artune tune`` promises; "faster", "tie" and
"unsure" are the verdicts of ``artune.tune.compare``, the one rule):

1. Only *usable* candidates are chosen: the run finished, its result matched
   the reference (``nwrong == 0``) and it has a finite time. A candidate that
   gave wrong numbers at any size is banned everywhere.
2. At each size the *fastest* is the candidate with the lowest paired time
   ratio against the one with the lowest median that no other candidate is
   faster than (across calls, a lead in one call can outweigh the pooled
   ratio: ``compare``); the *contenders* are the
   candidates the fastest is not faster than (a tie, or unsure), itself
   included. Among them the *incumbent* (the winner at the next smaller size)
   stays if it is or ties the fastest, so a band never flips for a difference
   inside the tie band; otherwise the *published* rule's choice at that size
   (DeepSpeed's 1 MiB switch on CPU, NCCL on CUDA), so the table leaves the
   published rule only on evidence; otherwise the incumbent; otherwise the
   simplest: the process-group baseline first, then the order in which the
   bench lists its algorithms. When the fastest against the kept candidate
   is *unsure*, the pick says so (``Pick.unsure``): the tuner then measures
   the two again there, while its budget lasts, rather than keep a choice on
   too little evidence.
3. Where the winner changes between two coarse sizes, the crossover is found
   by bisection between them (geometric midpoints, quantized to tidy sizes):
   at each midpoint only the two algorithms are measured, and the upper one
   takes the midpoint only if it is faster than the lower one, or if it is
   the published rule's choice there and still unsure after the
   re-measurements the step's budget allows (the lower band keeps ties and
   the rest of the unsure). Bisection stops when the bracket is within the
   resolution; the band bound is the bracket's geometric midpoint.
4. Bands end at the crossovers, and an earlier algorithm may come back
   (one-shot, two-shot, one-shot: each change of winner is a crossover of its
   own). The winner at the largest measured size keeps every larger size (an
   open-ended last band, ``upto = "inf"``), unless it is the fallback (the
   process group), which needs no band.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from artune.grid import midpoint
from artune.measure.records import Candidate
from artune.table.types import Band, Plan, freeze_params
from artune.tune.compare import FASTER, UNSURE, Comparison, FasterRule, PairVerdict, Timed, usable

#: re-measurements of one unsure bisection step at most (each with the step's budget)
EXTRA_CALLS = 2


class Sampler(Protocol):
    """Where the tuner's evidence comes from (``artune.tune.measurer.CachedMeasurer``)."""

    def measure(self, candidates: Sequence[Candidate], sizes: Sequence[int], budget_s: float) -> Sequence[Timed]:
        """Each candidate at each size (sizes outer), measured the first time it is asked for."""
        ...

    def more(self, candidates: Sequence[Candidate], size: int, budget_s: float) -> Sequence[Timed]:
        """One more interleaved call of ``candidates`` at ``size``, pooled with what was known."""
        ...

    def together(self, candidates: Sequence[Candidate], size: int, budget_s: float) -> Sequence[Timed]:
        """``candidates`` at ``size`` with a call that timed them all (one more when none did yet)."""
        ...


class Why(str, Enum):
    """Why a pick's winner won its size (rule 2)."""

    FASTEST = "fastest"
    INCUMBENT = "incumbent"  # tied with (or unsure against) the fastest, and the winner at the size below
    PUBLISHED = "published rule"  # tied with (or unsure against) the fastest, and the published rule's choice
    SIMPLER = "simpler"  # tied with (or unsure against) the fastest, and simpler
    ONLY_USABLE = "only usable"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Pick:
    """The winner at one size, why, and how sure."""

    size: int
    winner: Candidate
    why: Why
    fastest: Candidate
    against: Comparison | None  # the winner against the fastest (kept), or against the runner-up (fastest)
    unsure: tuple[Candidate, Candidate] | None = None  # (fastest, winner): more rounds could change the pick

    @property
    def verdict(self) -> PairVerdict | Why:
        """How sure the pick is: the verdict of ``against`` (``Why.ONLY_USABLE`` without a rival)."""
        return self.against.verdict if self.against is not None else Why.ONLY_USABLE


@dataclass(frozen=True)
class Step:
    """One bisection step: the midpoint measured, who took it, on what evidence."""

    size: int
    winner: str
    comparison: Comparison  # the upper candidate against the lower one
    calls: int = 1  # harness calls behind it (more than one: it was unsure)


@dataclass(frozen=True)
class BandCrossover:
    """Where the band of ``below`` ends and the band of ``above`` begins.

    ``below`` wins (or ties) at ``lo``, ``above`` is faster at ``hi``; the
    band bound ``at`` is the first size given to ``above``. ``lead`` is the
    upper candidate against the lower one at ``hi`` (``None``: not measured
    there).
    """

    below: Candidate
    above: Candidate
    coarse: tuple[int, int]
    lo: int
    hi: int
    at: int
    lead: Comparison | None
    steps: tuple[Step, ...] = ()

    @property
    def resolution(self) -> float:
        """The final bracket's ratio ``hi / lo``."""
        return self.hi / self.lo


def preference_key(preference: Sequence[str]) -> Callable[[Candidate], tuple[int, int, str]]:
    """Sort key: earlier in ``preference`` is simpler; default parameters before tuned ones."""
    rank = {name: i for i, name in enumerate(preference)}
    return lambda c: (rank.get(c.algorithm, len(rank)), len(c.params), c.key)


#: the algorithm the published rule runs at a size (``None``: no published rule)
Published = Callable[[int], str | None]


def pick(
    size: int,
    measurements: Sequence[Timed],
    rule: FasterRule,
    preference: Sequence[str],
    incumbent: Candidate | None = None,
    banned: Collection[Candidate] = (),
    published: str | None = None,
) -> Pick | None:
    """The winner among ``measurements`` at one size (rule 2), or ``None`` when none is usable.

    ``published``: the algorithm the published rule runs at ``size``."""
    ok = [m for m in measurements if usable(m) and m.candidate not in banned]
    if not ok:
        return None
    simpler = preference_key(preference)
    if len(ok) == 1:
        return Pick(size, ok[0].candidate, Why.ONLY_USABLE, ok[0].candidate, None)
    reference = min(ok, key=lambda m: (m.time_us, simpler(m.candidate)))
    ratios = {m.candidate: rule.compare(m, reference).ratio if m is not reference else 1.0 for m in ok}
    order = sorted(ok, key=lambda m: (ratios[m.candidate], simpler(m.candidate)))
    # the fastest is one no other candidate is faster than (the verdict across calls can overrule the pooled
    # ratio); the lowest ratio when every one of them is beaten by another
    fastest = next((m for m in order if not any(rule.faster(x, m) for x in ok if x is not m)), order[0])
    against = {m.candidate: rule.compare(fastest, m) for m in ok if m is not fastest}
    contenders = [m for m in ok if m is fastest or against[m.candidate].verdict != FASTER]
    names = {m.candidate for m in contenders}
    tied = {m.candidate for m in contenders if m is fastest or against[m.candidate].verdict != UNSURE}
    theirs = sorted((c for c in names if c.algorithm == published), key=simpler)
    if incumbent in tied:
        chosen, why = incumbent, Why.INCUMBENT
    elif theirs:
        chosen, why = theirs[0], Why.PUBLISHED
    elif incumbent in names:
        chosen, why = incumbent, Why.INCUMBENT
    else:
        chosen, why = min(names, key=simpler), Why.SIMPLER
    if chosen == fastest.candidate:
        runner = max(against.values(), key=lambda c: c.ratio)  # the closest rival
        return Pick(size, chosen, Why.FASTEST, chosen, runner)
    kept = against[chosen].swapped()
    unsure = (fastest.candidate, chosen) if kept.verdict == UNSURE else None
    return Pick(size, chosen, why, fastest.candidate, kept, unsure)


def pick_all(
    by_size: Mapping[int, Sequence[Timed]],
    rule: FasterRule,
    preference: Sequence[str],
    banned: Collection[Candidate] = (),
    published: Published | None = None,
) -> list[Pick]:
    """Winners from the smallest size up, each size's incumbent being the previous winner."""
    picks: list[Pick] = []
    incumbent: Candidate | None = None
    for size in sorted(by_size):
        theirs = published(size) if published is not None else None
        found = pick(size, by_size[size], rule, preference, incumbent, banned, theirs)
        if found is not None:
            picks.append(found)
            incumbent = found.winner
    return picks


def _by_candidate(got: Sequence[Timed]) -> dict[Candidate, Timed]:
    return {m.candidate: m for m in got}


def bisect_crossover(
    sampler: Sampler,
    below: Candidate,
    above: Candidate,
    lo: int,
    hi: int,
    rule: FasterRule,
    resolution: float,
    budget_per_step: float,
    grain: int = 4,
    extra_calls: int = EXTRA_CALLS,
    published: Published | None = None,
) -> BandCrossover:
    """Refine the crossover between ``below`` (wins at ``lo``) and ``above`` (wins at ``hi``) (rule 3).

    Each size is measured with both candidates in one call (``together``: a
    size another phase measured already gets a call of the two). A step
    whose comparison is unsure is measured again, up to ``extra_calls``
    times with ``budget_per_step`` each; what stays unsure goes to ``above``
    where ``published`` runs it. The lead at ``hi`` is the two compared
    there, then at the step that moved ``hi``.
    """
    coarse = (lo, hi)
    steps: list[Step] = []
    got = _by_candidate(sampler.together([below, above], hi, budget_per_step))
    lead: Comparison | None = rule.compare(got[above], got[below])
    while hi / lo > resolution:
        mid = midpoint(lo, hi, grain)
        if not lo < mid < hi:
            break
        got = _by_candidate(sampler.together([below, above], mid, budget_per_step))
        found = rule.compare(got[above], got[below])
        calls = 1
        while found.verdict == UNSURE and calls <= extra_calls:
            got = _by_candidate(sampler.more([below, above], mid, budget_per_step))
            found = rule.compare(got[above], got[below])
            calls += 1
        theirs = published(mid) if published is not None and found.verdict == UNSURE else None
        if found.verdict == FASTER or theirs == above.algorithm:
            hi, lead = mid, found
            steps.append(Step(mid, above.key, found, calls))
        else:
            lo = mid
            steps.append(Step(mid, below.key, found, calls))
    at = midpoint(lo, hi, grain)
    if not lo < at <= hi:
        at = hi
    return BandCrossover(below, above, coarse, lo, hi, at, lead, tuple(steps))


def bands_from(
    picks: Sequence[Pick], crossovers: Sequence[BandCrossover], fallback: str, top: int | None = None
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
    crossovers: Sequence[BandCrossover],
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
