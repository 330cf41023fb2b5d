"""Tuning one world size: sweep, parameter search, bisection, plan and regret.

``tune_world`` is collective when the bench is: every rank calls it with the
same configuration and a bench holding the same known measurements, and
every decision it takes depends only on measurements (identical on all
ranks, the harness guarantees it) and on budgets counted from them, so every rank runs
the same sequence of harness calls. See ``derive`` for the rules.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from artune.errors import ArtuneError
from artune.measure.records import Candidate, Measurement
from artune.table.model import Plan, Platform, Provenance, Table
from artune.tune.bench import CachedBench
from artune.tune.config import Budget, TuneConfig
from artune.tune.derive import Crossover, Pick, bisect_crossover, changes, pick_all, plan_from
from artune.tune.grid import off_grid_sizes
from artune.tune.noise import spread, usable, wrong
from artune.tune.regret import Regret, regret_candidates, regret_from
from artune.tune.search import ParamSearch, search_algorithm, search_sizes

log = logging.getLogger(__name__)

FIXED_RULE_NAME = "fixed 1 MiB rule (DeepSpeed)"
NCCL_RULE_NAME = "NCCL for every size"
_MAX_ROUNDS = 4


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

    @property
    def tag(self) -> str:
        """Names this result's files: ``ws8`` (eager), ``ws8-graph``."""
        return f"ws{self.world_size}" if self.mode == "eager" else f"ws{self.world_size}-{self.mode}"

    @property
    def noise_median(self) -> float:
        """The median spread ``(p80 - p20) / median`` of the usable measurements."""
        spreads = [spread(m) for m in self.measurements if usable(m)]
        return statistics.median(spreads) if spreads else math.nan


def plan_table(plan: Plan) -> Table:
    """A one-plan table, for deciding with ``plan`` (not written anywhere)."""
    return Table(Platform("cpu", "any"), Provenance("measured"), (plan,))


def _wrong_candidates(measurements: list[Measurement]) -> dict[Candidate, str]:
    found: dict[Candidate, str] = {}
    for m in measurements:
        if wrong(m) and m.candidate not in found:
            found[m.candidate] = f"wrong results at {m.size_bytes} bytes (nwrong={m.nwrong}, {m.status})"
    return found


def _sweep(
    bench: CachedBench, config: TuneConfig, budget: Budget, names: tuple[str, ...]
) -> dict[int, list[Measurement]]:
    """Every algorithm with default parameters at each coarse size (one interleaved call per size)."""
    bench.progress.phase("coarse sweep")
    sizes = config.sweep_sizes()
    per_size = budget.allowance("sweep", bench.spent_s) / len(sizes)
    defaults = [Candidate(n) for n in names]
    return {s: bench.measure(defaults, [s], per_size) for s in sizes}


def _search(
    bench: CachedBench, config: TuneConfig, budget: Budget, names: tuple[str, ...], picks: list[Pick]
) -> tuple[dict[str, Candidate], list[ParamSearch]]:
    """The tunables of every algorithm that won a coarse size (see ``search``)."""
    bench.progress.phase("parameters")
    jobs = []
    for name in names:
        tunables = bench.tunables(name)
        if tunables and any(p.winner.algorithm == name for p in picks):
            jobs.append((name, tunables, search_sizes(name, picks, config.itemsize)))
    allowance = budget.allowance("params", bench.spent_s)
    tuned: dict[str, Candidate] = {}
    searches: list[ParamSearch] = []
    for name, tunables, where in jobs:
        best, found = search_algorithm(bench.measure, name, tunables, where, config.noise, allowance / len(jobs))
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
    bench.progress.phase("crossovers")
    todo = changes(picks)
    steps_each = max(1, math.ceil(math.log2(math.log(config.factor) / math.log(config.resolution))))
    per_step = allowance / max(1, len(todo) * steps_each)
    found = []
    for a, b in todo:
        below, above = candidate(a.winner.algorithm), candidate(b.winner.algorithm)
        hi_below, hi_above = bench.get(below, b.size), bench.get(above, b.size)
        at_hi = (hi_below, hi_above) if hi_below is not None and hi_above is not None else None
        found.append(
            bisect_crossover(
                bench.measure, below, above, a.size, b.size, config.noise, config.resolution,
                per_step, config.itemsize, at_hi,
            )
        )  # fmt: skip
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

    Phases: the coarse sweep, the tunables of the winners, the crossovers,
    the plan, the regret against ``fixed`` (default: the bundled CPU rule,
    DeepSpeed's 1 MiB switch; NCCL for every size when the baseline is
    NCCL). When a candidate turns out to give wrong
    numbers in a later phase, the plan is derived again without it (the
    measurements already taken are reused).
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

    by_size = _sweep(bench, config, budget, names)
    banned = _wrong_candidates(bench.used())
    picks = pick_all(by_size, config.noise, names, banned)
    if not picks:
        raise ArtuneError(f"tune_world(): no algorithm ran correctly at any size ({', '.join(names)})")
    tuned, searches = _search(bench, config, budget, names, picks)
    banned = {**banned, **_wrong_candidates(bench.used())}

    bisect_allowance = budget.allowance("bisect", bench.spent_s)
    regret_allowance: float | None = None
    regret_sizes: list[int] = []
    for _round in range(_MAX_ROUNDS):
        picks = pick_all(by_size, config.noise, names, banned)

        def candidate(name: str, banned: dict[Candidate, str] = banned) -> Candidate:
            found = tuned.get(name, Candidate(name))
            return Candidate(name) if found in banned else found

        crossovers = _crossovers(bench, config, picks, candidate, bisect_allowance)
        params = {name: candidate(name).params_dict for name in names}
        hosts = getattr(bench, "hosts", 1)
        plan = plan_from(bench.world_size, picks, crossovers, bench.baseline, params, mode=mode, hosts=hosts)

        bench.progress.phase("regret")
        if regret_allowance is None:
            regret_allowance = budget.allowance("regret", bench.spent_s)
            measured_sizes = {m.size_bytes for m in bench.used()}
            regret_sizes = off_grid_sizes(
                config.min_size, config.max_size, config.regret_sizes, config.seed, config.itemsize, measured_sizes
            )
        table = plan_table(plan)
        cands = regret_candidates(table, fixed, regret_sizes, bench.world_size, names, hosts)
        got = bench.measure(cands, regret_sizes, regret_allowance)
        regret = regret_from(got, table, fixed, bench.world_size, names, bench.baseline, banned, fixed_name, hosts)

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
    )
