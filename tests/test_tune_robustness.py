"""The summary and the bar of ``bench/tune_robustness.py`` (the bench itself is run by hand, not in tests)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

spec = importlib.util.spec_from_file_location("tune_robustness", Path(__file__).parents[1] / "bench/tune_robustness.py")
assert spec is not None and spec.loader is not None
bench = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = bench
spec.loader.exec_module(bench)

ONE, TWO = "shm_one_shot", "shm_two_shot"


def run(
    at: int, margin: float = 0.0, loss: bool = False, rc: int = 0, justified: bool = True, low: float | None = None
) -> dict[str, Any]:
    return {"tuned": 1.0 + margin, "margin": margin, "printed_loss": loss, "rc": rc, "shipped": "tuned table",
            "margin_low": margin if low is None else low, "margin_high": margin,
            "bands": [[0, at - 1, ONE], [at, None, TWO]], "justified": justified, "near_ties": [],
            "tune_wall_s": 64.0, "table": f"[0, {at}) {ONE}, [{at}, inf) {TWO}"}  # fmt: skip


def test_the_crossovers_spread_is_counted_per_hand_over() -> None:
    runs = [run(960 << 10), run(1 << 20), run(7 << 20)]
    runs.append(run(0) | {"bands": [[0, 287, TWO], [288, (7 << 20) - 1, ONE], [7 << 20, None, TWO]]})
    found = {c["crossover"]: c for c in bench.crossovers(runs)}
    assert found[f"{ONE} -> {TWO}"]["runs"] == 4 and found[f"{ONE} -> {TWO}"]["spread"] == 7 / (960 / 1024)
    assert found[f"{TWO} -> {ONE}"] == {"crossover": f"{TWO} -> {ONE}", "runs": 1, "min": 288, "median": 288,
                                        "max": 288, "spread": 1.0}  # fmt: skip
    lines = bench.report(bench.summary(runs))
    assert any(line.startswith(f"crossover {ONE} -> {TWO}: 4 of 4 runs, 960KiB to 7MiB") for line in lines)
    assert "bands per table: 2 bands in 3 run(s), 3 bands in 1 run(s)" in lines[2]


def test_the_bar_quiet_and_under_load() -> None:
    good = [run(1 << 20) for _ in range(3)]
    assert bench.summary(good)["holds"]
    assert not bench.summary([*good, run(1 << 20, margin=0.011)])["holds"]  # behind by more than 1%
    noisy = bench.summary([*good, run(1 << 20, margin=0.03, low=-0.01)])  # behind by its point estimate only
    assert noisy["holds"] and noisy["behind_by_1pct"] == 0 and noisy["behind_by_1pct_point"] == 1
    assert "0 run(s) behind it by more than 1% over the whole 90% interval" in bench.report(noisy)[0]
    assert not bench.summary([*good, run(1 << 20, loss=True, rc=1)])["holds"]  # quiet: no loss printed at all
    assert not bench.summary([*good, run(1 << 20, justified=False)])["holds"]
    # /proc/stat's counters: user, nice, system, idle, iowait, irq, softirq, steal, ...
    assert bench._steal([0] * 10, [10, 0, 0, 50, 0, 0, 0, 40, 0, 0]) == 0.4
    assert math.isnan(bench._steal([], [1] * 10))
    stolen = bench.summary([*good, run(1 << 20) | {"steal": 0.35}])  # the host took a third of the CPU
    assert stolen["holds"] is None and stolen["not_quiet"] == 1
    assert "CANNOT JUDGE the bar" in bench.report(stolen)[-1] and "up to 35%" in bench.report(stolen)[-1]
    assert stolen["quiet"]["runs"] == 3 and "the 3 quiet run(s) alone: margin worst +0.0%" in bench.report(stolen)[-2]
    # --quiet 3: the bar is judged on the three quiet runs; the stolen one is reported beside them, not judged
    judged = bench.summary([*good, run(1 << 20, margin=0.2, low=0.1) | {"steal": 0.35}], quiet=3)
    assert judged["holds"] and judged["behind_by_1pct"] == 1 and judged["quiet"]["behind_by_1pct"] == 0
    assert "HOLDS the bar" in bench.report(judged)[-1] and "judged on the 3 quiet run(s)" in bench.report(judged)[-1]
    assert not bench.summary([*good, run(1 << 20, justified=False)], quiet=4)["holds"]  # a quiet run's band counts
    assert bench.summary([*good, run(1 << 20) | {"steal": 0.35}], quiet=4)["holds"] is None  # only 3 were quiet
    refused = bench.summary([*good, run(1 << 20, loss=True, rc=1)], load=1)
    assert refused["holds"] and refused["refused"] == 1 and refused["installed_losing"] == 0
    assert not bench.summary([*good, run(1 << 20, loss=True, rc=0)], load=1)["holds"]  # installed while losing


def test_one_table_shipped_by_several_runs_shows_the_scorers_own_spread() -> None:
    runs = [run(1 << 20, margin=-0.054), run(1 << 20, margin=0.064), run(1 << 20, margin=0.01), run(7 << 20)]
    (same,) = bench.same_tables(runs)  # the table of one run only is not a spread
    assert same["runs"] == 3 and (same["min"], same["max"]) == (-0.054, 0.064)
    lines = bench.report(bench.summary(runs))
    assert (
        f"the same table in 3 runs, scored -5.4% to +6.4% over the best fixed rule: [0, {1 << 20}) {ONE}"
        in "\n".join(lines)
    )


def test_the_margins_interval_is_a_paired_bootstrap_over_rounds() -> None:
    """Two sizes, 15 rounds: a candidate 5% slower in every round is behind by 5% with a narrow interval; one
    that the rounds put 2% behind and 2% ahead in turn has an interval that straddles zero."""
    steady = [10.0 + 0.5 * (r % 3) for r in range(15)]  # a drifting machine: every candidate drifts alike
    rounds = {
        1000: {"one": steady, "two": [t * 1.05 for t in steady]},
        5000: {"one": steady, "two": [t * (1.02 if r % 2 else 0.98) for r, t in enumerate(steady)]},
    }
    low, high = bench.margin_interval(rounds, {1000: "two", 5000: "two"}, {1000: "one", 5000: "one"}, [1000, 5000])
    assert low < 0.025 - 0.005 < high < 0.025 + 0.02  # (1.05 * ~1.0) ** 0.5 - 1, give or take the +-2% size
    assert low > 0.0  # the steady 5% alone keeps it behind
    same = bench.margin_interval(rounds, {1000: "one", 5000: "one"}, {1000: "one", 5000: "one"}, [1000, 5000])
    assert same == (0.0, 0.0)


def test_a_process_pair_that_favours_one_rule_at_every_size_widens_the_interval() -> None:
    """Three pairs of 15 rounds; in the last one the tuned choice is 10% slower at both sizes. Resampled as
    pairs (the same pair at every size), the margin may be that pair's; as 45 loose rounds, it hardly moves."""
    base = [10.0 + 0.1 * (r % 5) for r in range(15)]
    slow = base + base + [t * 1.10 for t in base]
    rounds = {s: {"one": base * 3, "two": slow} for s in (1000, 5000)}
    args = (rounds, {1000: "two", 5000: "two"}, {1000: "one", 5000: "one"}, [1000, 5000])
    loose = bench.margin_interval(*args)
    pairs = bench.margin_interval(*args, states=3)
    assert pairs[0] == 0.0 and pairs[1] > 0.08  # some resamples are the slow pair two or three times over
    assert loose[1] < 0.05
