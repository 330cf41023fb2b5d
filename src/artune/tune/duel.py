"""The final duel: the derived table against every fixed rule at fresh sizes, and the repair where one wins.

After the plan is derived, the table's choice and every fixed rule's choice
(the published rule, ``always <algorithm>`` for each algorithm) are timed
together, interleaved, at off-grid sizes no phase measured (up to a quarter
of the largest size tuned). At every size
the evidence rule (``artune.tune.compare``) compares each rule's choice
with the table's: a rule *wins* a size where its choice is ``faster``.

A win is confirmed before anything changes: the size is measured again, in
a call at another moment (after every other size of the round), and the
verdict is taken across the calls (a machine with slow and quick states gets
a say from each state it was seen in). Then the table is **repaired**:

- where the winner is another algorithm, the size joins the evidence the
  picks are made from and the plan is derived again: the winner takes the
  size there and the new band's bounds are bisected like every crossover;
- where it is the table's own algorithm with its default parameters, the
  tuned parameters of that algorithm are dropped.

The first round always runs (with a floor of the budget when earlier
phases overran); the duel then runs again at new sizes, within its budget, and every earlier
duel size is checked against the new plan (its choice measured with the
rules' where it changed). When the budget is spent and a size still loses,
the winner is **pinned** there: a band of it from halfway to the nearest
measured size below to halfway to the nearest above. So the shipped table
never loses to a fixed rule at a size of its own duel.

Small losses add up where single ones do not count: a fixed rule a little
ahead at every size (each inside the tie band) is ahead. So the duel also
weighs each rule **over all its sizes**: the geometric mean of the evidence
rule's ratio of the rule's choice to the table's, one per duel size (1
where both choose alike), with its interval from the sizes' own (their log
half-widths added in quadrature). Where a rule leads the table by more than
``AGGREGATE_TIE`` over the whole interval, the rule's own plan ships
instead, with the pins it needs to lose no size to another rule; the report
says which and by how much. The held-out regret
(``artune.tune.regret``) then scores it at sizes neither the tuning nor the
duel touched.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum

from artune.grid import midpoint, off_grid_sizes
from artune.measure.records import Candidate
from artune.table.types import Band, Plan, Table
from artune.tune.compare import FASTER, Comparison, Pooled
from artune.tune.regret import choice
from artune.tune.state import TuneState, plan_table

#: rounds of fresh duel sizes at most (each after a repair)
DUEL_ROUNDS = 3
#: of a round's share, what its first call of every size gets (the rest: confirming wins, bisecting repairs)
FIRST_LOOK = 0.6
#: passes over the duel sizes pinning a winner, at most (a pin can change the choice at no other duel size,
#: but dropping a winner's tuned parameters can)
PIN_PASSES = 4
#: of the whole budget, what the duel's first round gets at least (earlier phases that overran do not skip it)
FIRST_ROUND_FLOOR = 0.08
#: the duel's sizes go up to the largest size tuned over this
TOP_SHARE = 4
#: seed offset of the duel's sizes, so they differ from the held-out regret's
DUEL_SEED = 7919
#: a fixed rule ahead of the table by more than this over all duel sizes (geometric mean) ships instead
AGGREGATE_TIE = 0.01


class Repair(str, Enum):
    """How the duel changed the table at a size a fixed rule won."""

    BAND = "band"  # the winner took the size, its bounds bisected
    PARAMS = "params"  # the algorithm's default parameters replaced its tuned ones
    PIN = "pin"  # the budget was spent: the winner pinned around the size

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Loss:
    """A size where a fixed rule's choice is faster than the table's."""

    size: int
    rule: str
    table: Candidate  # the table's choice
    winner: Candidate  # the rule's choice
    comparison: Comparison  # the winner against the table's choice, over every duel call at the size

    def describe(self) -> str:
        """One line for the report."""
        return f"{self.rule} ({self.winner.key}) beat the table's {self.table.key}: {self.comparison.describe()}"


@dataclass(frozen=True)
class Fix:
    """One repair: at ``size``, how, and a phrase of what changed."""

    size: int
    how: Repair
    what: str


@dataclass(frozen=True)
class DuelRound:
    """One round: its fresh sizes, the wins of fixed rules it confirmed, the repairs."""

    sizes: tuple[int, ...]
    losses: tuple[Loss, ...]
    fixes: tuple[Fix, ...]


@dataclass(frozen=True)
class Overall:
    """One fixed rule against the derived table over every duel size."""

    rule: str
    ratio: float  # geometric mean of the rule's choice's time over the table's (below 1: the rule is ahead)
    high: float  # the upper end of its interval (at the evidence rule's level)
    sizes: int  # the duel sizes where their choices differ and the evidence has an interval


@dataclass(frozen=True)
class Duel:
    """The duel's record: every round, and the shipped plan's standing over every duel size."""

    rounds: tuple[DuelRound, ...]
    sizes: tuple[int, ...]  # every duel size, sorted
    standing: tuple[Loss, ...]  # the shipped plan's losses over them (empty: it loses nowhere)
    spent_s: float
    overall: tuple[Overall, ...] = ()  # every fixed rule against the derived table, before any replacement
    shipped: str = ""  # the fixed rule whose plan shipped instead of the derived one ("": the derived plan)

    @property
    def holds(self) -> bool:
        """True when the shipped table loses to no fixed rule at any duel size."""
        return not self.standing

    @property
    def fixes(self) -> tuple[Fix, ...]:
        """Every repair, in order."""
        return tuple(f for r in self.rounds for f in r.fixes)


def _choices(state: TuneState, plan: Plan, size: int) -> tuple[Candidate, list[tuple[str, Candidate]]]:
    """The table's choice at ``size`` and each fixed rule's (name, choice)."""
    algorithms = state.names
    ws, hosts = state.bench.world_size, state.hosts
    mine = choice(plan_table(plan), size, ws, algorithms, hosts)
    return mine, [(name, choice(table, size, ws, algorithms, hosts)) for name, table in state.fixed]


def _evidence(state: TuneState, plan: Plan, size: int, budget_s: float) -> dict[Candidate, Pooled]:
    """The table's and the rules' choices at ``size``, with a call that timed them all (one more if none)."""
    mine, theirs = _choices(state, plan, size)
    cands = [c for c in dict.fromkeys([mine, *(c for _, c in theirs)]) if c not in state.banned]
    return {e.candidate: e for e in state.bench.together(cands, size, budget_s)}


def losses_at(state: TuneState, plan: Plan, size: int, budget_s: float) -> list[Loss]:
    """Every fixed rule whose choice is faster than ``plan``'s at ``size``, the largest lead first."""
    mine, theirs = _choices(state, plan, size)
    if mine in state.banned:
        return []
    got = _evidence(state, plan, size, budget_s)
    found = []
    for name, c in theirs:
        if c == mine or c not in got:
            continue
        comparison = state.config.rule.compare(got[c], got[mine])
        if comparison.verdict == FASTER:
            found.append(Loss(size, name, mine, c, comparison))
    return sorted(found, key=lambda loss: loss.comparison.ratio)


