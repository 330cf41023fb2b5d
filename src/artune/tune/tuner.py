"""Tuning one world size: sweep, probes between coarse sizes, re-measuring unsure sizes, parameter search,
bisection, plan and regret.

``tune_world`` is collective when the bench is: every rank calls it with the
same configuration and a bench holding the same known measurements, and
every decision it takes depends only on measurements (identical on all
ranks, the harness guarantees it) and on budgets counted from them, so every
rank runs the same sequence of harness calls. See ``derive`` for the rules
and ``evidence`` for the one statistic they use.
"""

from __future__ import annotations

import itertools
import logging
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from artune.errors import ArtuneError
from artune.measure.records import Candidate, Measurement
from artune.table.model import Plan, Platform, Provenance, Table
from artune.tune.bench import WARMUP_SHARE, CachedBench
from artune.tune.config import Budget, TuneConfig
from artune.tune.derive import Crossover, Pick, bisect_crossover, changes, pick_all, plan_from
from artune.tune.evidence import TIE_VERDICT, UNSURE, Evidence, spread, usable, wrong
from artune.tune.grid import midpoint, off_grid_sizes
from artune.tune.regret import TUNED, Regret, regret_candidates, regret_from, single_rules
from artune.tune.search import ParamSearch, search_algorithm, search_sizes

log = logging.getLogger(__name__)

FIXED_RULE_NAME = "fixed 1 MiB rule (DeepSpeed)"
NCCL_RULE_NAME = "NCCL for every size"
_MAX_ROUNDS = 4
#: passes over the unsure coarse picks (each re-measures every one still unsure)
SETTLE_PASSES = 3
#: a bisection step's budget assumes this many calls on average (an unsure step takes up to 3)
CALLS_PER_STEP = 1.5


@dataclass(frozen=True)
class WorldResult:
    """Everything one world size's tuning found (picklable; rank 0 returns it)."""

    world_size: int
    dtype: str
    baseline: str
    algorithms: tuple[str, ...]
    config: TuneConfig
    plan: Plan
    picks: tuple[Pick, ...]
    crossovers: tuple[Crossover, ...]
    searches: tuple[ParamSearch, ...]
    regret: Regret
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

    @property
    def tag(self) -> str:
        """Names this result's files: ``ws8`` (eager), ``ws8-graph``."""
        return f"ws{self.world_size}" if self.mode == "eager" else f"ws{self.world_size}-{self.mode}"

    @property
    def noise_median(self) -> float:
        """The median spread ``(p80 - p20) / median`` of single calls' samples (reported, not decided on)."""
        spreads = [spread(m) for m in self.measurements if usable(m)]
        return statistics.median(spreads) if spreads else math.nan

    def pooled(self) -> list[Evidence]:
        """Every (candidate, size) measured, its calls pooled, in order of first measurement."""
        calls: dict[tuple[Candidate, int], list[Measurement]] = {}
        for m in self.measurements:
            calls.setdefault((m.candidate, m.size_bytes), []).append(m)
        return [Evidence(tuple(ms)) for ms in calls.values()]


def plan_table(plan: Plan) -> Table:
    """A one-plan table, for deciding with ``plan`` (not written anywhere)."""
    return Table(Platform("cpu", "any"), Provenance("measured"), (plan,))


def _wrong_candidates(measurements: list[Measurement]) -> dict[Candidate, str]:
    found: dict[Candidate, str] = {}
    for m in measurements:
        if wrong(m) and m.candidate not in found:
            found[m.candidate] = f"wrong results at {m.size_bytes} bytes (nwrong={m.nwrong}, {m.status})"
    return found


def _sweep(bench: CachedBench, config: TuneConfig, budget: Budget, names: tuple[str, ...]) -> dict[int, list[Evidence]]:
    """Every algorithm with default parameters at each coarse size (one interleaved call per size)."""
    bench.phase("sweep")
    sizes = config.sweep_sizes()
    per_size = budget.allowance("sweep", bench.spent_s) / len(sizes)
    defaults = [Candidate(n) for n in names]
    return {s: bench.measure(defaults, [s], per_size) for s in sizes}


