"""The tuner's rules on synthetic measurements: winners, bisection, bands, sizes (the statistic itself:
``test_tune_compare``)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from artune.grid import midpoint, off_grid_sizes, powers, quantize
from artune.measure.records import Candidate, Measurement
from artune.table.types import Band
from artune.tune.compare import FasterRule, usable
from artune.tune.derive import BandCrossover, bands_from, bisect_crossover, changes, pick, pick_all, plan_from
from artune.tune.measurer import CachedMeasurer
from artune.tune.synthetic import SyntheticMeasurer, linear_cost

A, B, G = Candidate("shm_one_shot"), Candidate("shm_two_shot"), Candidate("gloo")
PREF = ("gloo", "shm_one_shot", "shm_two_shot")
RULE = FasterRule()


def call(times: dict[Candidate, float], size: int = 4096, rounds: int = 60, jitter: float = 0.01) -> list[Measurement]:
    """One interleaved call: each candidate's ``rounds`` turns of 3 samples around its time, the machine's
    speed shared by the turns of a round (so the paired ratios are tight), ``jitter`` of its own."""
    name = f"test-{size}-{sorted(c.key for c in times)}-{rounds}"
    out = []
    for i, (cand, t) in enumerate(times.items()):
        samples = []
        for r in range(rounds):
            machine = 1.0 + 0.2 * math.sin(r)  # drift between rounds: cancels in the pairs
            own = 1.0 + jitter * math.sin(7.0 * r + 2.0 * i + 1.0)
            samples += [t * machine * own] * 3
        out.append(Measurement(cand, size, "float32", 2, tuple(samples), 0, burst=3, call=name))
    return out


def failed(cand: Candidate, status: str, size: int = 4096) -> Measurement:
    return Measurement(cand, size, "float32", 2, (), 0, status, "boom")


# ------------------------------------------------------------------ winners


def test_pick_fastest_beyond_the_tie_band() -> None:
    found = pick(4096, call({G: 400.0, A: 10.0, B: 30.0}), RULE, PREF)
    assert found is not None and found.winner == A and found.why == "fastest" and found.verdict == "faster"
    assert found.against is not None and found.against.b == B and found.against.ratio == pytest.approx(1 / 3, 0.02)


def test_pick_within_the_tie_band_prefers_simpler_then_incumbent() -> None:
    ms = call({G: 400.0, A: 10.2, B: 10.0})  # B is 2% faster: a tie
    assert pick(4096, ms, RULE, PREF).winner == A  # type: ignore[union-attr]
    assert pick(4096, ms, RULE, PREF).verdict == "tie"  # type: ignore[union-attr]
    assert pick(4096, ms, RULE, PREF, incumbent=B).winner == B  # type: ignore[union-attr]
    assert pick(4096, ms, RULE, ("gloo", "shm_two_shot", "shm_one_shot")).winner == B  # type: ignore[union-attr]


def test_a_five_percent_lead_takes_the_band_from_the_incumbent() -> None:
    """The old rule kept the incumbent for anything under the p20-p80 spread of single calls; paired
    rounds resolve 5% with calls far noisier than that."""
    ms = call({G: 400.0, A: 10.5, B: 10.0})  # the machine drifts by 20% between rounds
    found = pick(4096, ms, RULE, PREF, incumbent=A)
    assert found is not None and found.winner == B and found.verdict == "faster", found


def test_an_unsure_pick_keeps_the_incumbent_and_says_which_pair_to_measure() -> None:
    ms = call({A: 10.35, B: 10.0}, rounds=12, jitter=0.05)  # 3.5% apart, too few rounds to tell from 3%
    found = pick(4096, ms, RULE, PREF, incumbent=A)
    assert found is not None and found.winner == A and found.verdict == "unsure"
    assert found.unsure == (B, A)


def test_an_unsure_pick_takes_the_published_rules_choice_and_a_tie_keeps_the_incumbent() -> None:
    """The table leaves the published rule only on evidence: unsure, its choice wins over the incumbent
    (measured again when it is not the fastest); an incumbent that ties or is the fastest stays."""
    unsure = call({A: 10.35, B: 10.0}, rounds=12, jitter=0.05)
    found = pick(4096, unsure, RULE, PREF, incumbent=A, published="shm_two_shot")
    assert found is not None and found.winner == B and found.verdict == "unsure"
    b_first = ("gloo", "shm_two_shot", "shm_one_shot")  # B is the simpler one
    found = pick(4096, unsure, RULE, b_first, published="shm_one_shot")
    assert found is not None and found.winner == A and found.why == "published rule" and found.unsure == (B, A)
    assert pick(4096, unsure, RULE, PREF, incumbent=B, published="shm_one_shot").winner == B  # type: ignore[union-attr]
    tie = call({G: 400.0, A: 10.2, B: 10.0})
    assert pick(4096, tie, RULE, PREF, incumbent=A, published="shm_two_shot").winner == A  # type: ignore[union-attr]
    no_incumbent = pick(4096, tie, RULE, PREF, published="shm_two_shot")
    assert no_incumbent is not None and no_incumbent.winner == B  # over the simpler A
    faster = call({G: 400.0, A: 10.0, B: 30.0})
    assert pick(4096, faster, RULE, PREF, incumbent=B, published="shm_two_shot").winner == A  # type: ignore[union-attr]


def test_a_lead_in_one_call_outweighs_a_pooled_tie() -> None:
    """Two calls at one size: B ties A in a quick one with many rounds and leads by 15% in a slow one."""
    from artune.tune.compare import Pooled

    quick, slow = call({A: 10.0, B: 10.1}, rounds=600), call({A: 70.0, B: 60.0}, rounds=60)
    slow = [Measurement(m.candidate, m.size_bytes, "float32", 2, m.samples_us, 0, burst=3, call="slow") for m in slow]
    pooled = [Pooled((q, s)) for q, s in zip(quick, slow, strict=True)]
    c = RULE.compare(pooled[1], pooled[0])
    assert c.ratio > 1.0 and c.verdict == "faster"  # pooled rounds say B is no faster; the slow call decides
    found = pick(4096, pooled, RULE, PREF, incumbent=A)
    assert found is not None and found.winner == B and found.fastest == B and found.verdict == "faster"


def test_pick_never_chooses_wrong_or_failed() -> None:
    good = call({G: 400.0, A: 5.0})
    wrong = Measurement(A, 4096, "float32", 2, good[1].samples_us, 7, burst=3, call=good[1].call)
    timed_out = failed(B, "timeout")
    assert pick(4096, [good[0], wrong, timed_out], RULE, PREF).winner == G  # type: ignore[union-attr]
    assert pick(4096, good, RULE, PREF, banned={A}).winner == G  # type: ignore[union-attr]
    assert pick(4096, [wrong, timed_out], RULE, PREF) is None
    assert not usable(wrong) and not usable(timed_out)


def test_incumbent_keeps_bands_from_flipping_on_noise() -> None:
    # two equally fast algorithms, the measured order alternating by 2%: one band, no crossover
    by_size = {}
    for i, size in enumerate(powers(256, 1 << 20, 4)):
        fast, slow = (A, B) if i % 2 else (B, A)
        by_size[size] = call({G: 500.0, fast: 10.0, slow: 10.2}, size=size)
    picks = pick_all(by_size, RULE, PREF)
    assert {p.winner for p in picks} == {A}
    assert changes(picks) == []


def test_an_earlier_algorithm_comes_back() -> None:
    """one-shot, two-shot, one-shot: each change of winner is a crossover of its own."""
    times = {256: (5.0, 9.0), 4096: (9.0, 6.0), 65536: (40.0, 60.0)}
    by_size = {s: call({G: 500.0, A: a, B: b}, size=s) for s, (a, b) in times.items()}
    picks = pick_all(by_size, RULE, PREF)
    assert [p.winner for p in picks] == [A, B, A]
    crossings = [
        BandCrossover(x.winner, y.winner, (x.size, y.size), x.size, y.size, y.size, None) for x, y in changes(picks)
    ]
    bands = bands_from(picks, crossings, "gloo")
    assert [b.candidates for b in bands] == [("shm_one_shot",), ("shm_two_shot",), ("shm_one_shot",)]
    assert [b.upto for b in bands] == [4095, 65535, None]


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
    bench = SyntheticMeasurer({"shm_one_shot": linear_cost(*one), "shm_two_shot": linear_cost(*two)}, noise=0.01)
    true = _equal_time(one, two)
    lo = 4 ** math.floor(math.log(true, 4))
    resolution = 2**0.25
    found = bisect_crossover(CachedMeasurer(bench), A, B, lo, lo * 4, RULE, resolution, 0.1)
    assert found.hi / found.lo <= resolution * 1.0001
    # the bound lies between the equal-time size and where the upper one leads by the tie band
    # (the lower band keeps ties), give or take the bisection's resolution
    assert true / resolution <= found.at <= _lead_size(one, two, RULE.tie + 0.01) * resolution
    assert found.at % 4 == 0
    assert found.lead is not None and found.lead.verdict == "faster"
    assert len(found.steps) <= 4 and len(bench.calls) <= sum(s.calls for s in found.steps) + 1
    assert all(call[0] == (A, B) and len(call[1]) == 1 for call in bench.calls)  # only the two, one size


def test_bisection_keeps_ties_in_the_lower_band() -> None:
    bench = SyntheticMeasurer({"shm_one_shot": linear_cost(10, 1.0), "shm_two_shot": linear_cost(10, 1.02)}, noise=0.0)
    found = bisect_crossover(CachedMeasurer(bench), A, B, 1024, 4096, RULE, 1.1, 0.1)
    assert found.lo >= 4096 / 1.2  # B never won a midpoint: everything moved up to the top
    assert all(step.winner == A.key for step in found.steps)
    assert all(step.comparison.verdict == "tie" for step in found.steps)


def test_an_unsure_midpoint_goes_where_the_published_rule_puts_it() -> None:
    """3% apart with 8% noise and no calls to spare: every midpoint stays unsure, so the bracket closes on
    the published rule's bound (2 KiB here) instead of moving all the way up."""
    costs = {"shm_one_shot": lambda s, p: 100.0, "shm_two_shot": lambda s, p: 97.0}
    bench = SyntheticMeasurer(costs, noise=0.08, seed=3, max_samples=20)  # type: ignore[arg-type]
    published = {True: "shm_two_shot", False: "shm_one_shot"}
    found = bisect_crossover(
        CachedMeasurer(bench),
        A,
        B,
        512,
        8192,
        RULE,
        1.1,
        0.001,
        extra_calls=0,
        published=lambda s: published[s >= 2048],
    )
    assert all(step.comparison.verdict == "unsure" for step in found.steps), found.steps
    assert found.lo < 2048 <= found.hi and found.resolution <= 1.1