def _confirm(state: TuneState, plan: Plan, size: int, budget_s: float) -> list[Loss]:
    """A second call at ``size`` of the table's choice and every winner, then the losses across calls."""
    first = losses_at(state, plan, size, budget_s)
    if not first:
        return []
    pair = list(dict.fromkeys([first[0].table, *(loss.winner for loss in first)]))
    state.bench.more(pair, size, budget_s)
    return losses_at(state, plan, size, budget_s)


def _repair(state: TuneState, loss: Loss, budget_s: float) -> Fix:
    """Change the state so that the next derivation takes the winner at ``loss.size``."""
    name = loss.winner.algorithm
    if name == loss.table.algorithm:
        state.tuned.pop(name, None)
        return Fix(loss.size, Repair.PARAMS, f"{name} with its default parameters")
    defaults = [c for c in (Candidate(n) for n in state.names) if c not in state.banned]
    state.by_size[loss.size] = list(state.bench.together(defaults, loss.size, budget_s))
    return Fix(loss.size, Repair.BAND, f"{name} takes {loss.size} bytes (was {loss.table.algorithm})")


def pinned(plan: Plan, lo: int, hi: int, name: str) -> Plan:
    """``plan`` with every size in ``[lo, hi]`` given to ``name`` (adjacent equal bands merged)."""
    segments: list[tuple[int | None, tuple[str, ...]]] = [(b.upto, b.candidates) for b in plan.bands]
    if not segments or segments[-1][0] is not None:
        segments.append((None, (plan.fallback,)))
    out: list[Band] = []

    def add(upto: int | None, cands: tuple[str, ...]) -> None:
        if out and out[-1].candidates == cands:
            out[-1] = Band(upto, cands)
        else:
            out.append(Band(upto, cands))

    below = 0  # the segment covers (below, upto]
    placed = False
    for upto, cands in segments:
        top = math.inf if upto is None else upto
        if below < lo - 1:
            add(min(upto, lo - 1) if upto is not None else lo - 1, cands)
        if not placed and top >= lo:
            add(hi, (name,))
            placed = True
        if top > hi:
            add(upto, cands)
        below = upto if upto is not None else below
    while out and out[-1].candidates == (plan.fallback,):  # sizes above the last band go to the fallback
        out.pop()
    return replace(plan, bands=tuple(out))


