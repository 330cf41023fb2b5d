"""Bands from evidence: the derived plan held to what was measured at each band's own sizes.

Physics gives a table its structure: between two algorithms the cost curves
cross once (one-shot's lower latency against two-shot's higher bandwidth),
so a table has one crossover between any two of them. A noisy machine fits
more: a band won at one bisection point, a sliver of one algorithm inside
another's range, a crossover that wanders through a range where the two are
level. After bisection, ``shape`` holds the plan to three rules, applied
until nothing changes (the first two, one band at a time, before the third):

1. **A sliver merges.** A band narrower than ``MIN_WIDTH`` (its upper bound
   over its lower one) goes to its neighbours, whatever won it, when it is
   an island (below) or leaves the published rule.
2. **A further band needs its own evidence.** An island, a band between two
   bands of one other algorithm (a second crossover between the two), must
   be faster than that algorithm, beyond the tie band, at ``MIN_SIZES`` of
   its own sizes at least, and slower at none: a single bisection point is
   not enough, and a stretch where the two take turns is noise, not a
   second crossover.
3. **Leaving the published rule takes evidence.** Where the plan runs
   another algorithm than the published rule (DeepSpeed's 1 MiB switch on a
   CPU, NCCL on CUDA), its algorithm must be faster than the published one,
   beyond the tie band, at ``MIN_SIZES`` sizes of that stretch at least;
   otherwise the stretch goes back to the published choice. With evidence,
   it reaches only as far as its leads: where the plan runs the published
   choice beside it, the sizes beyond its first or last lead, at which it is
   only level with the published choice, go back too. So a near-tie
   resolves to the published rule, and a crossover that would wander inside
   one stays where the evidence or the published rule puts it.

A band that fails goes to its neighbour (the same on both sides, or the only
one); between two different neighbours, to the published rule's choice when
that is one of them, else half to each. Slivers go first, the narrowest
first, then the island with the least evidence; after each change the rules
run again. "Faster at a size" is the evidence rule's verdict
(``artune.tune.compare``) over every call that timed the two there: the
coarse picks, the probes, the bisection steps, the duel's sizes.

What ships is recorded: ``BandAudit`` per band (the sizes inside it where it
was faster than its rivals, level with one, or slower, and why it stands),
``Merge`` per band removed and why, and ``NearTie`` per stretch where two
algorithms stayed within the tie band at consecutive measured sizes ("one-shot
and two-shot within 2% from 960KiB to 7MiB"), which the report and the
table's provenance name with the choice that resolved it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from artune.grid import midpoint
from artune.measure.records import Candidate, Measurement
from artune.sizes import format_span, human_size
from artune.table.types import Band, Plan, Table
from artune.tune.compare import FASTER, SLOWER, Comparison, FasterRule, PairVerdict, Pooled, Timed, usable
from artune.tune.regret import choice

#: a band narrower than this (upper bound over lower bound) is a sliver
MIN_WIDTH = 1.5
#: sizes inside a band where it must be faster than its rivals (one bisection point is not evidence)
MIN_SIZES = 2

#: a stretch of sizes ``[lower, upto]`` (``upto`` None: every larger size) and the algorithm that runs it
Span = tuple[int, int | None, str]


class Justification(str, Enum):
    """Why a shipped band stands."""

    FASTER = "faster at its own sizes"
    PUBLISHED = "the published rule's choice"
    ONLY = "the only band"
    NONE = "not justified"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class BandAudit:
    """One band as shipped, and the evidence at its own sizes."""

    lower: int
    upto: int | None  # None: every larger size
    algorithm: str
    rivals: tuple[str, ...]  # the neighbours that would take its sizes, and the published choice where it differs
    faster: tuple[int, ...]  # sizes inside it where it was faster than every rival measured there
    level: tuple[int, ...]  # sizes where a rival was within the tie band or could not be told from it (tie, unsure)
    slower: tuple[int, ...]  # sizes where a rival was faster
    why: Justification

    @property
    def justified(self) -> bool:
        """True when the band stands on evidence, on the published rule, or alone."""
        return self.why is not Justification.NONE

    def describe(self) -> str:
        """``[0, 1MiB) shm_one_shot: faster at its own sizes (than shm_two_shot at 7 sizes, 256B-768KiB)``."""
        where = f"{format_span(self.lower, self.upto)} {self.algorithm}"
        rivals = "/".join(self.rivals) or "-"
        counts = f"faster than {rivals} at {_sizes(self.faster)}"
        if self.level:
            counts += f", level or unsure at {_sizes(self.level)}"
        if self.slower:
            counts += f", slower at {_sizes(self.slower)}"
        return f"{where}: {self.why} ({counts})"


@dataclass(frozen=True)
class Merge:
    """A band the rules removed: where, whose it was, who took it, and why."""

    lower: int
    upto: int | None
    algorithm: str
    into: str
    why: str

    def describe(self) -> str:
        """``[3.75KiB, 4.5KiB) shm_two_shot -> shm_one_shot: a sliver, 1.2x wide``."""
        return f"{format_span(self.lower, self.upto)} {self.algorithm} -> {self.into}: {self.why}"


@dataclass(frozen=True)
class NearTie:
    """Two algorithms within the tie band at consecutive measured sizes from ``lo`` to ``hi``."""

    a: str
    b: str
    lo: int
    hi: int
    within: float  # the largest |ratio - 1| over those sizes
    sizes: int
    resolved: str  # what the plan runs there, and whose choice that is

    def describe(self) -> str:
        """``shm_one_shot and shm_two_shot within 2% from 960KiB to 7MiB (5 sizes): ...``."""
        pct = max(1, math.ceil(self.within * 100 - 1e-9))
        return (
            f"{self.a} and {self.b} within {pct}% from {human_size(self.lo)} to {human_size(self.hi)} "
            f"({self.sizes} sizes): {self.resolved}"
        )


@dataclass(frozen=True)
class Shaping:
    """What ``shape`` did to a plan: the bands shipped with their evidence, the bands removed, the near-ties."""

    audits: tuple[BandAudit, ...]
    merges: tuple[Merge, ...]
    near_ties: tuple[NearTie, ...]

    @property
    def justified(self) -> bool:
        """True when every band shipped stands."""
        return all(a.justified for a in self.audits)


class Ledger:
    """Everything measured, by size: the evidence rule's verdict between two algorithms at a size.

    Where an algorithm was timed with several parameter settings at a size,
    the one the plan runs (``prefer``) is compared first, then its defaults,
    and the first pair timed in one call decides.
    """

    def __init__(
        self,
        measured: Mapping[int, Sequence[Timed]],
        rule: FasterRule,
        prefer: Mapping[str, Candidate] | None = None,
        banned: Collection[Candidate] = (),
    ) -> None:
        self.rule = rule
        self.prefer = dict(prefer or {})
        self._at: dict[int, dict[str, list[Timed]]] = {}
        for size, found in measured.items():
            for m in found:
                if usable(m) and m.candidate not in banned:
                    self._at.setdefault(size, {}).setdefault(m.candidate.algorithm, []).append(m)
        self.sizes = tuple(sorted(self._at))
        self.algorithms = tuple(sorted({a for at in self._at.values() for a in at}))
        self._memo: dict[tuple[str, str, int], Comparison | None] = {}

    @classmethod
    def of(
        cls,
        measurements: Iterable[Measurement],
        rule: FasterRule,
        prefer: Mapping[str, Candidate] | None = None,
        banned: Collection[Candidate] = (),
    ) -> Ledger:
        """The ledger of a run's calls (each candidate's calls at a size pooled)."""
        calls: dict[tuple[int, Candidate], list[Measurement]] = {}
        for m in measurements:
            calls.setdefault((m.size_bytes, m.candidate), []).append(m)
        by_size: dict[int, list[Timed]] = {}
        for (size, _), ms in calls.items():
            by_size.setdefault(size, []).append(Pooled(tuple(ms)))
        return cls(by_size, rule, prefer, banned)

    def within(self, lower: int, upto: int | None) -> list[int]:
        """The measured sizes in ``[lower, upto]``."""
        return [s for s in self.sizes if s >= lower and (upto is None or s <= upto)]

    def _ordered(self, name: str, size: int) -> list[Timed]:
        found = self._at.get(size, {}).get(name, [])
        first = self.prefer.get(name)
        return sorted(found, key=lambda m: (m.candidate != first, len(m.candidate.params), m.candidate.key))

    def compare(self, a: str, b: str, size: int) -> Comparison | None:
        """Algorithm ``a`` against ``b`` at ``size``, paired over the calls that timed both; ``None``: never
        timed together there."""
        key = (a, b, size)
        if key not in self._memo:
            found = None
            for x, y in itertools.product(self._ordered(a, size), self._ordered(b, size)):
                c = self.rule.compare(x, y)
                if c.rounds:
                    found = c
                    break
            self._memo[key] = found
        return self._memo[key]

    def verdict(self, name: str, rivals: Iterable[str], size: int) -> tuple[PairVerdict, float] | None:
        """``name`` against every rival timed with it at ``size``: ``faster`` than all of them, ``slower``
        than one, else level (``tie``: a tie or unsure); with the closest rival's ratio (its time over
        ``name``'s). ``None``: no rival timed with it there."""
        found = [c for r in rivals if r != name and (c := self.compare(name, r, size)) is not None]
        if not found:
            return None
        closest = max(c.ratio for c in found)  # name's time over the rival's: the largest is the closest rival
        if any(c.verdict == SLOWER for c in found):
            return PairVerdict.SLOWER, 1.0 / closest
        if all(c.verdict == FASTER for c in found):
            return PairVerdict.FASTER, 1.0 / closest
        return PairVerdict.TIE, 1.0 / closest

    def faster_at(self, name: str, rivals: Iterable[str], lower: int, upto: int | None) -> list[int]:
        """The sizes in ``[lower, upto]`` where ``name`` was faster than every rival timed with it."""
        return self._where(FASTER, name, tuple(rivals), lower, upto)

    def slower_at(self, name: str, rivals: Iterable[str], lower: int, upto: int | None) -> list[int]:
        """The sizes in ``[lower, upto]`` where ``name`` was slower than a rival timed with it."""
        return self._where(SLOWER, name, tuple(rivals), lower, upto)

    def _where(
        self, verdict: PairVerdict, name: str, rivals: tuple[str, ...], lower: int, upto: int | None
    ) -> list[int]:
        return [s for s in self.within(lower, upto) if (v := self.verdict(name, rivals, s)) and v[0] == verdict]


