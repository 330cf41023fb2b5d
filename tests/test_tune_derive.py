"""The tuner's rules on synthetic measurements: noise, winners, bisection, bands, sizes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from artune.measure.records import Candidate, Measurement
from artune.table.model import Band
from artune.tune.derive import Crossover, bands_from, bisect_crossover, changes, pick, pick_all, plan_from
from artune.tune.grid import midpoint, off_grid_sizes, powers, quantize
from artune.tune.noise import NoiseRule, margin, spread, usable
from artune.tune.synthetic import SyntheticBench, linear_cost

A, B, G = Candidate("shm_one_shot"), Candidate("shm_two_shot"), Candidate("gloo")
PREF = ("gloo", "shm_one_shot", "shm_two_shot")
RULE = NoiseRule()


def m(cand: Candidate, t: float, spread_pct: float = 0.0, size: int = 4096, **kw: object) -> Measurement:
    """A measurement with median ``t`` and p20/p80 at ``t * (1 -/+ spread/2)``."""
    half = t * spread_pct / 200.0
    samples = (t - half, t - half, t, t + half, t + half)
    return Measurement(cand, size, "float32", 2, samples, kw.pop("nwrong", 0), **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------ noise


def test_spread_and_margin() -> None:
    a, b = m(A, 100.0, 10.0), m(B, 120.0)
    assert spread(a) == pytest.approx(0.10)
    assert margin(a, b) == pytest.approx(0.2)
    assert margin(b, a) == pytest.approx(100 / 120 - 1)


def test_noise_is_the_larger_spread_clamped_to_floor_and_cap() -> None:
    rule = NoiseRule(floor=0.05, cap=0.20)
    assert rule.noise(m(A, 100.0, 0.0), m(B, 100.0, 0.0)) == 0.05
    assert rule.noise(m(A, 100.0, 12.5), m(B, 100.0, 0.0)) == pytest.approx(0.125)
    assert rule.noise(m(A, 100.0, 90.0), m(B, 100.0)) == 0.20


def test_beats_needs_more_than_noise() -> None:
    assert not RULE.beats(m(A, 100.0), m(B, 104.0))
    assert RULE.beats(m(A, 100.0), m(B, 106.0))
    assert RULE.tied(m(A, 100.0), m(B, 96.0))
    wide = m(A, 100.0, 25.0)  # spread 25%, capped at 20%: a 15% lead is noise
    assert not RULE.beats(wide, m(B, 115.0))


def test_failed_or_wrong_measurements_are_never_usable() -> None:
    assert not usable(m(A, 10.0, nwrong=3))
    assert not usable(Measurement(A, 4096, "float32", 2, (), 0, "timeout", "slow"))
    assert not usable(m(A, 10.0, nwrong=-1))  # not checked
    assert RULE.beats(m(B, 1000.0), Measurement(A, 4096, "float32", 2, (), 0, "runtime", "boom"))


# ------------------------------------------------------------------ winners


def test_pick_fastest_by_more_than_noise() -> None:
    found = pick(4096, [m(G, 400.0), m(A, 10.0), m(B, 30.0)], RULE, PREF)
    assert found is not None and found.winner == A and found.why == "fastest"


def test_pick_within_noise_prefers_simpler_then_incumbent() -> None:
    ms = [m(G, 400.0), m(A, 10.2), m(B, 10.0)]  # B is 2% faster: noise
    assert pick(4096, ms, RULE, PREF).winner == A  # type: ignore[union-attr]
    assert pick(4096, ms, RULE, PREF, incumbent=B).winner == B  # type: ignore[union-attr]
    assert pick(4096, ms, RULE, ("gloo", "shm_two_shot", "shm_one_shot")).winner == B  # type: ignore[union-attr]


def test_pick_never_chooses_wrong_or_failed() -> None:
    wrong = m(A, 5.0, nwrong=7)
    timed_out = Measurement(B, 4096, "float32", 2, (), 0, "timeout", "peer did not answer")
    assert pick(4096, [m(G, 400.0), wrong, timed_out], RULE, PREF).winner == G  # type: ignore[union-attr]
    assert pick(4096, [m(G, 400.0), m(A, 5.0)], RULE, PREF, banned={A}).winner == G  # type: ignore[union-attr]
    assert pick(4096, [wrong, timed_out], RULE, PREF) is None


def test_incumbent_keeps_bands_from_flipping_on_noise() -> None:
    # two equally fast algorithms, the measured order alternating by 3%: one band, no crossover
    by_size = {}
    for i, size in enumerate(powers(256, 1 << 20, 4)):
        fast, slow = (A, B) if i % 2 else (B, A)
        by_size[size] = [m(G, 500.0, size=size), m(fast, 10.0, size=size), m(slow, 10.3, size=size)]
    picks = pick_all(by_size, RULE, PREF)
    assert {p.winner for p in picks} == {A}
    assert changes(picks) == []


# ------------------------------------------------------------------ bisection


def _equal_time(c1: tuple[float, float], c2: tuple[float, float]) -> float:
    """Size where ``latency + size/bw`` of the two models are equal."""
    (l1, g1), (l2, g2) = c1, c2
    return (l2 - l1) / (1 / (g1 * 1e3) - 1 / (g2 * 1e3))


def _lead_size(c1: tuple[float, float], c2: tuple[float, float], lead: float) -> float:
    """Size where model 2 is ``lead`` faster than model 1 (t1 = (1+lead) * t2)."""
    (l1, g1), (l2, g2) = c1, c2
    return ((1 + lead) * l2 - l1) / (1 / (g1 * 1e3) - (1 + lead) / (g2 * 1e3))


@pytest.mark.parametrize(
    ("one", "two"), [((5.0, 1.0), (20.0, 3.0)), ((8.0, 0.5), (60.0, 2.0)), ((3.0, 2.0), (9.0, 3.0))]
)
def test_bisection_finds_the_crossover_within_resolution(one: tuple[float, float], two: tuple[float, float]) -> None:
    bench = SyntheticBench({"shm_one_shot": linear_cost(*one), "shm_two_shot": linear_cost(*two)}, noise=0.01)
    true = _equal_time(one, two)
    lo = 4 ** math.floor(math.log(true, 4))
    resolution = 2**0.25
    found = bisect_crossover(bench.measure, A, B, lo, lo * 4, RULE, resolution, 0.1)
    assert found.hi / found.lo <= resolution * 1.0001
    # the bound lies between the equal-time size and where the upper one leads by the noise floor
    # (the lower band keeps ties), give or take the bisection's resolution
    assert true / resolution <= found.at <= _lead_size(one, two, RULE.floor + 0.02) * resolution
    assert found.at % 4 == 0
    assert found.confidence > 1.0
    assert len(found.steps) <= 4 and len(bench.calls) <= len(found.steps) + 1
    assert all(call[0] == (A, B) and len(call[1]) == 1 for call in bench.calls)  # only the two, one size


def test_bisection_keeps_ties_in_the_lower_band() -> None:
    bench = SyntheticBench({"shm_one_shot": linear_cost(10, 1.0), "shm_two_shot": linear_cost(10, 1.02)}, noise=0.0)
    found = bisect_crossover(bench.measure, A, B, 1024, 4096, RULE, 1.1, 0.1)
    assert found.lo >= 4096 / 1.2  # B never won a midpoint: everything moved up to the top
    assert all(step.winner == A.key for step in found.steps)


# ------------------------------------------------------------------ bands and plans


def test_bands_end_at_crossovers_and_the_top_band_reaches_every_size() -> None:
    picks = pick_all(
        {
            s: [m(G, 500.0 + s, size=s), m(A, 1 + s / 100, size=s), m(B, 30 + s / 1000, size=s)]
            for s in (256, 4096, 65536)
        },
        RULE,
        PREF,
    )
    cross = Crossover(A, B, (256, 4096), 1024, 1280, 1152, 0.2, 0.05)
    bands = bands_from(picks, [cross], "gloo")
    assert bands == (Band(1151, ("shm_one_shot",)), Band(None, ("shm_two_shot",)))  # open-ended: every larger size


def test_trailing_fallback_band_is_dropped_and_equal_bands_merge() -> None:
    picks = pick_all(
        {
            256: [m(G, 500.0, size=256), m(A, 5.0, size=256)],
            1 << 20: [m(G, 10.0, size=1 << 20), m(A, 50.0, size=1 << 20)],
        },
        RULE,
        PREF,
    )
    cross = Crossover(A, G, (256, 1 << 20), 4096, 5120, 4608, 0.3, 0.05)
    plan = plan_from(2, picks, [cross], "gloo", {"shm_one_shot": {"x": 1}, "shm_two_shot": {"y": 2}})
    assert plan.bands == (Band(4607, ("shm_one_shot",)),)
    assert plan.fallback == "gloo"
    assert plan.params_for("shm_one_shot") == {"x": 1}
    assert plan.params_for("shm_two_shot") == {}  # not used by the plan: not written


# ------------------------------------------------------------------ sizes


def test_quantize_keeps_four_significant_bits() -> None:
    assert quantize(1 << 20) == 1 << 20
    assert quantize(1.41 * (1 << 20)) == int(1.375 * (1 << 20))
    assert quantize(3) == 4
    assert midpoint(1 << 20, 1 << 22) == 1 << 21


@given(st.integers(16, 1 << 30), st.integers(0, 8))
def test_quantize_is_a_close_multiple_of_the_itemsize(n: int, k: int) -> None:
    item = 1 << min(k, 3)
    q = quantize(n, item)
    assert q % item == 0
    assert abs(q - n) <= max(item, n / 8)


@given(st.integers(0, 10_000), st.integers(1, 20))
def test_off_grid_sizes_are_untidy_distinct_and_new(seed: int, count: int) -> None:
    avoid = set(powers(256, 64 << 20, 4)) | {1000, 2000}
    sizes = off_grid_sizes(256, 64 << 20, count, seed, 4, avoid)
    assert len(sizes) == len(set(sizes)) == count
    assert sizes == sorted(sizes)
    for s in sizes:
        assert s % 4 == 0 and s & (s - 1) != 0 and s not in avoid
        assert 256 <= s <= (64 << 20) * 1.01
    assert sizes == off_grid_sizes(256, 64 << 20, count, seed, 4, avoid)  # seeded
