"""``verify_plan``: re-measuring both sides of each band bound, on a synthetic bench."""

from __future__ import annotations

from artune.measure.records import Candidate
from artune.sizes import MAX_SIZE
from artune.table.model import Band, Plan, freeze_params
from artune.tune.noise import NoiseRule
from artune.tune.synthetic import SyntheticBench, linear_cost
from artune.tune.verify import bounds_of, sides, verify_plan

ALL = ("gloo", "shm_one_shot", "shm_two_shot")
COSTS = {"gloo": linear_cost(400, 1.2), "shm_one_shot": linear_cost(5, 1.0), "shm_two_shot": linear_cost(20, 3.0)}


def plan(bound: int, top: int = MAX_SIZE, params: dict | None = None) -> Plan:
    bands = (Band(bound - 1, ("shm_one_shot",)), Band(top, ("shm_two_shot",)))
    return Plan(2, "eager", bands, "gloo", freeze_params(params or {}))


def test_bounds_skip_the_open_top_and_follow_availability() -> None:
    (only,) = bounds_of(plan(24 << 10), ALL)
    assert (only.at, only.lower, only.upper) == (24 << 10, Candidate("shm_one_shot"), Candidate("shm_two_shot"))
    two = bounds_of(plan(24 << 10, top=(64 << 20) - 1), ALL)
    assert [b.at for b in two] == [24 << 10, 64 << 20] and two[1].upper == Candidate("gloo")
    assert bounds_of(plan(24 << 10), ("gloo", "shm_two_shot"))[0].lower == Candidate("gloo")
    with_params = bounds_of(plan(24 << 10, params={"shm_two_shot": {"chunk_bytes": 1 << 20}}), ALL)
    assert with_params[0].upper == Candidate.of("shm_two_shot", {"chunk_bytes": 1 << 20})


def test_sides_are_inside_both_bands() -> None:
    (b,) = bounds_of(Plan(2, "eager", (Band(999, ("shm_one_shot",)), Band(1100, ("shm_two_shot",))), "gloo"), ALL)[:1]
    below, above = sides(b)
    assert b.lower_from <= below < b.at <= above <= 1100
    assert below % 4 == 0 and above % 4 == 0


def test_a_table_that_matches_the_machine_holds() -> None:
    bench = SyntheticBench(COSTS, noise=0.02)
    (check,) = verify_plan(bench.measure, plan(24 << 10), ALL, NoiseRule(), 1.0)
    assert check.holds, check.describe()
    assert "holds" in check.describe()
    assert bench.calls[0][0] == (Candidate("shm_one_shot"), Candidate("shm_two_shot"))


def test_a_bound_far_from_the_machine_drifts() -> None:
    bench = SyntheticBench(COSTS, noise=0.02)
    (check,) = verify_plan(bench.measure, plan(1 << 20), ALL, NoiseRule(), 1.0)  # DeepSpeed's 1 MiB
    assert not check.holds and check.below_lost and not check.above_lost
    assert "DRIFTED" in check.describe()
