"""Tuning one world size: sweep, probes between coarse sizes, re-measuring unsure sizes, parameter search,
bisection, plan (its bands held to their evidence), the duel that repairs it, the held-out regret, and the
choice of what ships.

``tune_world`` is collective when the bench is: every rank calls it with the
same configuration and a bench holding the same known measurements, and
every decision it takes depends only on measurements (identical on all
ranks, the harness guarantees it) and on budgets counted from them, so every
rank runs the same sequence of harness calls. The same property makes a run
replayable from its log and journal (``artune.tune.replay``). See ``derive``
and ``bands`` for the rules, ``compare`` for the two comparisons they use (one
candidate against another at a size, one plan against another over sizes),
and ``duel`` and ``shipping`` for the last checks before a table ships.
"""

from __future__ import annotations

import itertools
import logging
import math
import statistics
import time
from dataclasses import dataclass, field

from artune.errors import ArtuneError
from artune.grid import midpoint, off_grid_sizes
from artune.measure.records import Candidate, Measurement
from artune.table.types import Plan, Platform, Table
from artune.tune.bands import Shaping, rule_plan
from artune.tune.compare import TIE_VERDICT, UNSURE, Pooled, spread, usable
from artune.tune.config import Budget, TuneConfig
from artune.tune.derive import BandCrossover, Pick
from artune.tune.duel import Duel, duel
from artune.tune.machine_states import MachineStates, states_of
from artune.tune.measurer import WARMUP_SHARE, CachedMeasurer
from artune.tune.regret import TUNED, RegretScore, regret_candidates, regret_from, single_rules
from artune.tune.search import ParamSearch, search_algorithm, search_sizes
from artune.tune.shipping import DUEL, HELD_OUT, Shipping, Weigh, choose
from artune.tune.state import TuneState, plan_table

log = logging.getLogger(__name__)

FIXED_RULE_NAME = "fixed 1 MiB rule (DeepSpeed)"
NCCL_RULE_NAME = "NCCL for every size"
#: derivations at most when later phases find candidates with wrong numbers (each bans them and derives again)
_MAX_ROUNDS = 4
#: passes over the unsure coarse picks (each re-measures every one still unsure)
SETTLE_PASSES = 3


@dataclass(frozen=True)
class WorldResult:
    """Everything one world size's tuning found (picklable; rank 0 returns it)."""

    world_size: int
    dtype: str
    baseline: str
    algorithms: tuple[str, ...]
    config: TuneConfig
    plan: Plan  # the plan that ships: the derived one, or the fixed rule the run's checks chose
    picks: tuple[Pick, ...]
    crossovers: tuple[BandCrossover, ...]
    searches: tuple[ParamSearch, ...]
    regret: RegretScore
    banned: tuple[tuple[str, str], ...]  # (candidate key, why)
    measurements: tuple[Measurement, ...]
    measured: int
    reused: int
    calls: int
    spent_s: float
    wall_s: float
    mode: str = "eager"
    fixed_rule: str = FIXED_RULE_NAME
    remeasured: int = 0  # calls taken again where a decision was unsure
    phase_s: tuple[tuple[str, float], ...] = ()  # budget seconds spent per phase
    duel: Duel | None = None  # the final duel against the fixed rules, and its repairs
    states: MachineStates | None = field(default=None, compare=False)  # where calls at different moments disagreed
    derived: Plan | None = None  # the plan derived and held to its evidence, whether or not it ships
    shaping: Shaping | None = None  # the derived plan's bands with their evidence, merges and near-ties
    shipping: Shipping | None = None  # what ships and why

    @property
    def vouched(self) -> bool:
        """True when no check of the run puts another plan ahead of the one that ships."""
        return self.shipping is None or self.shipping.vouched

    @property
    def tag(self) -> str:
        """Names this result's files: ``ws8`` (eager), ``ws8-graph``."""
        return f"ws{self.world_size}" if self.mode == "eager" else f"ws{self.world_size}-{self.mode}"

    @property
    def noise_median(self) -> float:
        """The median spread ``(p80 - p20) / median`` of single calls' samples (reported, not decided on)."""
        spreads = [spread(m) for m in self.measurements if usable(m)]
        return statistics.median(spreads) if spreads else math.nan

    def pooled(self) -> list[Pooled]:
        """Every (candidate, size) measured, its calls pooled, in order of first measurement."""
        calls: dict[tuple[Candidate, int], list[Measurement]] = {}
        for m in self.measurements:
            calls.setdefault((m.candidate, m.size_bytes), []).append(m)
        return [Pooled(tuple(ms)) for ms in calls.values()]


