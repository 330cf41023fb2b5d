"""``verify_plan``: re-measuring both sides of each band bound, and an open-ended last band against the
fallback, on a synthetic bench (``test_tune_cli`` runs it for real)."""

from __future__ import annotations

from artune.measure.records import Candidate
from artune.table.types import Band, Plan, freeze_params
from artune.tune.compare import FasterRule
from artune.tune.measurer import CachedMeasurer
from artune.tune.synthetic import SyntheticMeasurer, linear_cost
from artune.tune.verify import BandCheck, BoundCheck, across, bounds_of, open_band_of, sides, verify_plan

ALL = ("gloo", "shm_one_shot", "shm_two_shot")
COSTS = {"gloo": linear_cost(400, 1.2), "shm_one_shot": linear_cost(5, 1.0), "shm_two_shot": linear_cost(20, 3.0)}


def plan(bound: int, top: int | None = None, params: dict | None = None) -> Plan:
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
    bench = SyntheticMeasurer(COSTS, noise=0.02)
    check, band = verify_plan(CachedMeasurer(bench), plan(24 << 10), ALL, FasterRule(), 1.0)
    assert isinstance(check, BoundCheck) and isinstance(band, BandCheck)
    assert check.holds and band.holds, (check.describe(), band.describe())
    assert "holds" in check.describe() and "[" in check.describe()  # the ratio's interval
    one_two = (Candidate("shm_one_shot"), Candidate("shm_two_shot"))
    assert [call[0] for call in bench.calls[:2]] == [one_two, one_two]  # each side, both algorithms interleaved
    assert {call[0] for call in bench.calls[2:]} <= {one_two, (Candidate("shm_two_shot"), Candidate("gloo"))}


def test_a_bound_far_from_the_machine_drifts() -> None:
    bench = SyntheticMeasurer(COSTS, noise=0.02)
    check, _band = verify_plan(CachedMeasurer(bench), plan(1 << 20), ALL, FasterRule(), 1.0)  # DeepSpeed's 1 MiB
    assert not check.holds and check.below_lost and not check.above_lost
    assert "DRIFTED" in check.describe()


def one_band(algorithm: str, fallback: str) -> Plan:
    return Plan(2, "eager", (Band(None, (algorithm,)),), fallback)


def test_the_open_band_is_checked_across_its_sizes() -> None:
    band = open_band_of(plan(24 << 10), ALL)
    assert band is not None and (band.lower, band.algorithm, band.fallback) == (
        24 << 10,
        Candidate("shm_two_shot"),
        Candidate("gloo"),
    )
    assert open_band_of(plan(24 << 10, top=(64 << 20) - 1), ALL) is None  # bounded: a hand-over instead
    assert open_band_of(one_band("gloo", "gloo"), ALL) is None  # nothing to compare
    assert open_band_of(one_band("shm_one_shot", "gloo"), ("gloo",)) is None  # it would not run here
    assert across(0, 64 << 20) == [256, 128 << 10, 64 << 20]
    assert across(24 << 10, 64 << 20) == [24 << 10, 1280 << 10, 64 << 20]
    assert across(1 << 30, 64 << 20) == [1 << 30]


def test_a_one_band_table_is_verified_against_its_fallback() -> None:
    """The claim of a one-band table: its algorithm beats the fallback at every size."""
    holds = verify_plan(
        CachedMeasurer(SyntheticMeasurer(COSTS)), one_band("shm_two_shot", "gloo"), ALL, FasterRule(), 1.0
    )
    assert [type(c) for c in holds] == [BandCheck] and holds[0].holds, holds[0].describe()
    assert "band [0, inf) (shm_two_shot over fallback gloo)" in holds[0].describe()
    # this machine's gloo out-runs one-shot on large messages (1.2 against 1.0 GB/s): the claim drifted there
    # 64 MiB takes 4 rounds per call here, too few for a 99% interval: measured again until it decides
    (drift,) = verify_plan(
        CachedMeasurer(SyntheticMeasurer(COSTS)), one_band("shm_one_shot", "gloo"), ALL, FasterRule(), 2.0
    )
    assert isinstance(drift, BandCheck) and not drift.holds
    assert drift.lost == (False, False, True) and drift.sizes == (256, 128 << 10, 64 << 20)
    assert "at 64MiB shm_one_shot/gloo 1.2" in drift.describe() and drift.describe().endswith("DRIFTED")


def test_a_side_too_close_to_call_is_measured_again_and_said_unsure() -> None:
    """Two algorithms 3% apart (the edge of the tie band): neither drifts, the line says unsure."""
    costs = {"gloo": linear_cost(400, 1.2), "shm_one_shot": linear_cost(5, 1.0), "shm_two_shot": linear_cost(5, 1.03)}
    bench = SyntheticMeasurer(costs, noise=0.05, seed=3)
    (check,) = verify_plan(CachedMeasurer(bench), plan(24 << 10, top=(32 << 10) - 1), ALL, FasterRule(), 0.5)[:1]
    assert isinstance(check, BoundCheck) and check.holds
    if check.unsure:
        assert "unsure" in check.describe()
        assert len(bench.calls) > 2  # the unsure side was measured again
