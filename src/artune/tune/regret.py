"""Regret on sizes the tuner never measured: how much slower a rule's choice is than the best.

At each off-grid size every algorithm (default parameters), every tuned
variant the table uses, and whatever a fixed published rule would choose are
measured together, interleaved (A B C A B C ...) in the same harness call, so
machine drift hits them alike. The regret of a rule at a size is
``time(rule's choice) / time(fastest usable candidate)``: 1.0 is perfect. The
summary is the geometric mean and the worst over the sizes.

The rules scored, in order: the tuned table, the fixed published rule
(DeepSpeed's 1 MiB switch on CPU, NCCL for every size on CUDA) and every
fixed single-algorithm rule (``always shm_one_shot``: one algorithm with its
default parameters at every size). They need no measurement of their own:
every algorithm is measured at every off-grid size anyway. With the duel's,
these sizes are where the run's checks (``artune.tune.shipping``) weigh
each plan against another (``FasterRule.weigh``): a fixed rule a check puts
ahead of the tuned table ships instead, and this score ranks the fixed rules
that no check puts another plan ahead of.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from artune.measure.records import Candidate
from artune.measure.stats import geomean
from artune.table.decide import decide
from artune.table.types import Band, Plan, Platform, Provenance, Table
from artune.tune.compare import Timed, usable

TUNED = "tuned table"


@dataclass(frozen=True)
class RegretPoint:
    """One off-grid size: the best candidate and each rule's choice, with its time."""

    size: int
    best: Candidate
    best_us: float
    choices: tuple[tuple[Candidate, float], ...]  # per rule of the ``RegretScore``, in its order
    baseline_us: float = math.nan

    def regret(self, rule: int) -> float:
        """``time(choice of rule number rule) / best_us`` (inf when the choice failed)."""
        return self.choices[rule][1] / self.best_us

    @property
    def tuned(self) -> Candidate:
        """The tuned table's choice."""
        return self.choices[0][0]

    @property
    def tuned_us(self) -> float:
        """Its time."""
        return self.choices[0][1]

    @property
    def fixed(self) -> Candidate:
        """The published rule's choice."""
        return self.choices[1][0]

    @property
    def fixed_us(self) -> float:
        """Its time."""
        return self.choices[1][1]

    @property
    def tuned_regret(self) -> float:
        """``tuned_us / best_us`` (inf when the choice failed)."""
        return self.regret(0)

    @property
    def fixed_regret(self) -> float:
        """``fixed_us / best_us`` (inf when the choice failed)."""
        return self.regret(1)


@dataclass(frozen=True)
class RegretScore:
    """Regret of the tuned table and of fixed rules over the same off-grid sizes.

    ``rules`` names them: the tuned table first, then the published rule, then
    the single-algorithm rules.
    """

    points: tuple[RegretPoint, ...]
    rules: tuple[str, ...]

    @property
    def fixed_rule(self) -> str:
        """The published rule's name."""
        return self.rules[1]

    def geomean(self, rule: int) -> float:
        """Geometric-mean regret of rule number ``rule``."""
        return geomean(p.regret(rule) for p in self.points)

    def worst(self, rule: int) -> float:
        """Worst regret of rule number ``rule``."""
        return max((p.regret(rule) for p in self.points), default=math.nan)

    @property
    def tuned_geomean(self) -> float:
        """Geometric-mean regret of the tuned table."""
        return self.geomean(0)

    @property
    def tuned_worst(self) -> float:
        """Worst regret of the tuned table."""
        return self.worst(0)

    @property
    def fixed_geomean(self) -> float:
        """Geometric-mean regret of the published rule."""
        return self.geomean(1)

    @property
    def fixed_worst(self) -> float:
        """Worst regret of the published rule."""
        return self.worst(1)

    def best_fixed(self) -> tuple[str, float]:
        """The fixed rule with the lowest geometric-mean regret, and that regret."""
        if len(self.rules) < 2:
            return "", math.nan
        index = min(range(1, len(self.rules)), key=self.geomean)
        return self.rules[index], self.geomean(index)

    def worst_point(self, tuned: bool = True) -> RegretPoint | None:
        """The size where the tuned table (or the published rule) does worst."""
        if not self.points:
            return None
        return max(self.points, key=lambda p: p.tuned_regret if tuned else p.fixed_regret)


def choice(table: Table, size: int, world_size: int, available: Collection[str], hosts: int = 1) -> Candidate:
    """The candidate ``table`` runs for ``size`` bytes on ``hosts`` hosts (its algorithm with the plan's parameters)."""
    decision = decide(table, size, world_size, "eager", frozenset(available), hosts)
    return Candidate.of(decision.algorithm, dict(decision.params))


def single_rules(
    algorithms: Sequence[str], world_size: int, baseline: str, skip: Collection[str] = (), hosts: int = 1
) -> list[tuple[str, Table]]:
    """``always <algorithm>`` for each algorithm (default parameters at every size, the baseline as
    fallback), but those in ``skip`` (a published rule that already is one)."""
    out = []
    for name in algorithms:
        if name in skip:
            continue
        bands = () if name == baseline else (Band(None, (name,)),)
        plan = Plan(world_size, "eager", bands, baseline, hosts=hosts)
        out.append((f"always {name}", Table(Platform("cpu", "any"), Provenance("fixed"), (plan,))))
    return out


def regret_candidates(
    tables: Sequence[Table], sizes: Sequence[int], world_size: int, algorithms: Sequence[str], hosts: int = 1
) -> list[Candidate]:
    """Every algorithm with default parameters plus every table's choice at ``sizes``."""
    cands = [Candidate(a) for a in algorithms]
    for size in sizes:
        cands.extend(choice(t, size, world_size, algorithms, hosts) for t in tables)
    return list(dict.fromkeys(cands))


def regret_from(
    measurements: Sequence[Timed],
    rules: Sequence[tuple[str, Table]],
    world_size: int,
    algorithms: Sequence[str],
    baseline: str,
    banned: Collection[Candidate] = (),
    hosts: int = 1,
) -> RegretScore:
    """The regret of each ``(name, table)`` of ``rules`` from measurements of ``regret_candidates`` (pure);
    the tuned table first, the published rule second."""
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
        picks = [choice(t, size, world_size, algorithms, hosts) for _, t in rules]
        times = [at[c].time_us if c in at and usable(at[c]) and c not in banned else math.inf for c in picks]
        base = at.get(Candidate(baseline))
        points.append(
            RegretPoint(
                size,
                best.candidate,
                best.time_us,
                tuple(zip(picks, times, strict=True)),
                base.time_us if base is not None else math.nan,
            )
        )
    return RegretScore(tuple(points), tuple(name for name, _ in rules))
