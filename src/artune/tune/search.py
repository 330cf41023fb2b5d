"""Searching an algorithm's declared tunables (``Communicator.tunables(name)``).

One parameter at a time (coordinate search, parameters in name order): the
current best candidate of the algorithm (defaults at first) and one variant
per declared value are measured together, interleaved, at up to three sizes
where the algorithm won the coarse sweep (its two largest and its smallest:
a parameter applies to every size the algorithm serves). A value is kept
only when

- it is usable (correct, finished) at every size,
- it beats the current best by more than noise at one size at least,
- it is not slower than the current best by more than noise at any size, and
- its geometric-mean gain over the sizes is above 1 (the best such value wins).

Otherwise the current best stays: a parameter never changes on noise. The
search sizes are fresh (the geometric midpoint between two coarse sizes the
algorithm won, when there is one), so the current best is measured in the
same interleaved call as its variants rather than taken from the sweep.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from artune.measure.records import Candidate
from artune.table.model import ParamValue
from artune.tune.derive import MeasureFn, Pick
from artune.tune.grid import midpoint
from artune.tune.noise import NoiseRule, usable


@dataclass(frozen=True)
class Trial:
    """One value of one parameter against the current best."""

    value: ParamValue
    gain: float  # geometric mean of t_best / t_value over the sizes (inf: best failed; 0: value failed)
    noise: float
    wrong: bool = False


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


def search_sizes(name: str, picks: Sequence[Pick], itemsize: int = 4, most: int = 3) -> list[int]:
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
            out.append(midpoint(sizes[i - 1], sizes[i], itemsize))
        elif i + 1 < len(picks) and picks[i + 1].winner.algorithm == name:
            out.append(midpoint(sizes[i], sizes[i + 1], itemsize))
        else:
            out.append(sizes[i])
    return sorted(dict.fromkeys(out))


def _with(base: Candidate, param: str, value: ParamValue) -> Candidate:
    params = base.params_dict
    params[param] = value
    return Candidate.of(base.algorithm, params)


def search_param(
    measure: MeasureFn,
    base: Candidate,
    param: str,
    values: Sequence[ParamValue],
    sizes: Sequence[int],
    rule: NoiseRule,
    budget_s: float,
) -> ParamSearch:
    """Measure ``base`` and each value of ``param`` at ``sizes`` in one call; keep a value only if it
    beats ``base`` by more than noise (see the module rules)."""
    variants = {v: _with(base, param, v) for v in dict.fromkeys(values)}
    variants = {v: c for v, c in variants.items() if c != base}
    got = measure([base, *variants.values()], list(sizes), budget_s)
    at = {(m.candidate, m.size_bytes): m for m in got}
    trials: list[Trial] = []
    best: tuple[float, ParamValue] | None = None
    for value, cand in variants.items():
        pairs = [(at[(base, s)], at[(cand, s)]) for s in sizes]
        wrong = any(m.nwrong > 0 or m.status == "invalid" for _, m in pairs)
        if not all(usable(m) for _, m in pairs):
            trials.append(Trial(value, 0.0, rule.floor, wrong))
            continue
        if not all(usable(b) for b, _ in pairs):
            trials.append(Trial(value, math.inf, rule.floor))
            if best is None or best[0] < math.inf:
                best = (math.inf, value)
            continue
        gain = math.exp(sum(math.log(b.time_us / m.time_us) for b, m in pairs) / len(pairs))
        noise = max(rule.noise(b, m) for b, m in pairs)
        trials.append(Trial(value, gain, noise))
        clear_win = any(rule.beats(m, b) for b, m in pairs)
        never_worse = not any(rule.beats(b, m) for b, m in pairs)
        if clear_win and never_worse and gain > 1.0 and (best is None or gain > best[0]):
            best = (gain, value)
    if best is None:
        reason = "no value beats the current setting by more than noise"
        return ParamSearch(base.algorithm, param, tuple(sizes), base, tuple(trials), None, reason)
    gain, value = best
    reason = f"{param}={value} is {gain:.2f}x the current setting (noise {_pct(trials, value)})"
    return ParamSearch(base.algorithm, param, tuple(sizes), base, tuple(trials), value, reason)


def _pct(trials: Sequence[Trial], value: ParamValue) -> str:
    for t in trials:
        if t.value == value:
            return f"{t.noise:.0%}"
    return "?"


def search_algorithm(
    measure: MeasureFn,
    name: str,
    tunables: dict[str, tuple[ParamValue, ...]],
    sizes: Sequence[int],
    rule: NoiseRule,
    budget_s: float,
) -> tuple[Candidate, list[ParamSearch]]:
    """Coordinate search over ``name``'s tunables; returns the best candidate and each parameter's search."""
    base = Candidate(name)
    searches: list[ParamSearch] = []
    params = [p for p in sorted(tunables) if tunables[p]]
    for param in params:
        found = search_param(measure, base, param, tunables[param], sizes, rule, budget_s / len(params))
        searches.append(found)
        if found.chosen is not None:
            base = _with(base, param, found.chosen)
    return base, searches
