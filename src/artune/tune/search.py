"""Searching an algorithm's declared tunables (``Communicator.tunables(name)``).

One parameter at a time (coordinate search, parameters in name order): the
current best candidate of the algorithm (defaults at first) and one variant
per declared value are measured together, interleaved, at up to three sizes
where the algorithm won the coarse sweep (its two largest and its smallest:
a parameter applies to every size the algorithm serves). A value is kept
only when (verdicts of ``artune.tune.compare``, against the current best)

- it is usable (correct, finished) at every size,
- it is faster at one size at least,
- it is slower at none, and
- its geometric-mean gain over the sizes is above 1 (the best such value wins).

Otherwise the current best stays: a parameter never changes on noise. A
value that would qualify but for an unsure verdict is measured once more
with the current best at those sizes (a third of the parameter's budget).
The current best is measured in the same interleaved call as its variants
(``together``), never taken from the sweep alone: only rounds timed in
turns compare two candidates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from artune.grid import midpoint
from artune.measure.records import Candidate
from artune.measure.stats import geomean
from artune.table.types import ParamValue
from artune.tune.compare import FASTER, SLOWER, UNSURE, Comparison, FasterRule, PairVerdict, Timed, usable, wrong
from artune.tune.derive import Pick, Sampler


@dataclass(frozen=True)
class Trial:
    """One value of one parameter against the current best."""

    value: ParamValue
    gain: float  # geometric mean of t_best / t_value over the sizes (inf: best failed; 0: value failed)
    comparisons: tuple[Comparison, ...] = ()  # the value against the current best, per size
    wrong: bool = False

    @property
    def verdicts(self) -> tuple[PairVerdict, ...]:
        """The verdict at each size."""
        return tuple(c.verdict for c in self.comparisons)


@dataclass(frozen=True)
class ParamSearch:
    """The outcome for one parameter of one algorithm."""

    algorithm: str
    param: str
    sizes: tuple[int, ...]
    base: Candidate
    trials: tuple[Trial, ...]
    chosen: ParamValue | None  # None: the base is kept
    reason: str


def search_sizes(name: str, picks: Sequence[Pick], grain: int = 4, most: int = 3) -> list[int]:
    """Up to ``most`` fresh sizes inside the range ``name`` won: its two largest winning sizes and its
    smallest, each moved to the midpoint with a neighbouring size it also won when there is one."""
    sizes = [p.size for p in picks]
    won = [i for i, p in enumerate(picks) if p.winner.algorithm == name]
    if not won:
        return []
    chosen_idx = list(dict.fromkeys([won[-1], *won[-2:-1], won[0]]))[:most]
    out: list[int] = []
    for i in chosen_idx:
        if i > 0 and picks[i - 1].winner.algorithm == name:
            out.append(midpoint(sizes[i - 1], sizes[i], grain))
        elif i + 1 < len(picks) and picks[i + 1].winner.algorithm == name:
            out.append(midpoint(sizes[i], sizes[i + 1], grain))
        else:
            out.append(sizes[i])
    return sorted(dict.fromkeys(out))


def _with(base: Candidate, param: str, value: ParamValue) -> Candidate:
    params = base.params_dict
    params[param] = value
    return Candidate.of(base.algorithm, params)


def _trial(value: ParamValue, pairs: Sequence[tuple[Timed, Timed]], rule: FasterRule) -> Trial:
    """One value against the current best: ``pairs`` is (best, value) at each size."""
    if not all(usable(m) for _, m in pairs):
        return Trial(value, 0.0, (), any(wrong(m) for _, m in pairs))
    if not all(usable(b) for b, _ in pairs):
        return Trial(value, math.inf)
    found = tuple(rule.compare(m, b) for b, m in pairs)
    gain = geomean(1.0 / c.ratio for c in found)
    return Trial(value, gain, found)


def _qualifies(trial: Trial, sure: bool = True) -> bool:
    """Faster somewhere, slower nowhere, a gain above 1 (``sure=False``: an unsure verdict may stand in
    for the faster one)."""
    if math.isinf(trial.gain):
        return True
    won = FASTER in trial.verdicts or (not sure and UNSURE in trial.verdicts)
    return bool(trial.comparisons) and won and SLOWER not in trial.verdicts and trial.gain > 1.0


def search_param(
    sampler: Sampler,
    base: Candidate,
    param: str,
    values: Sequence[ParamValue],
    sizes: Sequence[int],
    rule: FasterRule,
    budget_s: float,
) -> ParamSearch:
    """Measure ``base`` and each value of ``param`` at ``sizes`` in one call; keep a value only if it is
    faster than ``base`` (see the module rules), measuring again once where that is unsure."""
    variants = {v: _with(base, param, v) for v in dict.fromkeys(values)}
    variants = {v: c for v, c in variants.items() if c != base}

    def trials() -> list[Trial]:
        at = {(m.candidate, m.size_bytes): m for m in got}
        return [_trial(v, [(at[(base, s)], at[(c, s)]) for s in sizes], rule) for v, c in variants.items()]

    group = [base, *variants.values()]
    got = [m for size in sizes for m in sampler.together(group, size, budget_s * 2 / 3 / len(sizes))]
    found = trials()
    maybe = [t for t in found if _qualifies(t, sure=False) and not _qualifies(t)]
    if maybe:
        again = [variants[t.value] for t in maybe]
        where = [s for s in sizes if any(t.comparisons[sizes.index(s)].verdict == UNSURE for t in maybe)]
        for size in where:
            fresh = {m.candidate: m for m in sampler.more([base, *again], size, budget_s / 3 / len(where))}
            got = [fresh.get(m.candidate, m) if m.size_bytes == size else m for m in got]
        found = trials()
    best = max((t for t in found if _qualifies(t)), key=lambda t: t.gain, default=None)
    if best is None:
        reason = "no value is faster than the current setting"
        return ParamSearch(base.algorithm, param, tuple(sizes), base, tuple(found), None, reason)
    reason = f"{param}={best.value} is {best.gain:.2f}x the current setting ({', '.join(best.verdicts)})"
    return ParamSearch(base.algorithm, param, tuple(sizes), base, tuple(found), best.value, reason)


def search_algorithm(
    sampler: Sampler,
    name: str,
    tunables: dict[str, tuple[ParamValue, ...]],
    sizes: Sequence[int],
    rule: FasterRule,
    budget_s: float,
) -> tuple[Candidate, list[ParamSearch]]:
    """Coordinate search over ``name``'s tunables; returns the best candidate and each parameter's search."""
    base = Candidate(name)
    searches: list[ParamSearch] = []
    params = [p for p in sorted(tunables) if tunables[p]]
    for param in params:
        found = search_param(sampler, base, param, tunables[param], sizes, rule, budget_s / len(params))
        searches.append(found)
        if found.chosen is not None:
            base = _with(base, param, found.chosen)
    return base, searches