def test_an_unsure_midpoint_is_measured_again() -> None:
    """4% apart with 8% noise: one call leaves the interval across the band's edge, more calls decide."""
    costs = {"shm_one_shot": lambda s, p: 100.0, "shm_two_shot": lambda s, p: 96.0}
    bench = SyntheticMeasurer(costs, noise=0.08, seed=2, max_samples=60)  # type: ignore[arg-type]
    cached = CachedMeasurer(bench)
    found = bisect_crossover(cached, A, B, 1024, 4096, RULE, 2.5, 0.01)
    (step,) = found.steps
    assert step.calls > 1 and len(bench.calls) == 1 + step.calls
    calls = cached.get(A, step.size).calls  # type: ignore[union-attr]
    assert len(calls) == step.calls and step.comparison.rounds == sum(m.iters // m.burst for m in calls)


# ------------------------------------------------------------------ bands and plans


def test_bands_end_at_crossovers_and_the_top_band_reaches_every_size() -> None:
    picks = pick_all(
        {s: call({G: 500.0 + s, A: 1 + s / 100, B: 30 + s / 1000}, size=s) for s in (256, 4096, 65536)},
        RULE,
        PREF,
    )
    cross = BandCrossover(A, B, (256, 4096), 1024, 1280, 1152, None)
    bands = bands_from(picks, [cross], "gloo")
    assert bands == (Band(1151, ("shm_one_shot",)), Band(None, ("shm_two_shot",)))  # open-ended: every larger size


def test_trailing_fallback_band_is_dropped_and_equal_bands_merge() -> None:
    picks = pick_all(
        {256: call({G: 500.0, A: 5.0}, size=256), 1 << 20: call({G: 10.0, A: 50.0}, size=1 << 20)},
        RULE,
        PREF,
    )
    cross = BandCrossover(A, G, (256, 1 << 20), 4096, 5120, 4608, None)
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