def published_spans(table: Table, world_size: int, available: Collection[str], hosts: int = 1) -> list[Span]:
    """What the published rule runs, as spans: its choice at every bound any of its plans has."""
    bounds = sorted({0} | {b.upto + 1 for p in table.plans for b in p.bands if b.upto is not None})
    return _merged([(lo, None, choice(table, lo, world_size, available, hosts).algorithm) for lo in bounds])


def rule_plan(
    table: Table, world_size: int, mode: str, available: Collection[str], fallback: str, hosts: int = 1
) -> Plan:
    """A fixed rule's choices as a plan for ``world_size`` (what ships when the run's checks pick the rule)."""
    spans = published_spans(table, world_size, available, hosts)
    return Plan(world_size, mode, _bands(spans, fallback), fallback, hosts=hosts)


def _bands(spans: Sequence[Span], fallback: str) -> tuple[Band, ...]:
    """Bands of ``spans``; the fallback runs above a bounded last band, so trailing fallback spans go."""
    bands = [Band(up, (name,)) for _, up, name in spans]
    while bands and bands[-1].candidates == (fallback,):
        bands.pop()
    return tuple(bands)


def plan_spans(plan: Plan) -> list[Span]:
    """The plan's bands as spans, the fallback's sizes above a bounded last band included."""
    return _merged([(lo, up, names[0]) for lo, up, names in plan.spans()])


