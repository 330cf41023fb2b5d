"""Regret on sizes the tuner never measured: how much slower the table's choice is than the best.

At each off-grid size every algorithm (default parameters), every tuned
variant the table uses, and whatever a fixed published rule would choose are
measured together, interleaved (A B C A B C ...) in the same harness call, so
machine drift hits them alike. The regret of a rule at
a size is ``time(rule's choice) / time(fastest usable candidate)``: 1.0 is
perfect. The summary is the geometric mean and the worst over the sizes.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from artune.measure.records import Candidate
from artune.table.decide import decide
from artune.table.model import Table
from artune.tune.noise import Timed, usable


@dataclass(frozen=True)
class RegretPoint:
    """One off-grid size: the best candidate and the two rules' choices, with their times."""

    size: int
    best: Candidate
    best_us: float
    tuned: Candidate
    tuned_us: float
    fixed: Candidate
    fixed_us: float
    baseline_us: float = math.nan

    @property
    def tuned_regret(self) -> float:
        """``tuned_us / best_us`` (inf when the choice failed)."""
        return self.tuned_us / self.best_us

    @property
    def fixed_regret(self) -> float:
        """``fixed_us / best_us`` (inf when the choice failed)."""
        return self.fixed_us / self.best_us


def geomean(values: Iterable[float]) -> float:
    """The geometric mean (``nan`` for no values, ``inf`` if any is infinite)."""
    values = list(values)
    if not values:
        return math.nan
    if any(math.isinf(v) for v in values):
        return math.inf
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True)
class Regret:
    """Regret of the tuned table and of a fixed rule over the same off-grid sizes."""

    points: tuple[RegretPoint, ...]
    fixed_rule: str

    @property
    def tuned_geomean(self) -> float:
        """Geometric-mean regret of the tuned table."""
        return geomean(p.tuned_regret for p in self.points)

    @property
    def tuned_worst(self) -> float:
        """Worst regret of the tuned table."""
        return max((p.tuned_regret for p in self.points), default=math.nan)

    @property
    def fixed_geomean(self) -> float:
        """Geometric-mean regret of the fixed rule."""
        return geomean(p.fixed_regret for p in self.points)

    @property
    def fixed_worst(self) -> float:
        """Worst regret of the fixed rule."""
        return max((p.fixed_regret for p in self.points), default=math.nan)

    def worst_point(self, tuned: bool = True) -> RegretPoint | None:
        """The size where the tuned table (or the fixed rule) does worst."""
        if not self.points:
            return None
        return max(self.points, key=lambda p: p.tuned_regret if tuned else p.fixed_regret)


def choice(table: Table, size: int, world_size: int, available: Collection[str], hosts: int = 1) -> Candidate:
    """The candidate ``table`` runs for ``size`` bytes on ``hosts`` hosts (its algorithm with the plan's parameters)."""
    decision = decide(table, size, world_size, "eager", frozenset(available), hosts)
    return Candidate.of(decision.algorithm, dict(decision.params))


def regret_candidates(
    tuned: Table, fixed: Table, sizes: Sequence[int], world_size: int, algorithms: Sequence[str], hosts: int = 1
) -> list[Candidate]:
    """Every algorithm with default parameters plus both rules' choices at ``sizes``."""
    cands = [Candidate(a) for a in algorithms]
    for size in sizes:
        cands.append(choice(tuned, size, world_size, algorithms, hosts))
        cands.append(choice(fixed, size, world_size, algorithms, hosts))
    return list(dict.fromkeys(cands))


def regret_from(
    measurements: Sequence[Timed],
    tuned: Table,
    fixed: Table,
    world_size: int,
    algorithms: Sequence[str],
    baseline: str,
    banned: Collection[Candidate] = (),
    fixed_name: str = "fixed rule",
    hosts: int = 1,
) -> Regret:
    """The regret of both rules from measurements of ``regret_candidates`` (pure)."""
    by_size: dict[int, dict[Candidate, Timed]] = {}
    for m in measurements:
        by_size.setdefault(m.size_bytes, {})[m.candidate] = m
    points: list[RegretPoint] = []
    for size in sorted(by_size):
        at = by_size[size]
        ok = [m for m in at.values() if usable(m) and m.candidate not in banned]
        if not ok:
            continue
        best = min(ok, key=lambda m: m.time_us)
        picks = [choice(t, size, world_size, algorithms, hosts) for t in (tuned, fixed)]
        times = [at[c].time_us if c in at and usable(at[c]) and c not in banned else math.inf for c in picks]
        base = at.get(Candidate(baseline))
        points.append(
            RegretPoint(
                size,
                best.candidate,
                best.time_us,
                picks[0],
                times[0],
                picks[1],
                times[1],
                base.time_us if base is not None else math.nan,
            )
        )
    return Regret(tuple(points), fixed_name)