def _probe(
    bench: CachedBench,
    config: TuneConfig,
    budget: Budget,
    names: tuple[str, ...],
    by_size: dict[int, list[Evidence]],
    banned: dict[Candidate, str],
) -> None:
    """Between two coarse sizes that the same algorithm won, measure it against its rivals there (the
    runner-up, or the fastest it was kept over, at either end) at their geometric midpoint: a band the
    coarse grid stepped over shows up as a change of winner, which is then bisected. ``by_size`` gains
    the midpoints."""
    bench.phase("probe")
    todo = []
    for a, b in itertools.pairwise(pick_all(by_size, config.rule, names, banned)):
        mid = midpoint(a.size, b.size, config.itemsize)
        if a.winner != b.winner or not a.size < mid < b.size or mid in by_size:
            continue
        rivals = [p.against.b for p in (a, b) if p.against is not None]
        cands = [c for c in dict.fromkeys([a.winner, *rivals]) if c not in banned]
        if len(cands) > 1:
            todo.append((mid, cands))
    if not todo:
        return
    per_probe = budget.allowance("probe", bench.spent_s) / len(todo)
    for mid, cands in todo:
        by_size[mid] = bench.together(cands, mid, per_probe)


def _seconds_to_decide(pick: Pick, at: list[Evidence]) -> float:
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


def _settle(
    bench: CachedBench,
    config: TuneConfig,
    budget: Budget,
    names: tuple[str, ...],
    by_size: dict[int, list[Evidence]],
    banned: dict[Candidate, str],
) -> None:
    """Measure again, the two candidates in one call, the close picks: first every tie or unsure pick seen
    in one call only (the machine may be in another state by now: ``evidence``, across calls), then, up to
    ``SETTLE_PASSES`` times, the picks still unsure (the fastest against the kept candidate), within the
    phase's allowance. An unsure pick gets the rounds it needs to decide if its ratio holds, at most an
    equal share of what is left; a tie (or a ratio on the edge of the band) an equal share of this pass.
    ``by_size`` is updated."""
    bench.phase("settle")
    allowance = budget.allowance("settle", bench.spent_s)
    began = bench.spent_s
    for done in range(SETTLE_PASSES):
        todo = []
        for p in pick_all(by_size, config.rule, names, banned):
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


def _search(
    bench: CachedBench, config: TuneConfig, budget: Budget, names: tuple[str, ...], picks: list[Pick]
) -> tuple[dict[str, Candidate], list[ParamSearch]]:
    """The tunables of every algorithm that won a coarse size (see ``search``)."""
    bench.phase("params")
    jobs = []
    for name in names:
        tunables = bench.tunables(name)
        if tunables and any(p.winner.algorithm == name for p in picks):
            jobs.append((name, tunables, search_sizes(name, picks, config.itemsize)))
    allowance = budget.allowance("params", bench.spent_s)
    tuned: dict[str, Candidate] = {}
    searches: list[ParamSearch] = []
    for name, tunables, where in jobs:
        best, found = search_algorithm(bench, name, tunables, where, config.rule, allowance / len(jobs))
        tuned[name] = best
        searches.extend(found)
    return tuned, searches


def _crossovers(
    bench: CachedBench,
    config: TuneConfig,
    picks: list[Pick],
    candidate: Callable[[str], Candidate],
    allowance: float,
) -> list[Crossover]:
    """Bisect every change of winner between two coarse sizes (see ``derive``)."""
    bench.phase("bisect")
    todo = changes(picks)
    steps_each = max(1, math.ceil(math.log2(math.log(config.factor) / math.log(config.resolution))))
    per_step = allowance / max(1.0, len(todo) * steps_each * CALLS_PER_STEP)
    found = []
    for a, b in todo:
        below, above = candidate(a.winner.algorithm), candidate(b.winner.algorithm)
        found.append(
            bisect_crossover(
                bench, below, above, a.size, b.size, config.rule, config.resolution, per_step, config.itemsize
            )
        )
    return found


def _fixed_rule(baseline: str) -> tuple[Table, str]:
    """The published rule to compare with: DeepSpeed's 1 MiB switch on CPU, NCCL for every size on CUDA."""
    from artune.table.bundled import cpu_default
    from artune.table.family import conservative_default

    if baseline == "nccl":
        return conservative_default(Platform("cuda", "any")), NCCL_RULE_NAME
    return cpu_default(), FIXED_RULE_NAME