def _merged(spans: Sequence[Span]) -> list[Span]:
    """Spans given by their lower bounds (each ends below the next), adjacent equal ones joined."""
    out: list[Span] = []
    for i, (lo, _, name) in enumerate(spans):
        up = spans[i + 1][0] - 1 if i + 1 < len(spans) else None
        if out and out[-1][2] == name:
            out[-1] = (out[-1][0], up, name)
        elif up is None or up >= lo:
            out.append((lo, up, name))
    return out


def _overlay(mine: Sequence[Span], theirs: Sequence[Span]) -> list[tuple[int, int | None, str, str]]:
    """``mine`` cut at ``theirs``' bounds: (lower, upto, my algorithm, theirs) per piece."""
    cuts = sorted({s[0] for s in mine} | {s[0] for s in theirs})
    out = []
    for i, lo in enumerate(cuts):
        up = cuts[i + 1] - 1 if i + 1 < len(cuts) else None
        out.append((lo, up, _at(mine, lo), _at(theirs, lo)))
    return out


def _at(spans: Sequence[Span], size: int) -> str:
    return next(name for lo, up, name in spans if lo <= size and (up is None or size <= up))


def _sizes(sizes: Sequence[int]) -> str:
    if not sizes:
        return "no size"
    if len(sizes) == 1:
        return f"1 size ({human_size(sizes[0])})"
    return f"{len(sizes)} sizes ({human_size(min(sizes))}-{human_size(max(sizes))})"