def _sweep(state: TuneState) -> None:
    """Every algorithm with default parameters at each coarse size (one interleaved call per size)."""
    bench = state.bench
    bench.phase("sweep")
    sizes = state.config.sweep_sizes()
    per_size = state.budget.allowance("sweep", bench.spent_s) / len(sizes)
    defaults = [Candidate(n) for n in state.names]
    state.by_size.update({s: bench.measure(defaults, [s], per_size) for s in sizes})


def _probe(state: TuneState) -> None:
    """Between two coarse sizes that the same algorithm won, measure it against its rivals there (the
    runner-up, or the fastest it was kept over, at either end) at their geometric midpoint: a band the
    coarse grid stepped over shows up as a change of winner, which is then bisected. ``by_size`` gains
    the midpoints."""
    bench, config, by_size, banned = state.bench, state.config, state.by_size, state.banned
    bench.phase("probe")
    todo = []
    for a, b in itertools.pairwise(state.pick()):
        mid = midpoint(a.size, b.size, config.grain)
        if a.winner != b.winner or not a.size < mid < b.size or mid in by_size:
            continue
        rivals = [p.against.b for p in (a, b) if p.against is not None]
        cands = [c for c in dict.fromkeys([a.winner, *rivals]) if c not in banned]
        if len(cands) > 1:
            todo.append((mid, cands))
    if not todo:
        return
    per_probe = state.budget.allowance("probe", bench.spent_s) / len(todo)
    for mid, cands in todo:
        by_size[mid] = bench.together(cands, mid, per_probe)


def _seconds_to_decide(pick: Pick, at: list[Pooled]) -> float:
    """Measuring seconds for the rounds an unsure pick still needs (``Comparison.rounds_to_decide``, with a
    quarter more for luck): each round is a turn of the two candidates, plus their untimed settle call."""
    c = pick.against
    if c is None:
        return math.inf
    rounds = c.rounds_to_decide() * 1.25 - c.rounds
    times = {e.candidate: e for e in at}
    pair = [times[c.a], times[c.b]]
    burst = pair[0].calls[0].burst
    per_round_us = sum(e.time_us for e in pair) * (burst + 1)
    return max(0.0, rounds) * per_round_us * 1e-6 * (1.0 + WARMUP_SHARE)


def _second_look(pick: Pick) -> list[Candidate] | None:
    """The pair to measure again at another moment when ``pick`` is a close call (a tie or unsure against
    its rival) seen in one harness call only, else ``None``."""
    c = pick.against
    if c is None or c.verdict not in (TIE_VERDICT, UNSURE) or c.calls:
        return None
    return [pick.winner, c.b]


