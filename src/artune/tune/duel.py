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
  size there, the new band's bounds are bisected like every crossover, and
  the band then stands only if the evidence at its own sizes holds it up
  (``artune.tune.bands``: one size is not a band);
- where it is the table's own algorithm with its default parameters, the
  tuned parameters of that algorithm are dropped.

The first round always runs (with a floor of the budget when earlier
phases overran); the duel then runs again at new sizes, within its budget,
and every earlier duel size is checked against the new plan (its choice
measured with the rules' where it changed). A size that joined the evidence
is not repaired twice: the bands decide it. What a rule still wins at a
single size is recorded as such (``Duel.standing``); the table is not cut
into a band around one size.

Small losses add up where single ones do not count, and single ones may be
a passing state of the machine: so each rule is also weighed against the
table **over all the duel's sizes** (``overall``, by the tuner's one
plan-against-plan comparison, ``FasterRule.weigh`` in ``artune.tune.compare``).
That weighing, with the same one over the held-out regret's sizes
(``artune.tune.regret``), is what decides whether the derived table ships or
a fixed rule does (``artune.tune.shipping``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from artune.grid import off_grid_sizes
from artune.measure.records import Candidate
from artune.table.types import Plan
from artune.tune.compare import FASTER, Comparison, Overall, Pooled
from artune.tune.regret import choice
from artune.tune.state import TuneState, plan_table

#: rounds of fresh duel sizes at most (each after a repair)
DUEL_ROUNDS = 3
#: of a round's share, what its first call of every size gets (the rest: confirming wins, bisecting repairs)
FIRST_LOOK = 0.6
#: of the whole budget, what the duel's first round gets at least (earlier phases that overran do not skip it)
FIRST_ROUND_FLOOR = 0.08
#: the duel's sizes go up to the largest size tuned over this
TOP_SHARE = 4
#: seed offset of the duel's sizes, so they differ from the held-out regret's
DUEL_SEED = 7919


class Repair(str, Enum):
    """How the duel changed the table at a size a fixed rule won."""

    BAND = "band"  # the size joined the evidence: the winner takes it where the bands hold it up
    PARAMS = "params"  # the algorithm's default parameters replaced its tuned ones

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
class Duel:
    """The duel's record: every round, and the derived plan's standing over every duel size."""

    rounds: tuple[DuelRound, ...]
    sizes: tuple[int, ...]  # every duel size, sorted
    standing: tuple[Loss, ...]  # single sizes a fixed rule still wins, where no band of the winner stands
    spent_s: float
    overall: tuple[Overall, ...] = ()  # every fixed rule against the derived table over all the duel's sizes

    @property
    def holds(self) -> bool:
        """True when the derived table loses to no fixed rule at any duel size."""
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
    """Change the state so that the next derivation takes the winner at ``loss.size`` where the bands hold."""
    name = loss.winner.algorithm
    if name == loss.table.algorithm:
        state.tuned.pop(name, None)
        return Fix(loss.size, Repair.PARAMS, f"{name} with its default parameters")
    defaults = [c for c in (Candidate(n) for n in state.names) if c not in state.banned]
    state.by_size[loss.size] = list(state.bench.together(defaults, loss.size, budget_s))
    return Fix(loss.size, Repair.BAND, f"{name} takes {loss.size} bytes (was {loss.table.algorithm})")


def overall(state: TuneState, plan: Plan, sizes: Sequence[int]) -> list[Overall]:
    """Every fixed rule against ``plan`` over ``sizes`` (``TuneState.weigh``)."""
    ours = plan_table(plan)
    for size in sizes:  # every choice of the plan timed with the rules' (the plan may have changed since)
        _evidence(state, plan, size, 0.0)
    return [state.weigh(table, ours, sizes, name) for name, table in state.fixed]


def _round_sizes(state: TuneState, round_: int) -> list[int]:
    """Fresh off-grid sizes up to a quarter of the largest size tuned: above, one call of every rule's choice
    costs more than the whole duel's share, and the last band's algorithm is measured at the largest size."""
    config = state.config
    measured = {m.size_bytes for m in state.bench.used()}
    top = max(config.min_size * 2, config.max_size // TOP_SHARE)
    return off_grid_sizes(
        config.min_size, top, config.duel_sizes, config.seed + DUEL_SEED * (round_ + 1), config.grain, measured
    )


def duel(state: TuneState) -> Duel:
    """Duel the state's plan against every fixed rule and repair it (see the module); ``state.plan`` is then
    the derived plan that the run's checks weigh."""
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
        open_sizes = [s for s in sorted(sizes) if s not in state.by_size]  # a size in the evidence: the bands decide
        per_size = share * (1 - FIRST_LOOK) / 2 / max(1, len(open_sizes))
        confirmed = [found[0] for s in open_sizes if (found := _confirm(state, state.plan, s, per_size))]
        fixes = [_repair(state, loss, per_size) for loss in confirmed]
        rounds.append(DuelRound(tuple(fresh), tuple(confirmed), tuple(fixes)))
        if not confirmed:
            break
        left = allowance - (bench.spent_s - began)
        state.derive(max(0.0, left) / (DUEL_ROUNDS - r) / 2)
        bench.phase("duel")
    state.reshape()  # the last round's calls are evidence for the bands too (the held-out sizes stay out)
    assert state.plan is not None
    weighed = overall(state, state.plan, sizes)
    standing = tuple(found[0] for s in sorted(sizes) if (found := losses_at(state, state.plan, s, 0.0)))
    return Duel(tuple(rounds), tuple(sorted(sizes)), standing, bench.spent_s - began, tuple(weighed))