def _pin_span(size: int, measured: Sequence[int], itemsize: int) -> tuple[int, int]:
    """From halfway to the nearest measured size below ``size`` to just below halfway to the nearest above."""
    ordered = sorted(set(measured) - {size})
    i = bisect.bisect_left(ordered, size)
    lo = size if i == 0 else max(ordered[i - 1] + 1, min(size, midpoint(ordered[i - 1], size, itemsize)))
    hi = size if i == len(ordered) else max(size, min(ordered[i] - 1, midpoint(size, ordered[i], itemsize) - 1))
    return lo, hi


def _pin(state: TuneState, plan: Plan, sizes: Sequence[int], budget_s: float) -> tuple[Plan, list[Fix]]:
    """Pin the winner at every duel size the plan still loses (see the module), until none loses."""
    fixes: list[Fix] = []
    measured = {m.size_bytes for m in state.bench.used()}
    for _ in range(PIN_PASSES):
        standing = [found[0] for s in sizes if (found := losses_at(state, plan, s, budget_s))]
        if not standing:
            break
        for loss in standing:
            name = loss.winner.algorithm
            if loss.winner.params == () and plan.params_for(name):
                state.tuned.pop(name, None)
                plan = replace(plan, params=tuple((n, v) for n, v in plan.params if n != name))
            lo, hi = _pin_span(loss.size, list(measured), state.config.itemsize)
            plan = pinned(plan, lo, hi, name)
            fixes.append(Fix(loss.size, Repair.PIN, f"{name} over {lo}-{hi} bytes (was {loss.table.key})"))
    return plan, fixes


def overall(state: TuneState, plan: Plan, sizes: Sequence[int]) -> list[Overall]:
    """Every fixed rule against ``plan`` over ``sizes``, from the duel's evidence (no new call). A size where
    the two choices differ counts only with an interval (too few rounds there tell nothing either way)."""
    rule = state.config.rule
    z = statistics.NormalDist().inv_cdf(1.0 - (1.0 - rule.level) / 2)
    names = [name for name, _ in state.fixed]
    logs: dict[str, list[float]] = {name: [] for name in names}
    variance = dict.fromkeys(names, 0.0)
    alike = dict.fromkeys(names, 0)
    for size in sizes:
        mine, theirs = _choices(state, plan, size)
        got = _evidence(state, plan, size, 0.0) if any(c != mine for _, c in theirs) else {}
        for name, c in theirs:
            if c == mine:
                alike[name] += 1
                continue
            found = rule.compare(got[c], got[mine]) if c in got and mine in got else None
            if found is None or not (found.low > 0 and found.high < math.inf):
                continue
            logs[name].append(math.log(found.ratio))
            variance[name] += ((math.log(found.high) - math.log(found.low)) / (2 * z)) ** 2
    out = []
    for name in names:
        n = max(1, alike[name] + len(logs[name]))  # sizes where both choose alike count as 1, known exactly
        mean = math.fsum(logs[name]) / n
        out.append(Overall(name, math.exp(mean), math.exp(mean + z * math.sqrt(variance[name]) / n), len(logs[name])))
    return out