def _settle(state: TuneState) -> None:
    """Measure again, the two candidates in one call, the close picks: first every tie or unsure pick seen
    in one call only (the machine may be in another state by now: ``compare``, across calls), then, up to
    ``SETTLE_PASSES`` times, the picks still unsure (the fastest against the kept candidate), within the
    phase's allowance. An unsure pick gets the rounds it needs to decide if its ratio holds, at most an
    equal share of what is left; a tie (or a ratio on the edge of the band) an equal share of this pass.
    ``by_size`` is updated."""
    bench, by_size = state.bench, state.by_size
    bench.phase("settle")
    allowance = state.budget.allowance("settle", bench.spent_s)
    began = bench.spent_s
    for done in range(SETTLE_PASSES):
        todo = []
        for p in state.pick():
            pair = list(p.unsure) if p.unsure is not None else (_second_look(p) if done == 0 else None)
            if pair:
                todo.append((p, pair))
        left = allowance - (bench.spent_s - began)
        if not todo or left <= 0:
            break
        cap = left / len(todo)
        for p, pair in todo:
            want = _seconds_to_decide(p, by_size[p.size]) if p.unsure is not None else math.inf
            share = min(cap, want) if math.isfinite(want) else cap / (SETTLE_PASSES - done)
            fresh = {e.candidate: e for e in bench.more(pair, p.size, share)}
            by_size[p.size] = [fresh.get(e.candidate, e) for e in by_size[p.size]]


def _search(state: TuneState) -> None:
    """The tunables of every algorithm that won a coarse size (see ``search``)."""
    bench, config = state.bench, state.config
    bench.phase("params")
    picks = state.pick()
    jobs = []
    for name in state.names:
        tunables = bench.tunables(name)
        if tunables and any(p.winner.algorithm == name for p in picks):
            jobs.append((name, tunables, search_sizes(name, picks, config.grain)))
    allowance = state.budget.allowance("params", bench.spent_s)
    for name, tunables, where in jobs:
        best, found = search_algorithm(bench, name, tunables, where, config.rule, allowance / len(jobs))
        state.tuned[name] = best
        state.searches.extend(found)


def _fixed_rule(baseline: str) -> tuple[Table, str]:
    """The published rule to compare with: DeepSpeed's 1 MiB switch on CPU, NCCL for every size on CUDA."""
    from artune.table.bundled import cpu_default
    from artune.table.family import conservative_default

    if baseline == "nccl":
        return conservative_default(Platform("cuda", "any")), NCCL_RULE_NAME
    return cpu_default(), FIXED_RULE_NAME


def _start(bench: CachedMeasurer, config: TuneConfig, fixed: Table | None, fixed_name: str | None) -> TuneState:
    """The state before the first phase: the algorithms (the baseline first) and the fixed rules to beat."""
    default_fixed, default_name = _fixed_rule(bench.baseline)
    fixed = fixed if fixed is not None else default_fixed
    fixed_name = fixed_name or (default_name if fixed is default_fixed else "fixed rule")
    names = bench.algorithms
    if bench.baseline not in names:
        names = (bench.baseline, *names)
    skip = {bench.baseline} if fixed_name == NCCL_RULE_NAME else set()
    singles = single_rules(names, bench.world_size, bench.baseline, skip, bench.hosts)
    return TuneState(bench, config, Budget(config.budget_s, config.phases), names, [(fixed_name, fixed), *singles])


def _held_out(state: TuneState, sizes: list[int], allowance: float) -> RegretScore:
    """The regret of the shipped plan and of every fixed rule at ``sizes`` (no other phase measured them)."""
    bench = state.bench
    bench.phase("regret")
    assert state.plan is not None
    rules = [(TUNED, plan_table(state.plan)), *state.fixed]
    cands = regret_candidates([t for _, t in rules], sizes, bench.world_size, state.names, state.hosts)
    got = bench.measure(cands, sizes, allowance)
    return regret_from(got, rules, bench.world_size, state.names, bench.baseline, state.banned, state.hosts)


def _explore(state: TuneState) -> None:
    """The phases before the plan: sweep, probes, the unsure picks again, the tunables."""
    _sweep(state)
    state.ban_new()
    _probe(state)
    state.ban_new()
    _settle(state)
    if not state.pick():
        raise ArtuneError(f"tune_world(): no algorithm ran correctly at any size ({', '.join(state.names)})")
    _search(state)
    state.ban_new()