@dataclass(frozen=True)
class _Rules:
    """What ``shape`` judges by: the evidence, the published rule's spans, the algorithms it may use."""

    ledger: Ledger
    published: list[Span]
    available: frozenset[str]
    bottom: int  # the smallest size measured: a first band's width counts from here

    def departures(self, spans: list[Span]) -> tuple[list[Span], list[Merge]]:
        """Rule 3: every stretch where ``spans`` leave the published rule goes back to it without evidence, and
        with evidence only as far as its leads reach (see ``_trimmed``)."""
        pieces = _overlay(spans, self.published)
        out: list[Span] = []
        merges: list[Merge] = []
        runs = [list(g) for _, g in itertools.groupby(pieces, key=lambda p: (p[2], p[3]))]
        for k, run in enumerate(runs):
            lo, up, mine, theirs = run[0][0], run[-1][1], run[0][2], run[0][3]
            if mine == theirs or theirs not in self.available:
                out.append((lo, up, mine))
                continue
            won = self.ledger.faster_at(mine, [theirs], lo, up)
            if len(won) < MIN_SIZES:
                out.append((lo, up, theirs))
                why = f"faster than the published rule's {theirs} at {_sizes(won)}; leaving it takes {MIN_SIZES}"
                merges.append(Merge(lo, up, mine, theirs, why))
                continue
            below = k == 0 or runs[k - 1][0][2] == theirs  # the plan runs the published choice on either side
            above = k == len(runs) - 1 or runs[k + 1][0][2] == theirs
            kept, trims = self._trimmed((lo, up, mine), theirs, won, below, above)
            out += kept
            merges += trims
        return _merged(out), merges

    def _trimmed(
        self, stretch: Span, theirs: str, won: list[int], below: bool, above: bool
    ) -> tuple[list[Span], list[Merge]]:
        """A stretch with its leads at ``won``: where the plan runs the published choice beside it, the sizes
        beyond its first or last lead, at which it is only level with the published choice, go back to it
        (the bound halfway to the nearest size measured there), so a near-tie at the edge of a band that
        has leads elsewhere resolves to the published rule."""
        lo, up, mine = stretch
        timed = [s for s in self.ledger.within(lo, up) if self.ledger.compare(mine, theirs, s) is not None]
        start, end = lo, up
        merges = []
        before = [s for s in timed if s < won[0]]
        if below and before:
            start = max(lo + 1, midpoint(before[-1], won[0]))
            why = f"level with the published rule's {theirs} below its first lead ({human_size(won[0])})"
            merges.append(Merge(lo, start - 1, mine, theirs, why))
        after = [s for s in timed if s > won[-1]]
        if above and after:
            end = min(after[0], midpoint(won[-1], after[0])) - 1
            why = f"level with the published rule's {theirs} above its last lead ({human_size(won[-1])})"
            merges.append(Merge(end + 1, up, mine, theirs, why))
        kept = [(start, end, mine)]
        if start > lo:
            kept.insert(0, (lo, start - 1, theirs))
        if end != up:
            kept.append((end + 1, up, theirs))
        return kept, merges

    def width(self, span: Span) -> float:
        lo, up, _ = span
        return math.inf if up is None else (up + 1) / max(lo, self.bottom, 1)

    def neighbours(self, spans: list[Span], i: int) -> tuple[str | None, str | None]:
        left = spans[i - 1][2] if i > 0 else None
        right = spans[i + 1][2] if i + 1 < len(spans) else None
        return left, right

    def published_throughout(self, span: Span) -> bool:
        lo, up, name = span
        return all(theirs == name for plo, pup, theirs in self.published if _overlaps(plo, pup, lo, up))

    def leads(self, span: Span) -> bool:
        """Rule 3 for one band: every stretch of it that leaves the published rule has its leads there."""
        lo, up, name = span
        for plo, pup, theirs in self.published:
            if theirs != name and theirs in self.available and _overlaps(plo, pup, lo, up):
                top = up if pup is None else (pup if up is None else min(up, pup))
                if len(self.ledger.faster_at(name, [theirs], max(lo, plo), top)) < MIN_SIZES:
                    return False
        return True

    def island(self, spans: list[Span], i: int) -> bool:
        """True when band ``i`` lies between two bands of one other algorithm: a second crossover of that pair."""
        left, right = self.neighbours(spans, i)
        return left is not None and left == right

    def failure(self, spans: list[Span], i: int) -> tuple[tuple[int, int, float], str] | None:
        """Rules 1 and 2 for band ``i``: ``None`` when it stands, else (how bad, why)."""
        if len(spans) < 2:
            return None
        lo, up, name = span = spans[i]
        island = self.island(spans, i)
        if not island and self.published_throughout(span):
            return None
        width = self.width(span)
        if width < MIN_WIDTH:
            return (0, 0, width), f"a sliver, {width:.2f}x wide (a band is at least {MIN_WIDTH:g}x)"
        if not island:
            return None
        around = spans[i - 1][2]
        won = self.ledger.faster_at(name, [around], lo, up)
        lost = self.ledger.slower_at(name, [around], lo, up)
        if len(won) >= MIN_SIZES and not lost:
            return None
        why = f"an island, faster than {around} at {_sizes(won)}"
        if lost:
            return (1, len(won) - len(lost), width), f"{why} and slower at {_sizes(lost)}; a band is slower at none"
        return (1, len(won), width), f"{why}; a band takes {MIN_SIZES}"

    def merge(self, spans: list[Span], i: int, why: str) -> tuple[list[Span], Merge]:
        """Band ``i`` given to its neighbours (see the module)."""
        lo, up, name = spans[i]
        left, right = self.neighbours(spans, i)
        if left is None or right is None or left == right:
            into = left or right or name
            new = [*spans[:i], (lo, up, into), *spans[i + 1 :]]
            return _merged(new), Merge(lo, up, name, into, why)
        theirs = _at(self.published, _middle(lo, up, self.bottom))
        if theirs in (left, right):
            new = [*spans[:i], (lo, up, theirs), *spans[i + 1 :]]
            return _merged(new), Merge(lo, up, name, theirs, why)
        cut = _middle(lo, up, self.bottom)
        new = [*spans[:i], (lo, cut - 1, left), (cut, up, right), *spans[i + 1 :]]
        return _merged(new), Merge(lo, up, name, f"{left}/{right}", why)


