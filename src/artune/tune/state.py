"""What the phases of one ``tune_world`` share: the tuner's named state.

One ``TuneState`` per world size holds the bench, the configuration and
budget, the algorithms, the evidence per size that picks are made from, the
banned candidates, the tuned parameters, and the plan derived so far with
its picks and crossovers. Every phase reads and extends it; ``derive``
turns it into a plan (rules in ``artune.tune.derive``) and holds every band
of it to the evidence at its own sizes (``artune.tune.bands``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from artune.measure.records import Candidate, Measurement
from artune.table.types import Plan, Platform, Provenance, Table
from artune.tune.bands import Ledger, Shaping, published_spans, shape
from artune.tune.compare import Comparison, Overall, Pooled, wrong
from artune.tune.config import Budget, TuneConfig
from artune.tune.derive import BandCrossover, Pick, bisect_crossover, changes, pick_all, plan_from
from artune.tune.measurer import CachedMeasurer
from artune.tune.regret import choice
from artune.tune.search import ParamSearch

#: a bisection step's budget assumes this many calls on average (an unsure step takes up to 3)
CALLS_PER_STEP = 1.5


def plan_table(plan: Plan) -> Table:
    """A one-plan table, for deciding with ``plan`` (not written anywhere)."""
    return Table(Platform("cpu", "any"), Provenance("measured"), (plan,))


def wrong_candidates(measurements: list[Measurement]) -> dict[Candidate, str]:
    """Every candidate that gave wrong numbers somewhere in ``measurements``, with where."""
    found: dict[Candidate, str] = {}
    for m in measurements:
        if wrong(m) and m.candidate not in found:
            found[m.candidate] = f"wrong results at {m.size_bytes} bytes (nwrong={m.nwrong}, {m.status})"
    return found


@dataclass
class TuneState:
    """The state one world size's phases pass along (mutable: each phase adds what it found)."""

    bench: CachedMeasurer
    config: TuneConfig
    budget: Budget
    names: tuple[str, ...]  # the algorithms, the baseline first
    fixed: list[tuple[str, Table]]  # the published rule, then every single-algorithm rule
    by_size: dict[int, list[Pooled]] = field(default_factory=dict)  # what picks are made from
    banned: dict[Candidate, str] = field(default_factory=dict)
    tuned: dict[str, Candidate] = field(default_factory=dict)  # per algorithm, its parameters found
    searches: list[ParamSearch] = field(default_factory=list)
    picks: list[Pick] = field(default_factory=list)
    crossovers: list[BandCrossover] = field(default_factory=list)
    plan: Plan | None = None
    shaping: Shaping | None = None  # what the bands' evidence rules did to the last plan derived
    unshaped: Plan | None = None  # the last plan derived, before the bands' evidence rules

    @property
    def mode(self) -> str:
        """The dispatch mode tuned."""
        return self.bench.mode

    @property
    def hosts(self) -> int:
        """The hosts the ranks span."""
        return self.bench.hosts

    def candidate(self, name: str) -> Candidate:
        """What the table runs for algorithm ``name``: its tuned parameters unless they are banned."""
        found = self.tuned.get(name, Candidate(name))
        return Candidate(name) if found in self.banned else found

    def ban_new(self) -> dict[Candidate, str]:
        """Ban every candidate that gave wrong numbers since the last call; the newly banned ones."""
        new = {c: why for c, why in wrong_candidates(self.bench.used()).items() if c not in self.banned}
        self.banned.update(new)
        return new

    def published(self, size: int) -> str:
        """The algorithm the published rule (``fixed[0]``) runs at ``size``: what an unsure pick keeps."""
        return choice(self.fixed[0][1], size, self.bench.world_size, self.names, self.hosts).algorithm

    def pick(self) -> list[Pick]:
        """The winners over ``by_size`` as things stand (``derive`` rule 2)."""
        return pick_all(self.by_size, self.config.rule, self.names, self.banned, self.published)

    def ledger(self) -> Ledger:
        """Everything measured so far, by size, for the bands' evidence (the plan's parameters compared first)."""
        prefer = {name: self.candidate(name) for name in self.names}
        return Ledger.of(self.bench.used(), self.config.rule, prefer, self.banned)

    def usable(self) -> list[str]:
        """The algorithms whose default parameters gave no wrong numbers."""
        return [name for name in self.names if Candidate(name) not in self.banned]

    def derive(self, allowance: float) -> Plan:
        """Picks, every crossover bisected (those bisected before come from the cache at no cost; the new
        ones share ``allowance``), and the plan from them, its bands held to their evidence (``bands``)."""
        bench, config = self.bench, self.config
        bench.phase("bisect")
        self.picks = self.pick()
        todo = changes(self.picks)
        # a crossover is known by its candidates, parameters included: the duel's repairs can change a
        # winner's parameters, and the new pair is bisected afresh, so it needs its share of the allowance
        known = {(c.below, c.above, c.coarse) for c in self.crossovers}
        new = [
            (a, b)
            for a, b in todo
            if (self.candidate(a.winner.algorithm), self.candidate(b.winner.algorithm), (a.size, b.size)) not in known
        ]
        steps_each = max(1, math.ceil(math.log2(math.log(config.factor) / math.log(config.resolution))))
        per_step = allowance / max(1.0, len(new) * steps_each * CALLS_PER_STEP)
        found = []
        for a, b in todo:
            below, above = self.candidate(a.winner.algorithm), self.candidate(b.winner.algorithm)
            found.append(
                bisect_crossover(
                    bench,
                    below,
                    above,
                    a.size,
                    b.size,
                    config.rule,
                    config.resolution,
                    per_step,
                    config.grain,
                    published=self.published,
                )
            )
        self.crossovers = found
        params = {name: self.candidate(name).params_dict for name in self.names}
        derived = plan_from(
            bench.world_size, self.picks, found, bench.baseline, params, mode=self.mode, hosts=self.hosts
        )
        self.unshaped = derived
        self.reshape()
        assert self.plan is not None
        return self.plan

    def reshape(self) -> bool:
        """The last plan derived held to the bands' evidence rules over everything measured so far (``derive``
        does this; the duel's calls since are evidence too, the held-out sizes' never: its check on them would
        no longer be held out); True when the plan changed."""
        if self.unshaped is None:
            return False
        bench, before = self.bench, self.plan
        published = published_spans(self.fixed[0][1], bench.world_size, self.names, self.hosts)
        self.plan, self.shaping = shape(self.unshaped, self.ledger(), published, self.usable(), self.config.min_size)
        return self.plan != before

    def weigh(self, theirs: Table, ours: Table, sizes: Sequence[int], name: str = "", against: str = "") -> Overall:
        """``theirs`` against ``ours`` over ``sizes`` from what was measured there (nothing new), by the tuner's
        one plan-against-plan comparison (``FasterRule.weigh``): what the duel and the held-out check ask."""
        rule, ws, hosts, names = self.config.rule, self.bench.world_size, self.hosts, self.names
        found: list[Comparison] = []
        alike = 0
        for size in sizes:
            a, b = choice(theirs, size, ws, names, hosts), choice(ours, size, ws, names, hosts)
            if a == b:
                alike += 1
                continue
            ea, eb = self.bench.get(a, size), self.bench.get(b, size)
            if ea is not None and eb is not None:
                found.append(rule.compare(ea, eb))
        return rule.weigh(found, alike, name, against)