def _replacement(state: TuneState, standing: Sequence[Overall]) -> tuple[str, Plan] | None:
    """The fixed rule ahead of the table by more than ``AGGREGATE_TIE`` over its whole interval (the most
    ahead) and its plan."""
    ahead = [o for o in standing if o.high < 1.0 / (1.0 + AGGREGATE_TIE)]
    tables = dict(state.fixed)
    for o in sorted(ahead, key=lambda o: o.ratio):
        plan = tables[o.rule].plan(state.bench.world_size, "eager", state.hosts)
        if plan is not None:
            return o.rule, replace(plan, mode=state.mode)
    return None


def _round_sizes(state: TuneState, round_: int) -> list[int]:
    """Fresh off-grid sizes up to a quarter of the largest size tuned: above, one call of every rule's choice
    costs more than the whole duel's share, and the last band's algorithm is measured at the largest size."""
    config = state.config
    measured = {m.size_bytes for m in state.bench.used()}
    top = max(config.min_size * 2, config.max_size // TOP_SHARE)
    return off_grid_sizes(
        config.min_size, top, config.duel_sizes, config.seed + DUEL_SEED * (round_ + 1), config.itemsize, measured
    )


def duel(state: TuneState) -> Duel:
    """Duel the state's plan against every fixed rule and repair it (see the module); ``state.plan`` is then
    the plan to ship."""
    bench = state.bench
    bench.phase("duel")
    began = bench.spent_s
    allowance = max(state.budget.allowance("duel", began), state.config.budget_s * FIRST_ROUND_FLOOR)
    rounds: list[DuelRound] = []
    sizes: list[int] = []
    assert state.plan is not None
    for r in range(DUEL_ROUNDS):
        left = allowance - (bench.spent_s - began)
        if left <= 0 and r:
            break
        fresh = _round_sizes(state, r)
        share = left / 2 if r == 0 else left / (DUEL_ROUNDS - r)  # the first round most: often the only one
        for s in fresh:
            _evidence(state, state.plan, s, share * FIRST_LOOK / len(fresh))
        sizes.extend(fresh)
        per_size = share * (1 - FIRST_LOOK) / 2 / max(1, len(sizes))
        confirmed = [found[0] for s in sorted(sizes) if (found := _confirm(state, state.plan, s, per_size))]
        fixes = [_repair(state, loss, per_size) for loss in confirmed]
        rounds.append(DuelRound(tuple(fresh), tuple(confirmed), tuple(fixes)))
        if not confirmed:
            break
        left = allowance - (bench.spent_s - began)
        state.derive(max(0.0, left) / (DUEL_ROUNDS - r) / 2)
        bench.phase("duel")
    weighed = overall(state, state.plan, sizes)
    instead = _replacement(state, weighed)
    plan = state.plan if instead is None else instead[1]
    if instead is not None:
        state.tuned.clear()  # a fixed rule runs its algorithms with their default parameters
    plan, pins = _pin(state, plan, sorted(sizes), max(0.0, allowance - (bench.spent_s - began)) / 8)
    if pins:
        rounds.append(DuelRound((), (), tuple(pins)))
    state.plan = plan
    standing = tuple(found[0] for s in sorted(sizes) if (found := losses_at(state, plan, s, 0.0)))
    shipped = "" if instead is None else instead[0]
    return Duel(tuple(rounds), tuple(sorted(sizes)), standing, bench.spent_s - began, tuple(weighed), shipped)


def fixed_tables(state: TuneState) -> list[Table]:
    """The fixed rules' tables, in order (for scoring)."""
    return [t for _, t in state.fixed]
