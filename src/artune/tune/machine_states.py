"""The machine's states, as data: where calls at different moments disagreed, how often and how far.

A shared machine is not one machine: for seconds at a time every call is
slower, or one algorithm's lead over another is another than a moment
before. The tuner meets this wherever it measured a pair of candidates at a
size in more than one harness call (a close pick measured again, an unsure
bisection step, a confirmed duel loss). ``states_of`` collects those:

- a *swing* is a pair at a size whose per-call time ratios differ by more
  than the tie band on both sides (``max / min > (1 + tie)**2``), or whose
  per-call verdicts are ``faster`` in one call and ``slower`` in another;
- a *shift* is one candidate at a size whose per-call medians differ by more
  than that (the whole machine slower for a call);
- a *tail* is a pair timed in one call whose ratio of medians and ratio of
  time spent (``Comparison.spent``) point opposite ways beyond the tie
  band: one is quicker in a typical call, the other over the whole call,
  because its slow calls are slower or more frequent. There the time spent
  vetoes the median's verdict (``FasterRule.judge``): the pair is unsure.

Decisions over such calls are taken for the mix of the states met
(``FasterRule.across``); the report shows this record.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from artune.measure.records import Candidate, Measurement
from artune.tune.compare import FASTER, SLOWER, FasterRule, PairVerdict, Pooled, pairs_by_call


@dataclass(frozen=True)
class Swing:
    """A pair at one size whose ratio moved between the calls that timed both."""

    size: int
    a: Candidate
    b: Candidate
    ratios: tuple[float, ...]  # a's time over b's, per call, in call order
    verdicts: tuple[PairVerdict, ...]

    @property
    def factor(self) -> float:
        """How far the ratio moved: the largest per-call ratio over the smallest."""
        return max(self.ratios) / min(self.ratios)

    @property
    def flips(self) -> bool:
        """True when ``a`` was faster in one call and slower in another."""
        return FASTER in self.verdicts and SLOWER in self.verdicts


@dataclass(frozen=True)
class Tail:
    """A pair timed in one call whose ratio of medians and ratio of time spent point opposite ways."""

    size: int
    a: Candidate
    b: Candidate
    median_ratio: float  # the median of the per-round ratios of a's turns over b's
    spent_ratio: float  # a's time spent over b's (``Comparison.spent``)

    def describe(self) -> str:
        """``64KiB shm_two_shot/shm_one_shot: 0.91 by median, 1.23 by time spent``."""
        return (
            f"{self.size} B {self.a.key}/{self.b.key}: {self.median_ratio:.2f} by median, "
            f"{self.spent_ratio:.2f} by time spent"
        )


@dataclass(frozen=True)
class MachineStates:
    """What one run saw of the machine's states."""

    pairs: int  # (pair, size) timed together in two calls or more
    swings: tuple[Swing, ...]
    repeated: int  # (candidate, size) timed in two calls or more
    shifts: tuple[tuple[int, Candidate, float], ...]  # (size, candidate, slowest call's median / quickest's)
    tails: tuple[Tail, ...] = ()

    @property
    def seen(self) -> bool:
        """True when calls at different moments disagreed anywhere, or a median and a mean did."""
        return bool(self.swings or self.shifts or self.tails)

    def sizes(self) -> list[int]:
        """The sizes where a pair swung, sorted."""
        return sorted({s.size for s in self.swings})

    def describe(self) -> str:
        """One sentence for the report and the summary."""
        tails = ""
        if self.tails:
            worst = max(self.tails, key=lambda t: abs(math.log(t.spent_ratio / t.median_ratio)))
            tails = (
                f" At {len({t.size for t in self.tails})} size(s) the median and the time spent disagree on "
                f"which of two is faster (slow calls of one are slower or more frequent), e.g. {worst.describe()}."
            )
        if not self.pairs and not self.repeated:
            return "No pair was timed in more than one call, so the run saw one state of the machine." + tails
        flips = sum(s.flips for s in self.swings)
        most = max((s.factor for s in self.swings), default=1.0)
        shift = max((f for _, _, f in self.shifts), default=1.0)
        where = ", ".join(str(s) for s in self.sizes()[:8]) or "-"
        return (
            f"Calls at different moments disagreed for {len(self.swings)} of {self.pairs} pairs timed more than "
            f"once ({flips} changed sides), by up to {most:.2f}x in their ratio, at sizes {where}; one "
            f"candidate's own time moved by more than the tie band in {len(self.shifts)} of {self.repeated} "
            f"repeated measurements, by up to {shift:.2f}x.{tails}"
        )


def _by_key(measurements: Sequence[Measurement]) -> dict[tuple[Candidate, int], list[Measurement]]:
    found: dict[tuple[Candidate, int], list[Measurement]] = {}
    for m in measurements:
        if m.status == "ok" and m.samples_us:
            found.setdefault((m.candidate, m.size_bytes), []).append(m)
    return found


def states_of(measurements: Sequence[Measurement], rule: FasterRule) -> MachineStates:
    """The swings and shifts in ``measurements`` (a run's calls, in order), judged with ``rule``'s tie band."""

    edge = (1.0 + rule.tie) ** 2
    by_key = _by_key(measurements)
    shifts = []
    repeated = 0
    for (cand, size), calls in by_key.items():
        if len(calls) < 2:
            continue
        repeated += 1
        medians = [statistics.median(m.samples_us) for m in calls]
        factor = max(medians) / min(medians) if min(medians) > 0 else math.inf
        if factor > edge:
            shifts.append((size, cand, factor))
    swings, pairs = [], 0
    per_size: dict[int, list[Candidate]] = {}
    for cand, size in by_key:
        per_size.setdefault(size, []).append(cand)
    for size, cands in sorted(per_size.items()):
        for a, b in itertools.combinations(cands, 2):
            by_call = pairs_by_call(Pooled(tuple(by_key[(a, size)])), Pooled(tuple(by_key[(b, size)])))
            if len(by_call) < 2:
                continue
            pairs += 1
            each = [rule.judge(ta, tb) for ta, tb in by_call]
            ratios = tuple(r for r, _, _, _, _ in each)
            verdicts = tuple(v for _, _, _, v, _ in each)
            swing = Swing(size, a, b, ratios, verdicts)
            if swing.flips or swing.factor > edge:
                swings.append(swing)
    shifted = tuple(sorted(shifts, key=lambda s: s[0]))
    return MachineStates(pairs, tuple(swings), repeated, shifted, tuple(_tails(measurements, rule)))


def _tails(measurements: Sequence[Measurement], rule: FasterRule) -> list[Tail]:
    """Every pair timed in one call whose ratio of medians and ratio of time spent fall on opposite sides of
    the tie band."""
    low, high = rule.band
    by_call: dict[str, list[Measurement]] = {}
    for m in measurements:
        if m.call and m.status == "ok" and m.samples_us:
            by_call.setdefault(m.call, []).append(m)
    found = []
    for calls in by_call.values():
        for a, b in itertools.combinations(calls, 2):
            c = rule.compare(a, b)
            if (c.ratio < low and c.spent > high) or (c.ratio > high and c.spent < low):
                found.append(Tail(a.size_bytes, a.candidate, b.candidate, c.ratio, c.spent))
    return found