def tune_world(
    bench: CachedMeasurer, config: TuneConfig, fixed: Table | None = None, fixed_name: str | None = None
) -> WorldResult:
    """Tune one world size in the bench's mode (collective: call it on every rank).

    Phases: the coarse sweep, a probe between every two coarse sizes won by
    the same algorithm, the unsure picks measured again, the tunables of the
    winners, the crossovers and the plan, the duel against every fixed rule
    with its repairs (``artune.tune.duel``), and the held-out regret against
    ``fixed`` (default: the bundled CPU rule, DeepSpeed's 1 MiB switch; NCCL
    for every size when the baseline is NCCL) and every fixed
    single-algorithm rule. When a candidate turns out to give wrong numbers
    in a later phase, the plan is derived again without it (the measurements
    already taken are reused).
    """
    started = time.monotonic()
    state = _start(bench, config, fixed, fixed_name)
    _explore(state)
    bisect_allowance = state.budget.allowance("bisect", bench.spent_s)
    held_out: tuple[list[int], float] | None = None
    for _round in range(_MAX_ROUNDS):
        state.derive(bisect_allowance)
        record = duel(state)
        if held_out is None:  # sizes no phase touched, drawn once
            measured = {m.size_bytes for m in bench.used()}
            allowance = state.budget.allowance("regret", bench.spent_s)
            sizes = off_grid_sizes(
                config.min_size, config.max_size, config.regret_sizes, config.seed, config.grain, measured
            )
            held_out = (sizes, allowance)
        regret = _held_out(state, *held_out)
        new = state.ban_new()
        if not new:
            break
        for bad, why in new.items():
            log.warning("never choosing %s: %s", bad.key, why)
    return _result(state, regret, record, _ship(state, regret, record), time.monotonic() - started)


def _ship(state: TuneState, regret: RegretScore, record: Duel) -> Shipping:
    """What ships (``artune.tune.shipping``): the derived plan, or the fixed rule its checks put ahead."""
    assert state.plan is not None
    bench = state.bench
    tables = {TUNED: plan_table(state.plan), **dict(state.fixed)}
    plans = {TUNED: state.plan}
    usable = set(state.usable())
    for name, table in state.fixed:
        plan = rule_plan(table, bench.world_size, state.mode, state.names, bench.baseline, state.hosts)
        if {b.candidates[0] for b in plan.bands} | {plan.fallback} <= usable:  # a rule that runs wrong numbers: never
            plans[name] = plan

    held_out = sorted(p.size for p in regret.points)

    def over(sizes: list[int]) -> Weigh:
        return lambda a, b: state.weigh(tables[a], tables[b], sizes, a, b)

    return choose(TUNED, plans, regret, {HELD_OUT: over(held_out), DUEL: over(list(record.sizes))})


def _result(state: TuneState, regret: RegretScore, record: Duel, shipping: Shipping, wall_s: float) -> WorldResult:
    bench = state.bench
    assert state.plan is not None
    return WorldResult(
        world_size=bench.world_size,
        dtype=bench.dtype,
        baseline=bench.baseline,
        algorithms=tuple(state.names),
        config=state.config,
        plan=shipping.plan,
        picks=tuple(state.picks),
        crossovers=tuple(state.crossovers),
        searches=tuple(state.searches),
        regret=regret,
        banned=tuple((c.key, why) for c, why in state.banned.items()),
        measurements=tuple(bench.used()),
        measured=bench.measured,
        reused=bench.reused,
        calls=bench.calls,
        spent_s=bench.spent_s,
        wall_s=wall_s,
        mode=state.mode,
        fixed_rule=state.fixed[0][0],
        remeasured=bench.remeasured,
        phase_s=tuple(bench.spent_by_phase.items()),
        duel=record,
        states=states_of(bench.used(), state.config.rule),
        derived=state.plan,
        shaping=state.shaping,
        shipping=shipping,
    )
