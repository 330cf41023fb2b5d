"""What ships (``artune.tune.shipping``) binds: a derived table that its checks put behind a fixed
rule is replaced by the rule; a table whose checks contradict each other is installed only with ``--force``;
a noisy machine's tables keep one crossover, and a near-tie is named and resolved to the published rule."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from artune.cli import main
from artune.machine import cpu_platform
from artune.table.bundled import cpu_default
from artune.table.decide import decide
from artune.table.io import load_table
from artune.table.types import ParamValue, Table
from artune.tune import session
from artune.tune.config import TuneConfig
from artune.tune.measured import build_table
from artune.tune.measurer import CachedMeasurer
from artune.tune.regret import single_rules
from artune.tune.state import plan_table
from artune.tune.synthetic import Cost, SyntheticMeasurer, linear_cost
from artune.tune.tuner import WorldResult, tune_world

ONE, TWO = linear_cost(5.0, 1.0), linear_cost(20.0, 3.0)
COSTS: dict[str, Cost] = {"gloo": linear_cost(400.0, 1.2), "shm_one_shot": ONE, "shm_two_shot": TWO}
#: the same machine once something else changed it: two-shot five times faster, ahead at every size
LATER: dict[str, Cost] = {**COSTS, "shm_two_shot": lambda size, params: 0.2 * TWO(size, params)}


class Changes:
    """A progress sink that changes the modelled machine when the run reaches one of ``phases``."""

    def __init__(self, bench: SyntheticMeasurer, phases: set[str]) -> None:
        self.bench, self.phases = bench, phases

    def phase(self, name: str) -> None:
        if name in self.phases:
            self.bench.costs = LATER

    def advance(self, seconds: float) -> None:
        pass


def changing(seed: int, phases: set[str]) -> WorldResult:
    bench = SyntheticMeasurer(dict(COSTS), noise=0.02, seed=seed)
    return tune_world(
        CachedMeasurer(bench, progress=Changes(bench, phases)), TuneConfig.full(30.0).with_changes(seed=seed)
    )


def test_a_derived_table_that_its_held_out_check_puts_behind_a_fixed_rule_ships_the_rule() -> None:
    """The machine changes before the duel: the derived table's one-shot band loses on the held-out sizes to
    ``always shm_two_shot`` by far more than 1%, so that rule ships, said in the output and the provenance."""
    result = changing(0, {"duel", "regret"})
    ships = result.shipping
    assert ships is not None and ships.replaced and ships.vouched and ships.shipped == "always shm_two_shot"
    assert [b.candidates for b in result.plan.bands] == [("shm_two_shot",)]
    assert result.derived is not None and result.derived != result.plan
    (why,) = [a for a in ships.beaten if a.check == "held-out regret"]  # the duel may agree: it met the change too
    assert why.ahead == "always shm_two_shot" and why.ratio < 1 / 1.01
    assert all(a.ahead == "always shm_two_shot" for a in ships.beaten)
    regret = result.regret
    assert regret.geomean(regret.rules.index("always shm_two_shot")) * 1.01 < regret.tuned_geomean
    notes = build_table([result], cpu_platform()).provenance.notes
    assert "Shipped always shm_two_shot instead of the tuned table: the held-out regret put" in notes


def test_checks_that_contradict_each_other_vouch_for_nothing() -> None:
    """The machine changes only for the held-out sizes: the duel put the derived table ahead of always
    two-shot, the held-out regret puts always two-shot ahead of it. Whichever ships, a check is against it."""
    result = changing(0, {"regret"})
    ships = result.shipping
    assert ships is not None and not ships.vouched and not result.vouched
    assert {a.check for a in (*ships.beaten, *ships.against)} == {"held-out regret", "duel"}
    assert "LOSES on its own checks" in ships.describe()


def _fake_tune(result: WorldResult):  # type: ignore[no-untyped-def]
    def tune_world_sizes(*args: object, **kwargs: object) -> list[WorldResult]:
        return [result]

    return tune_world_sizes


def test_tune_installs_a_table_its_checks_say_loses_only_with_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line over the run above (the ranks replaced by the modelled machine): exit 1 and nothing
    installed without ``--force``; with it, installed and exit 0. The table and report are written either way."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ARTUNE_CACHE_DIR", str(cache))
    monkeypatch.setattr(session, "tune_world_sizes", _fake_tune(changing(0, {"regret"})))
    out = tmp_path / "refused"
    assert main(["tune", "--world-size", "2", "--out", str(out), "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert "WARNING: ws=2: Shipped always shm_two_shot" in captured.err and "LOSES on its own checks" in captured.err
    assert "artune tune: not installed: the run's own checks put another plan ahead" in captured.err
    assert "--force" in captured.err and "(not installed)" in captured.out
    assert load_table(out / "table.toml").plans and (out / "report.md").is_file() and not cache.exists()
    forced = tmp_path / "forced"
    assert main(["tune", "--world-size", "2", "--out", str(forced), "--no-progress", "--force"]) == 0
    captured = capsys.readouterr()
    assert "LOSES on its own checks" in captured.err and "installed at" in captured.out
    assert len(list(cache.rglob("*.toml"))) == 1


def test_tune_installs_the_rule_its_checks_chose_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ARTUNE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(session, "tune_world_sizes", _fake_tune(changing(0, {"duel", "regret"})))
    assert main(["tune", "--world-size", "2", "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "world_size=2: [0, inf) shm_two_shot; fallback gloo" in captured.out
    assert "Shipped always shm_two_shot instead of the tuned table: the held-out regret put" in captured.out
    assert "LOSES" not in captured.out + captured.err and "installed at" in captured.out
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| always shm_two_shot (ships) |" in report and "What ships and why (ws=2)" in report


# ------------------------------------------------------------------ a noisy VM's near-tie, seeded


def _between(points: list[tuple[float, float]], size: int) -> float:
    """The piecewise log-linear curve through ``(size, value)`` points, flat outside them."""
    x = math.log(min(max(size, points[0][0]), points[-1][0]))
    for (a, fa), (b, fb) in itertools.pairwise(points):
        if math.log(a) <= x <= math.log(b):
            return fa + (fb - fa) * (x - math.log(a)) / (math.log(b) - math.log(a))
    return points[-1][1]


#: two-shot's time over one-shot's: 30% behind to 64 KiB, level at 1 MiB, within 2% to 8 MiB, 10% ahead at 64 MiB
SHAPE = [(256.0, 1.3), (65536.0, 1.3), (1048576.0, 1.0), (8388608.0, 0.98), (67108864.0, 0.9)]


def vm(seed: int) -> SyntheticMeasurer:
    """The issue's VM, modelled: one-shot and two-shot level from 1 to 8 MiB; per-call noise, drift, heavy
    tails, a slow rank, and a slow state in a third of the calls (46 us more for both, and two-shot 15%
    ahead at 256-512 KiB), where the old tuner shipped four bands and a crossover anywhere from 240 KiB to
    3.75 MiB."""

    def one(size: int, params: Mapping[str, ParamValue]) -> float:
        return 3.0 + size / 2000.0

    def two(size: int, params: Mapping[str, ParamValue]) -> float:
        return one(size, params) * _between(SHAPE, size)

    def slow_two(size: int, params: Mapping[str, ParamValue]) -> float:
        return (two(size, params) + 46.0) * (0.85 if 256 << 10 <= size <= 512 << 10 else 1.0)

    return SyntheticMeasurer(
        {"gloo": linear_cost(400.0, 1.2), "shm_one_shot": one, "shm_two_shot": two},
        seed=seed,
        noise=0.05,
        drift=0.1,
        tail=0.02,
        slow_rank=0.2,
        max_samples=2000,
        slow_share=0.3,
        slow_costs={"shm_one_shot": lambda size, params: one(size, params) + 46.0, "shm_two_shot": slow_two},
    )


def _expected_regret(machine: SyntheticMeasurer, table: Table) -> float:
    """The plan's regret by the modelled machine's expected cost (each state's cost weighed by how often it
    comes), geometric mean over 200 log-spaced sizes from 256 B to 64 MiB: the truth a run only samples."""
    names = frozenset(machine.costs)

    def cost(algorithm: str, size: int) -> float:
        slow = machine.slow_costs.get(algorithm, machine.costs[algorithm])
        return (1 - machine.slow_share) * machine.costs[algorithm](size, {}) + machine.slow_share * slow(size, {})

    logs = []
    for i in range(200):
        size = int(256 * (2.0**18) ** (i / 199)) // 4 * 4
        chosen = decide(table, size, 2, "eager", names).algorithm
        logs.append(math.log(cost(chosen, size) / min(cost(a, size) for a in ("shm_one_shot", "shm_two_shot"))))
    return math.exp(sum(logs) / len(logs))


def test_a_noisy_vm_gets_one_crossover_and_ships_within_one_percent_of_the_best_rule() -> None:
    """Ten seeds: every derived table has one crossover between one-shot and two-shot, nine of them at
    DeepSpeed's 1 MiB (the two are level above it; the tenth saw the slow state's lead at 256-512 KiB), and
    every table that ships is within 1% of DeepSpeed's rule by the model's expected cost. The tenth ships:
    by the time spent on its held-out sizes it is level with DeepSpeed's rule (the model's heavy tails hit
    every algorithm), and by the model's expected cost it is 0.5% behind. The near-tie is named in the
    provenance."""
    deepspeed = [((1 << 20) - 1, "shm_one_shot"), (None, "shm_two_shot")]
    at_published = named = 0
    for seed in range(10):
        machine = vm(seed)
        result = tune_world(CachedMeasurer(machine), TuneConfig.full(60.0).with_changes(seed=seed))
        assert result.derived is not None and result.shaping is not None
        derived = [(b.upto, b.candidates[0]) for b in result.derived.bands]
        assert [name for _, name in derived] == ["shm_one_shot", "shm_two_shot"], (seed, derived)
        at_published += derived == deepspeed
        rules = [cpu_default(), *(table for _, table in single_rules(tuple(machine.algorithms), 2, "gloo"))]
        best = min(_expected_regret(machine, table) for table in rules)
        assert _expected_regret(machine, plan_table(result.plan)) <= best * 1.01, seed
        assert result.shaping.justified and result.vouched, seed
        notes = build_table([result], cpu_platform()).provenance.notes
        tie = r"near-tie: shm_one_shot and shm_two_shot within [1-3]% from 1MiB to [0-9.]+MiB"
        named += re.search(tie, notes) is not None
    assert at_published >= 9 and named >= 8