def tune_world(
    bench: CachedBench, config: TuneConfig, fixed: Table | None = None, fixed_name: str | None = None
) -> WorldResult:
    """Tune one world size in the bench's mode (``bench.mode``, default eager; collective: call it on every rank).

    Phases: the coarse sweep, a probe between every two coarse sizes won by
    the same algorithm, the unsure picks measured again, the tunables of the
    winners, the crossovers, the plan, the regret against
    ``fixed`` (default: the bundled CPU rule, DeepSpeed's 1 MiB switch; NCCL
    for every size when the baseline is NCCL) and against every fixed
    single-algorithm rule. When a candidate turns out to give wrong numbers
    in a later phase, the plan is derived again without it (the measurements
    already taken are reused).
    """
    started = time.monotonic()
    default_fixed, default_name = _fixed_rule(bench.baseline)
    fixed = fixed if fixed is not None else default_fixed
    fixed_name = fixed_name or (default_name if fixed is default_fixed else "fixed rule")
    mode = str(getattr(bench, "mode", "eager"))
    names = bench.algorithms
    if bench.baseline not in names:
        names = (bench.baseline, *names)
    budget = Budget(config.budget_s, config.phases)
    hosts = getattr(bench, "hosts", 1)

    by_size = _sweep(bench, config, budget, names)
    banned = _wrong_candidates(bench.used())
    _probe(bench, config, budget, names, by_size, banned)
    banned = _wrong_candidates(bench.used())
    _settle(bench, config, budget, names, by_size, banned)
    picks = pick_all(by_size, config.rule, names, banned)
    if not picks:
        raise ArtuneError(f"tune_world(): no algorithm ran correctly at any size ({', '.join(names)})")
    tuned, searches = _search(bench, config, budget, names, picks)
    banned = {**banned, **_wrong_candidates(bench.used())}

    bisect_allowance = budget.allowance("bisect", bench.spent_s)
    regret_allowance: float | None = None
    regret_sizes: list[int] = []
    skip = {bench.baseline} if fixed_name == NCCL_RULE_NAME else set()
    singles = single_rules(names, bench.world_size, bench.baseline, skip, hosts)
    for _round in range(_MAX_ROUNDS):
        picks = pick_all(by_size, config.rule, names, banned)

        def candidate(name: str, banned: dict[Candidate, str] = banned) -> Candidate:
            found = tuned.get(name, Candidate(name))
            return Candidate(name) if found in banned else found

        crossovers = _crossovers(bench, config, picks, candidate, bisect_allowance)
        params = {name: candidate(name).params_dict for name in names}
        plan = plan_from(bench.world_size, picks, crossovers, bench.baseline, params, mode=mode, hosts=hosts)

        bench.phase("regret")
        if regret_allowance is None:
            regret_allowance = budget.allowance("regret", bench.spent_s)
            measured_sizes = {m.size_bytes for m in bench.used()}
            regret_sizes = off_grid_sizes(
                config.min_size, config.max_size, config.regret_sizes, config.seed, config.itemsize, measured_sizes
            )
        rules = [(TUNED, plan_table(plan)), (fixed_name, fixed), *singles]
        cands = regret_candidates([t for _, t in rules], regret_sizes, bench.world_size, names, hosts)
        got = bench.measure(cands, regret_sizes, regret_allowance)
        regret = regret_from(got, rules, bench.world_size, names, bench.baseline, banned, hosts)

        new = {c: why for c, why in _wrong_candidates(bench.used()).items() if c not in banned}
        if not new:
            break
        for bad, why in new.items():
            log.warning("never choosing %s: %s", bad.key, why)
        banned = {**banned, **new}
    return WorldResult(
        world_size=bench.world_size,
        dtype=bench.dtype,
        baseline=bench.baseline,
        algorithms=tuple(names),
        config=config,
        plan=plan,
        picks=tuple(picks),
        crossovers=tuple(crossovers),
        searches=tuple(searches),
        regret=regret,
        banned=tuple((c.key, why) for c, why in banned.items()),
        measurements=tuple(bench.used()),
        measured=bench.measured,
        reused=bench.reused,
        calls=bench.calls,
        spent_s=bench.spent_s,
        wall_s=time.monotonic() - started,
        mode=mode,
        fixed_rule=fixed_name,
        remeasured=bench.remeasured,
        phase_s=tuple(bench.spent_by_phase.items()),
    )
