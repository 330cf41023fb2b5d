"""When is one candidate faster than another? The tuner's one rule, decided on paired evidence.

Every decision the tuner takes (which algorithm wins a size, where a band
ends, whether a parameter value helps, whether a table still holds) asks one
question: is ``a`` faster than ``b`` at this size? ``FasterRule.compare`` answers it.
The run's last checks (the duel and the held-out regret) ask it of two plans over
many sizes: is plan ``a`` ahead of plan ``b``? ``FasterRule.weigh`` answers that from
the per-size comparisons. Every other rule of the tuner builds on these two
(the held-out regret's score only ranks plans neither check puts ahead).

**The unit is the round.** The harness times candidates in turns: round after
round, each candidate runs ``burst`` timed calls (eager calls on a CPU or with
CUDA events, graph replays in graph mode: the statistic does not care which),
odd rounds in reverse order. Two turns of one round are adjacent in time, so
what the machine does between rounds (another job starts, a clock steps down,
a core is taken away) hits both alike. Per round the statistic takes the
ratio of the two turns' medians, ``q = median(a's turn) / median(b's turn)``:
drift between rounds cancels in it, a spike in one call of a turn does not
move the turn's median, and a slow rank is in both turns (each sample is
already the slowest rank's time).

**The interval.** The estimate is the median of ``q`` over every round in
which both were timed (pooled over the harness calls that timed both). Its
interval at ``level`` is the distribution-free one for a median: the order
statistics of ``q`` that a sign test at that level cannot reject. It is valid
for any distribution of ``q``, heavy tails and two-regime machines included,
needs no resampling, and is a pure function of the sorted ratios, so every
rank reaches the same decision bit for bit (decisions are collective: a rank
that decided otherwise would run another sequence of calls and hang its
peers). A bootstrap of the ratio of medians would need a shared random stream
and a few hundred medians per decision for the same answer. Two candidates
never timed in one call (a log written without call names) are always
``unsure``: between two calls a shared machine can change its speed several
times over, which no interval over either call's rounds sees (the tuner
measures such a pair together). Their ratio and the medians' intervals are
kept for the record.

**Two statistics, two roles.** A typical call is not the time spent. On a
loaded machine one algorithm can be quicker in a typical call and slower over
the whole call, because its slow calls are slower or more frequent, and a
workload calling back to back pays the mean. So each comparison takes both:
the typical call (the median of the per-round ratios, above) and the ratio of
the two candidates' time spent (the sums of their paired turns), each with its
interval. Their roles are stated here once:

- *At one size* (``FasterRule.compare``) the typical call decides and the
  time spent vetoes: a verdict the time spent contradicts beyond the tie band
  is ``unsure`` (the tuner measures again, then keeps the incumbent). Over
  turns of a few calls the time spent is the noisier statistic by far: a few
  turns many times their median, which any algorithm meets on a shared
  machine, move it more than the differences it would decide.
- *Over a plan's sizes* (``FasterRule.weigh``) the time spent decides and the
  typical call vetoes: a plan serves calls back to back and pays their mean,
  and an algorithm whose slow calls are slower or more frequent pays for them
  at every size it is chosen; over a dozen sizes the hiccups that would decide
  one size average out, and the interval carries what is left. A plan whose
  typical call is behind is not ahead, and a lead by the typical call alone
  does not count: as a second way to be ahead it lets the duel and the
  held-out check, which weigh the same plans at other sizes, contradict each
  other.

**Tails.** A turn counts at most ``SPIKE`` (ten) times the pair's median
turn (one cap for both, from their pooled turns), so a few millisecond
hiccups that hit any algorithm do not decide by where they landed, while an
algorithm's own slow calls (two or three times its typical one) count in
full; a cap at a quantile of the turns would fall inside those and bias the
ratio. ``artune.tune.machine_states`` reports where the two statistics
disagreed.

**The tie band.** A difference is acted on only when the whole interval lies
outside ``[1 / (1 + tie), 1 + tie]``. The interval covers the noise of the
rounds it saw, not two effects it cannot see:

- a candidate's position in the round: two parameter variants that run the
  same code can come out a few percent apart with intervals excluding 1
  (which is why odd rounds run in reverse order);
- the machine changing between calls: the same pair's ratio moves from call
  to call as other work comes and goes.

So the per-size tie (``SIZE_TIE``, the rule's ``tie``) is 3%: above both
effects, below the leads worth taking, and a tie costs at most 3% at that
size. ``level`` is 99% (0.5% in each tail) because one tuning run takes a few
tens of decisions.

**The plan tie.** One plan is ahead of another only when the whole interval of
its weighing lies below ``1 / (1 + PLAN_TIE)``, 1%; inside, the two are level,
and the report says so without calling it a loss. It is narrower than the
per-size tie because the weighing averages a dozen sizes, where the two effects
above fall on either side and the interval carries what is left, and because a
plan's loss of a few per cent, paid at every size, is worth acting on where one
size's is not. The measurements behind these choices are in
``docs/results/tune-evidence.md``.

**Across calls.** A decision may rest on several harness calls, taken at
different moments (the tuner measures a close call again later, and an
unsure one until it decides). A shared machine has states: for seconds at a
time every call is slower and the ratio of two algorithms is another than at
other moments (one state or the other for a whole call). Pooling the rounds
would let the quick state outvote the slow one (it fits more rounds into a
second), so each call also gets its own verdict: faster in some call and
slower in none is faster; faster in one and slower in another goes to the
side the calls favour on the whole (the geometric mean of their ratios: each
call is one moment, so each state weighs as often as the machine was met in
it); otherwise the pooled verdict stands. ``artune.tune.machine_states`` reports how
often and how far the calls of a run disagreed.

**Verdicts** (of ``a`` against ``b``): ``faster`` (interval below the band),
``slower`` (above it), ``tie`` (inside it), ``unsure`` (it overlaps an edge of
the band: more rounds would decide, so the tuner measures again there while
its budget lasts, then keeps the incumbent). A candidate that failed or gave
wrong numbers is slower than any that ran (``usable``).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from functools import cached_property
from typing import Protocol

import numpy as np

from artune.measure.records import Candidate, Measurement
from artune.measure.stats import summarize

#: the per-size tie: at one size, a ratio within ``[1 / (1 + SIZE_TIE), 1 + SIZE_TIE]`` is a tie (**The tie band**)
SIZE_TIE = 0.03
#: the plan tie: over a check's sizes, a plan ahead of another by no more than this is level (**The plan tie**)
PLAN_TIE = 0.01
LEVEL = 0.99


class PairVerdict(str, Enum):
    """What the evidence says of ``a`` against ``b`` (see the module's **Verdicts**)."""

    FASTER = "faster"
    SLOWER = "slower"
    TIE = "tie"
    UNSURE = "unsure"

    def __str__(self) -> str:
        return self.value


FASTER, SLOWER, TIE_VERDICT, UNSURE = PairVerdict.FASTER, PairVerdict.SLOWER, PairVerdict.TIE, PairVerdict.UNSURE
VERDICTS = tuple(PairVerdict)
_EXACT_UP_TO = 1000  # rounds; beyond, the sign test's ranks come from the normal approximation


class Timed(Protocol):
    """What the tuner reads of one candidate at one size: a ``Measurement`` (one call) or ``Pooled``."""

    @property
    def candidate(self) -> Candidate: ...

    @property
    def size_bytes(self) -> int: ...

    @property
    def time_us(self) -> float: ...

    @property
    def p20_us(self) -> float: ...

    @property
    def p80_us(self) -> float: ...

    @property
    def nwrong(self) -> int: ...

    @property
    def status(self) -> str: ...


def usable(m: Timed) -> bool:
    """True when ``m`` ran, gave correct results and has a finite time: only these are ever chosen."""
    return m.status == "ok" and m.nwrong == 0 and math.isfinite(m.time_us) and m.time_us > 0


def wrong(m: Timed) -> bool:
    """True when ``m`` gave wrong numbers (``nwrong > 0`` or status ``invalid``): never choose it anywhere."""
    return m.nwrong > 0 or m.status == "invalid"


def spread(m: Timed) -> float:
    """``(p80 - p20) / median`` of ``m``: the dispersion of single calls (reported, never decided on)."""
    if not usable(m):
        return math.inf
    return max(0.0, (m.p80_us - m.p20_us) / m.time_us)


@dataclass(frozen=True)
class Pooled:
    """Every harness call that timed one candidate at one size, pooled: what the tuner decides on.

    A first measurement is one call; where a decision was unsure the tuner
    adds calls (``CachedMeasurer.more``). Times are over all samples; the
    comparison pairs the rounds of calls that timed both candidates.
    """

    calls: tuple[Measurement, ...]
    #: ``FasterRule.compare`` of this against another pooled candidate, by the other's identity and the rule:
    #: the band rules, the duel and the verdict ask the same pairs again, and pooled calls never change
    compared: dict[tuple[int, FasterRule], tuple[Pooled, Comparison]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not self.calls:
            raise ValueError("Evidence(): needs at least one measurement")
        first = self.calls[0]
        if any((m.candidate, m.size_bytes) != (first.candidate, first.size_bytes) for m in self.calls):
            raise ValueError(f"Evidence(): calls of other candidates or sizes than {first.key}")

    @property
    def candidate(self) -> Candidate:
        """The candidate."""
        return self.calls[0].candidate

    @property
    def size_bytes(self) -> int:
        """The message size."""
        return self.calls[0].size_bytes

    @property
    def status(self) -> str:
        """``ok`` when every call ran, else the first failure's status."""
        return next((m.status for m in self.calls if m.status != "ok"), "ok")

    @property
    def nwrong(self) -> int:
        """Wrong elements over the calls' checks (``-1`` when a call was not checked and none was wrong)."""
        counts = [m.nwrong for m in self.calls]
        if any(n > 0 for n in counts):
            return sum(n for n in counts if n > 0)
        return 0 if all(n == 0 for n in counts) else -1

    @cached_property
    def samples_us(self) -> tuple[float, ...]:
        """Every call's samples, in call order."""
        return tuple(s for m in self.calls for s in m.samples_us)

    @cached_property
    def _summary(self) -> tuple[float, float, float]:
        if self.status != "ok" or not self.samples_us:
            return math.inf, math.inf, math.inf
        s = summarize(self.samples_us)
        return s.median, s.p20, s.p80

    @property
    def time_us(self) -> float:
        """Median of all samples (``inf`` when a call failed)."""
        return self._summary[0]

    @property
    def p20_us(self) -> float:
        """20th percentile of all samples."""
        return self._summary[1]

    @property
    def p80_us(self) -> float:
        """80th percentile of all samples."""
        return self._summary[2]

    @property
    def iters(self) -> int:
        """Samples over all calls."""
        return len(self.samples_us)

    @cached_property
    def turns(self) -> dict[str, np.ndarray]:
        """Per named call, its turns (what ``pairs_by_call`` pairs)."""
        return {m.call: _turns(m) for m in self.calls if m.call and m.status == "ok"}


def calls_of(m: Timed) -> tuple[Measurement, ...]:
    """The harness calls behind ``m``."""
    if isinstance(m, Pooled):
        return m.calls
    if isinstance(m, Measurement):
        return (m,)
    return tuple(getattr(m, "calls", ()))


@dataclass(frozen=True)
class Comparison:
    """``a`` against ``b`` at one size: the ratio of their times, its interval and the verdict."""

    a: Candidate
    b: Candidate
    size: int
    ratio: float  # a's time over b's (below 1: a is faster); inf when only a failed, 0 when only b did
    low: float
    high: float
    rounds: int  # paired rounds behind the interval (0: unpaired, from the two medians' intervals)
    verdict: PairVerdict
    level: float = LEVEL
    tie: float = SIZE_TIE
    calls: tuple[tuple[float, PairVerdict], ...] = ()  # (ratio, verdict) per harness call, when more than one paired
    spent: float = math.nan  # a's time spent over b's, rare spikes capped (``spent_ratio``; nan: unpaired)
    spent_low: float = math.nan  # its interval (``spent_interval``)
    spent_high: float = math.nan

    @property
    def lead(self) -> float:
        """How much faster ``a`` is than ``b`` by the estimate: ``1 / ratio - 1`` (negative: slower)."""
        if self.ratio == 0:
            return math.inf
        return 1.0 / self.ratio - 1.0 if math.isfinite(self.ratio) else -1.0

    def rounds_to_decide(self) -> float:
        """Paired rounds in all after which this interval would clear the edge of the tie band it
        overlaps, if the ratio stayed where it is and the interval shrank as ``1 / sqrt(rounds)``
        (``inf`` when no number would: the ratio sits on the edge, or there is no interval yet)."""
        if self.verdict != UNSURE or not self.rounds or not (self.low > 0 and math.isfinite(self.high)):
            return math.inf
        r = math.log(self.ratio)
        edges = [math.log(e) for e in (1.0 / (1.0 + self.tie), 1.0 + self.tie) if self.low < e < self.high]
        if not edges:
            return math.inf
        edge = min(edges, key=lambda e: abs(e - r))
        half = math.log(self.high) - r if edge > r else r - math.log(self.low)
        distance = abs(edge - r)
        return self.rounds * (half / distance) ** 2 if distance > 0 else math.inf

    def swapped(self) -> Comparison:
        """``b`` against ``a``."""
        flip = {FASTER: SLOWER, SLOWER: FASTER}
        inv = lambda x: math.inf if x == 0 else (0.0 if math.isinf(x) else 1.0 / x)  # noqa: E731
        calls = tuple((inv(r), flip.get(v, v)) for r, v in self.calls)
        return Comparison(
            self.b, self.a, self.size, inv(self.ratio), inv(self.high), inv(self.low), self.rounds,
            flip.get(self.verdict, self.verdict), self.level, self.tie, calls, inv(self.spent),
            inv(self.spent_high), inv(self.spent_low),
        )  # fmt: skip

    def interval(self) -> str:
        """``0.861x [0.842, 0.880]``: the ratio and its interval (``failed`` when one of them did not run)."""
        if math.isinf(self.ratio):
            return f"{self.a.key} failed"
        if self.ratio == 0:
            return f"{self.b.key} failed"
        if math.isnan(self.ratio):
            return "-"
        high = "inf" if math.isinf(self.high) else f"{self.high:.3f}"
        return f"{self.ratio:.3f}x [{self.low:.3f}, {high}]"

    def describe(self) -> str:
        """One phrase: ``shm_two_shot/shm_one_shot 0.861x [0.842, 0.880] over 313 rounds (time spent 0.874x):
        faster``."""
        over = f"over {self.rounds} rounds (time spent {self.spent:.3f}x)" if self.rounds else "unpaired"
        each = f" (per call: {', '.join(f'{r:.3f} {v}' for r, v in self.calls)})" if self.calls else ""
        return f"{self.a.key}/{self.b.key} {self.interval()} {over}{each}: {self.verdict}"


@dataclass(frozen=True)
class Overall:
    """One plan against another over a check's sizes (``FasterRule.weigh``): ``rule``'s time spent over
    ``against``'s, and its typical call's."""

    rule: str
    ratio: float  # geometric mean of the rule's choice's time spent over the other's (below 1: the rule is ahead)
    low: float  # its interval (at the rule's level)
    high: float
    sizes: int  # the sizes where their choices differ and the evidence has an interval
    against: str = ""  # the plan it was weighed against ("": the derived table)
    failed: bool = False  # decided by choices that failed (the ratio is 0, inf or 1 where both sides failed)
    typical: tuple[float, float, float] | None = None  # the same of the typical call: (ratio, low, high)

    def ahead(self, tie: float = PLAN_TIE) -> bool:
        """True when ``rule`` is ahead by more than ``tie`` (the plan tie) over the whole interval of the time
        spent, and its typical call is not behind (the module's **Two statistics, two roles**)."""
        ahead = self.high < 1.0 / (1.0 + tie)
        return ahead if self.failed or self.typical is None else ahead and self.typical[0] <= 1.0

    def interval(self) -> str:
        """``time spent 0.975x [0.962, 0.988], typical call 0.990x [0.981, 0.999], over 9 differing sizes``."""
        if self.failed:
            side = "the other plan's" if self.ratio == 0 else "this plan's" if math.isinf(self.ratio) else "each plan's"
            return f"{side} choice failed at {self.sizes} differing size(s) where the other's ran"
        spent = f"{self.ratio:.3f}x [{self.low:.3f}, {self.high:.3f}]"
        if self.typical is None:
            return f"{spent} over {self.sizes} differing sizes"
        typical = "{:.3f}x [{:.3f}, {:.3f}]".format(*self.typical)
        return f"time spent {spent}, typical call {typical}, over {self.sizes} differing sizes"


@functools.lru_cache(maxsize=4096)
def _sign_rank(n: int, level: float) -> int:
    """The largest ``k`` with ``P(Binomial(n, 1/2) < k) <= (1 - level) / 2`` (0: no interval at ``level``).

    The interval for a median is then the ``k``-th smallest and ``k``-th
    largest of ``n`` values. Exact in integers up to 1000 values (so every
    rank gets the same ``k``), the normal approximation with continuity
    correction above.
    """
    tail = Fraction(1.0 - level) / 2
    if n > _EXACT_UP_TO:
        z = statistics.NormalDist().inv_cdf(1.0 - float(tail))
        return max(0, math.floor((n + 1 - z * math.sqrt(n)) / 2))
    limit = tail * 2**n
    total, k = 0, 0
    while k <= n:
        term = math.comb(n, k)
        if total + term > limit:
            break
        total += term
        k += 1
    return k


def median_interval(values: Sequence[float] | np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """``(median, low, high)`` of ``values``: the distribution-free interval for the median at ``level``
    (``low = 0``, ``high = inf`` when there are too few values for one)."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    n = len(ordered)
    if n == 0:
        return math.nan, 0.0, math.inf
    mid = float(ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2)
    k = _sign_rank(n, level)
    if k == 0:
        return mid, 0.0, math.inf
    return mid, float(ordered[k - 1]), float(ordered[n - k])


def _turns(m: Measurement) -> np.ndarray:
    """The turns of ``m``: one row per round, its ``burst`` calls."""
    samples = np.asarray(m.samples_us, dtype=np.float64)
    rounds = len(samples) // m.burst
    return samples[: rounds * m.burst].reshape(rounds, m.burst)


def _turns_by_call(m: Timed) -> dict[str, np.ndarray]:
    if isinstance(m, Pooled):
        return m.turns
    return {c.call: _turns(c) for c in calls_of(m) if c.call and c.status == "ok"}


def pairs_by_call(a: Timed, b: Timed) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per harness call that timed both, in call order: ``a``'s and ``b``'s turns, round by round."""
    theirs = _turns_by_call(b)
    pairs = []
    for call, ta in _turns_by_call(a).items():
        tb = theirs.get(call)
        if tb is None or len(ta) != len(tb):
            continue
        ok = (ta.min(axis=1, initial=np.inf) > 0) & (tb.min(axis=1, initial=np.inf) > 0)
        if ok.any():
            pairs.append((ta[ok], tb[ok]))
    return pairs


#: a turn counts at most this many times the median turn of the pair (the module's **Tails**)
SPIKE = 10.0


def _capped_turns(ta: np.ndarray, tb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each paired round's time spent by ``a`` and by ``b``, a turn counted at most ``SPIKE`` times the median
    of all their turns (the module's **Tails**)."""
    sa, sb = ta.sum(axis=1), tb.sum(axis=1)
    cap = SPIKE * float(np.median(np.concatenate([sa, sb])))
    return np.minimum(sa, cap), np.minimum(sb, cap)


def spent_ratio(ta: np.ndarray, tb: np.ndarray) -> float:
    """The time ``a``'s paired turns ``ta`` spent over ``b``'s ``tb`` (rows: rounds), rare spikes capped
    (``_capped_turns``)."""
    sa, sb = _capped_turns(ta, tb)
    return float(sa.sum() / sb.sum())


def spent_interval(ta: np.ndarray, tb: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """``(ratio, low, high)``: ``spent_ratio`` of paired turns and its ``level`` interval, from the delta
    method over the rounds (the log of a ratio of two sums varies as the sum of each round's shares of
    them, ``x_r / X - y_r / Y``, squared). Deterministic, so every rank gets the same interval; one round
    has none (``0, inf``)."""
    sa, sb = _capped_turns(ta, tb)
    total_a, total_b = float(sa.sum()), float(sb.sum())
    ratio = total_a / total_b
    if len(sa) < 2:
        return ratio, 0.0, math.inf
    se = math.sqrt(float(np.square(sa / total_a - sb / total_b).sum()))
    half = statistics.NormalDist().inv_cdf(1.0 - (1.0 - level) / 2) * se
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)


@dataclass(frozen=True)
class FasterRule:
    """The rule for "faster": a ``level`` interval of the paired time ratio must clear the ``tie`` band at one
    size (``compare``); over a plan's sizes, ``weigh``."""

    tie: float = SIZE_TIE
    level: float = LEVEL

    def __post_init__(self) -> None:
        if not (0.0 <= self.tie < 1.0 and 0.5 <= self.level < 1.0):
            raise ValueError(
                f"FasterRule(): need 0 <= tie < 1 and 0.5 <= level < 1, got tie={self.tie}, level={self.level}"
            )

    @property
    def band(self) -> tuple[float, float]:
        """The ratios that count as equally fast: ``[1 / (1 + tie), 1 + tie]``."""
        return 1.0 / (1.0 + self.tie), 1.0 + self.tie

    def verdict(self, low: float, high: float) -> PairVerdict:
        """``faster``/``slower``/``tie``/``unsure`` of an interval ``[low, high]`` of a time ratio."""
        lo_band, hi_band = self.band
        if high < lo_band:
            return FASTER
        if low > hi_band:
            return SLOWER
        if low >= lo_band and high <= hi_band:
            return TIE_VERDICT
        return UNSURE

    def compare(self, a: Timed, b: Timed) -> Comparison:
        """``a`` against ``b``: paired over the rounds of calls that timed both, else from each one's turns."""
        if not isinstance(a, Pooled):
            return self._compare(a, b)
        kept = a.compared.get((id(b), self))
        if kept is None or kept[0] is not b:  # an identity: the other object kept alive beside its answer
            kept = a.compared[(id(b), self)] = (b, self._compare(a, b))
        return kept[1]

    def _compare(self, a: Timed, b: Timed) -> Comparison:
        ca, cb, size = a.candidate, b.candidate, a.size_bytes
        ok_a, ok_b = usable(a), usable(b)
        if not ok_a or not ok_b:
            if ok_a:
                return Comparison(ca, cb, size, 0.0, 0.0, 0.0, 0, FASTER, self.level, self.tie)
            if ok_b:
                return Comparison(ca, cb, size, math.inf, math.inf, math.inf, 0, SLOWER, self.level, self.tie)
            return Comparison(ca, cb, size, math.nan, math.nan, math.nan, 0, TIE_VERDICT, self.level, self.tie)
        by_call = pairs_by_call(a, b)
        if by_call:
            ta, tb = np.concatenate([p[0] for p in by_call]), np.concatenate([p[1] for p in by_call])
            ratio, low, high, verdict, spent = self.judge(ta, tb)
            _, spent_low, spent_high = spent_interval(ta, tb, self.level)
            calls: tuple[tuple[float, PairVerdict], ...] = ()
            if len(by_call) > 1:
                calls = tuple((r, v) for r, _, _, v, _ in (self.judge(x, y) for x, y in by_call))
                verdict = self.across(verdict, calls)
            return Comparison(
                ca, cb, size, ratio, low, high, len(ta), verdict, self.level, self.tie, calls, spent, spent_low,
                spent_high,
            )  # fmt: skip
        # never timed in one call: the turn medians' own intervals, for the record; the verdict stays unsure,
        # since the machine may have been in another state for each (the module's **Across calls**)
        part = math.sqrt(self.level)
        ma, la, ha = median_interval(np.concatenate([np.median(_turns(m), axis=1) for m in calls_of(a)]), part)
        mb, lb, hb = median_interval(np.concatenate([np.median(_turns(m), axis=1) for m in calls_of(b)]), part)
        low = la / hb if hb > 0 and math.isfinite(hb) else 0.0
        high = ha / lb if lb > 0 else math.inf
        return Comparison(ca, cb, size, ma / mb, low, high, 0, UNSURE, self.level, self.tie)

    def judge(self, ta: np.ndarray, tb: np.ndarray) -> tuple[float, float, float, PairVerdict, float]:
        """``(ratio, low, high, verdict, spent)`` of paired turns ``ta`` against ``tb`` (rows: rounds): the
        median of the per-round ratios of turn medians, its interval and verdict, and the ratio of time
        spent (``spent_ratio``); a verdict the time spent contradicts beyond the band is ``unsure``."""
        ratio, low, high = median_interval(np.median(ta, axis=1) / np.median(tb, axis=1), self.level)
        verdict, spent = self.verdict(low, high), spent_ratio(ta, tb)
        lo_band, hi_band = self.band
        if (verdict == FASTER and spent > hi_band) or (verdict == SLOWER and spent < lo_band):
            verdict = UNSURE
        return ratio, low, high, verdict, spent

    def across(self, pooled: PairVerdict, calls: Sequence[tuple[float, PairVerdict]]) -> PairVerdict:
        """The verdict over harness calls taken at different moments, from the pooled one and each call's
        ``(ratio, verdict)``: faster in some call (or pooled) and slower in none is faster; the reverse
        slower; faster in one and slower in another goes to the side the mix of the calls favours (the
        geometric mean of their ratios: each call one moment of the machine, so each state counts as
        often as it was met, not as many rounds as it fits); otherwise the pooled verdict."""
        verdicts = {pooled, *(v for _, v in calls)}
        if FASTER in verdicts and SLOWER in verdicts:
            mix = math.fsum(math.log(r) for r, _ in calls) / len(calls)
            return FASTER if mix < 0 else SLOWER
        if FASTER in verdicts:
            return FASTER
        if SLOWER in verdicts:
            return SLOWER
        return pooled

    def weigh(self, found: Sequence[Comparison], alike: int, rule: str = "", against: str = "") -> Overall:
        """Plan ``rule`` against plan ``against`` over a check's sizes: ``found`` holds, at each size where their
        choices differ and both were measured, ``compare`` of ``rule``'s choice against ``against``'s;
        ``alike`` counts the sizes where both choose alike.

        The estimate is the geometric mean over all those sizes of the ratio of the time the choices spent
        (``Comparison.spent``; 1, known exactly, where both choose alike), its interval from the sizes' own
        (their log half-widths added in quadrature); the typical call's is taken the same way, for its veto
        (``Overall.ahead``). A size where the two differ counts only with an interval (too few rounds there
        tell nothing either way). A choice that failed where the other ran loses outright: ``rule`` is ahead
        (ratio 0) where only the other's failed, and never ahead where only its own did.
        """
        z = statistics.NormalDist().inv_cdf(1.0 - (1.0 - self.level) / 2)
        logs: list[float] = []  # time spent
        typical: list[float] = []
        variance, typical_variance, ours_failed, theirs_failed = 0.0, 0.0, 0, 0
        for c in found:
            if not c.rounds and c.ratio in (0.0, math.inf):  # one choice failed where the other ran
                ours_failed += c.ratio == 0.0
                theirs_failed += math.isinf(c.ratio)
                continue
            if not c.rounds or not (c.low > 0 and c.high < math.inf):
                continue  # (a median's interval needs more rounds than the time spent's: it has one, so has this)
            logs.append(math.log(c.spent))
            variance += ((math.log(c.spent_high) - math.log(c.spent_low)) / (2 * z)) ** 2
            typical.append(math.log(c.ratio))
            typical_variance += ((math.log(c.high) - math.log(c.low)) / (2 * z)) ** 2
        if ours_failed or theirs_failed:
            only_ours, only_theirs = ours_failed and not theirs_failed, theirs_failed and not ours_failed
            outright = 0.0 if only_ours else math.inf if only_theirs else 1.0
            return Overall(rule, outright, outright, outright, ours_failed + theirs_failed, against, failed=True)
        n = max(1, alike + len(logs))
        mean, half = math.fsum(logs) / n, z * math.sqrt(variance) / n
        mid, spread = math.fsum(typical) / n, z * math.sqrt(typical_variance) / n
        return Overall(
            rule, math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs), against,
            typical=(math.exp(mid), math.exp(mid - spread), math.exp(mid + spread)),
        )  # fmt: skip

    def faster(self, a: Timed, b: Timed) -> bool:
        """True when ``a`` is faster than ``b`` beyond the tie band (a failed ``b`` is always beaten)."""
        return self.compare(a, b).verdict == FASTER

    def describe(self) -> str:
        """One line for reports and provenance notes."""
        return (
            f"faster = the {self.level:.0%} interval of the paired per-round time ratio clears a "
            f"±{self.tie:.0%} tie band"
        )