def _overlaps(lo: int, up: int | None, lo2: int, up2: int | None) -> bool:
    return (up2 is None or lo <= up2) and (up is None or lo2 <= up)


def _middle(lo: int, up: int | None, bottom: int) -> int:
    """The geometric middle of ``[lo, up]`` (a bounded span), an element-aligned size inside it."""
    a, b = max(lo, bottom, 1), (up if up is not None else 2 * max(lo, bottom, 1))
    return max(lo + 1, min(b, int(math.sqrt(a * b)) // 4 * 4))


def shape(
    plan: Plan,
    ledger: Ledger,
    published: Sequence[Span],
    available: Collection[str],
    bottom: int | None = None,
) -> tuple[Plan, Shaping]:
    """``plan`` held to the module's rules over ``ledger``; ``published``: the published rule's spans (the
    published choice counts only where it is ``available``); ``bottom``: the smallest size tuned."""
    floor = bottom if bottom is not None else (ledger.sizes[0] if ledger.sizes else 1)
    rules = _Rules(ledger, list(published), frozenset(available), floor)
    spans = plan_spans(plan)
    merges: list[Merge] = []
    seen: set[tuple[Span, ...]] = set()
    while tuple(spans) not in seen:  # each pass removes a band or a departure; a state met again ends it
        seen.add(tuple(spans))
        failures = [(f, i) for i in range(len(spans)) if (f := rules.failure(spans, i)) is not None]
        if failures:
            (_, why), i = min(failures, key=lambda fi: fi[0])
            spans, merged = rules.merge(spans, i, why)
            merges.append(merged)
            continue
        spans, back = rules.departures(spans)
        merges.extend(back)
    bands = _bands(spans, plan.fallback)
    used = {b.candidates[0] for b in bands} | {plan.fallback}
    shaped = replace(plan, bands=bands, params=tuple((n, v) for n, v in plan.params if n in used))
    final = plan_spans(shaped)
    return shaped, Shaping(tuple(_audits(rules, final)), tuple(merges), tuple(_near_ties(rules, final)))


def audit(
    plan: Plan, ledger: Ledger, published: Sequence[Span], available: Collection[str], bottom: int | None = None
) -> list[BandAudit]:
    """Every band of ``plan`` (any plan: a shipped table read back, a fixed rule's) with the evidence at its own
    sizes in ``ledger`` and why it stands by the module's rules (``Justification.NONE``: it does not)."""
    floor = bottom if bottom is not None else (ledger.sizes[0] if ledger.sizes else 1)
    return _audits(_Rules(ledger, list(published), frozenset(available), floor), plan_spans(plan))


def _audits(rules: _Rules, spans: list[Span]) -> list[BandAudit]:
    """Every band of ``spans`` with the evidence at its own sizes and why it stands."""
    ledger, out = rules.ledger, []
    for i, span in enumerate(spans):
        lo, up, name = span
        left, right = rules.neighbours(spans, i)
        theirs = [p for plo, pup, p in rules.published if _overlaps(plo, pup, lo, up) and p in rules.available]
        rivals = tuple(n for n in dict.fromkeys([left, right, *theirs]) if n is not None and n != name)
        if not rivals:
            rivals = tuple(a for a in ledger.algorithms if a != name and a in rules.available)
        faster, level, slower = [], [], []
        for s in ledger.within(lo, up):
            found = ledger.verdict(name, rivals, s)
            if found is not None:
                {FASTER: faster, SLOWER: slower}.get(found[0], level).append(s)
        if rules.failure(spans, i) is not None or not rules.leads(span):
            why = Justification.NONE
        elif len(spans) == 1:
            why = Justification.ONLY
        elif rules.island(spans, i) or not rules.published_throughout(span) or len(faster) >= MIN_SIZES:
            why = Justification.FASTER  # rule 2 or 3 held it up, or it has the evidence anyway
        else:
            why = Justification.PUBLISHED
        out.append(BandAudit(lo, up, name, rivals, tuple(faster), tuple(level), tuple(slower), why))
    return out


def _pieces(spans: Sequence[Span], lo: int, hi: int) -> list[tuple[int, str]]:
    """What ``spans`` run over ``[lo, hi]``: (from, algorithm) per piece."""
    return [(max(lo, slo), name) for slo, sup, name in spans if _overlaps(slo, sup, lo, hi)]


def _say(pieces: list[tuple[int, str]]) -> str:
    if len(pieces) == 1:
        return f"{pieces[0][1]} throughout"
    parts = [f"{pieces[0][1]} below {human_size(pieces[1][0])}"]
    parts += [f"{name} from {human_size(start)}" for start, name in pieces[1:]]
    return ", ".join(parts)


def _near_ties(rules: _Rules, spans: list[Span]) -> list[NearTie]:
    """Stretches where the plan's algorithm and another stayed within the tie band (neither faster) at
    ``MIN_SIZES`` consecutive sizes where the two were timed together, or more."""
    ledger = rules.ledger
    low, high = ledger.rule.band
    seen: dict[tuple[str, str], list[tuple[int, bool, float]]] = {}
    for s in ledger.sizes:
        mine = _at(spans, s)
        for other in ledger.algorithms:
            c = ledger.compare(other, mine, s) if other != mine else None
            if c is not None:
                level = c.verdict not in (FASTER, SLOWER) and low <= c.ratio <= high
                a, b = sorted((mine, other))
                seen.setdefault((a, b), []).append((s, level, abs(c.ratio - 1.0)))
    out = []
    for (a, b), points in sorted(seen.items()):
        for level, group in itertools.groupby(points, key=lambda p: p[1]):
            run = list(group)
            if not level or len(run) < MIN_SIZES:
                continue
            lo, hi = run[0][0], run[-1][0]
            mine, theirs = _pieces(spans, lo, hi), _pieces(rules.published, lo, hi)
            if [n for _, n in mine] == [n for _, n in theirs] and [s for s, _ in mine] == [s for s, _ in theirs]:
                resolved = f"the published rule's choice ({_say(mine)})"
            else:
                resolved = f"{_say(mine)} (the published rule: {_say(theirs)})"
            out.append(NearTie(a, b, lo, hi, max(p[2] for p in run), len(run), resolved))
    return sorted(out, key=lambda t: t.lo)
