"""``CachedMeasurer``: resumption by key, one call per size, budget accounting and iteration caps."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from artune.measure.records import Candidate, Measurement
from artune.tune.measurer import MIN_ITERS, CachedMeasurer, call_cost
from artune.tune.synthetic import SyntheticMeasurer, linear_cost

A, B, G = Candidate("shm_one_shot"), Candidate("shm_two_shot"), Candidate("gloo")


def bench(**kw: object) -> SyntheticMeasurer:
    costs = {"gloo": linear_cost(400, 1.2), "shm_one_shot": linear_cost(5, 1.0), "shm_two_shot": linear_cost(20, 3.0)}
    return SyntheticMeasurer(costs, noise=0.01, **kw)  # type: ignore[arg-type]


def test_known_pairs_are_not_measured_again() -> None:
    inner = bench()
    cached = CachedMeasurer(inner)
    first = cached.measure([G, A], [256, 4096], 1.0)
    assert [(m.candidate, m.size_bytes) for m in first] == [(G, 256), (A, 256), (G, 4096), (A, 4096)]
    assert [call[:2] for call in inner.calls] == [((G, A), (256,)), ((G, A), (4096,))]  # one call per size
    again = cached.measure([A, B], [4096], 1.0)
    assert inner.calls[-1][:2] == ((B,), (4096,))  # only the missing candidate
    assert again[0] is first[3]
    assert cached.measured == 5 and cached.calls == 3


def test_more_adds_a_call_that_pairs_with_its_partner() -> None:
    inner = bench()
    cached = CachedMeasurer(inner)
    first = cached.measure([G, A, B], [4096], 1.0)
    more = cached.more([A, B], 4096, 0.5)
    assert inner.calls[-1][:2] == ((A, B), (4096,)) and cached.remeasured == 1
    assert [len(e.calls) for e in more] == [2, 2] and more[0].calls[0] is first[1].calls[0]
    assert more[0].calls[1].call == more[1].calls[1].call != first[0].calls[0].call  # one new interleaved call
    assert cached.get(G, 4096) is first[0]  # gloo was not measured again
    assert len(cached.used()) == 5


def test_a_log_replays_without_measuring(tmp_path: object) -> None:
    first = CachedMeasurer(bench())
    ms = first.measure([G, A, B], [256, 65536], 1.0)
    replay_inner = bench(seed=7)
    first.more([A, B], 256, 0.5)
    known = first.used()
    replay = CachedMeasurer(replay_inner, known=known)
    assert replay.measure([G, A, B], [256, 65536], 1.0) == ms
    assert replay.more([A, B], 256, 0.5) == [first.get(A, 256), first.get(B, 256)]  # the second call, from the log
    assert replay_inner.calls == [] and replay.reused == 8 and replay.measured == 0 and replay.spent_s == 0


class SlowMeasurer:
    """A bench whose calls report (via ``agree``) three times the budget they were handed."""

    world_size, dtype, baseline, mode, hosts = 2, "float32", "gloo", "eager", 1
    algorithms = ("gloo", "shm_one_shot")

    def __init__(self) -> None:
        self.inner = bench()
        self.handed: list[float] = []
        self.caps: list[int | None] = []

    def tunables(self, name: str) -> dict[str, tuple[object, ...]]:
        return {}

    def measure(
        self, candidates: Sequence[Candidate], sizes: Sequence[int], budget_s: float, max_iters: int | None = None
    ) -> list[Measurement]:
        self.handed.append(budget_s)
        self.caps.append(max_iters)
        self._last = budget_s
        return self.inner.measure(candidates, sizes, budget_s, max_iters)

    def agree(self, seconds: float) -> float:
        return 3 * self._last


def test_overruns_are_counted_and_later_calls_get_less() -> None:
    slow = SlowMeasurer()
    cached = CachedMeasurer(slow)
    for size in (256, 1024, 4096):
        cached.measure([G, A], [size], 1.0)
    assert cached.spent_s == pytest.approx(1.0 * 3 + 3 * slow.handed[1] + 3 * slow.handed[2])
    assert slow.handed[0] == 1.0 and slow.handed[1] == pytest.approx(1 / 3) and slow.handed[2] == pytest.approx(1 / 3)
    assert cached.overshoot == pytest.approx(3.0)


def test_iteration_cap_comes_from_nearby_means() -> None:
    slow = SlowMeasurer()
    cached = CachedMeasurer(slow)
    cached.measure([G, A], [4096], 1.0)
    assert slow.caps == [None]  # nothing to go by yet
    assert cached.predict_us(G, 4096) == pytest.approx(400 + 4096 / 1200, rel=0.05)
    assert cached.predict_us(G, 256) == cached.predict_us(G, 1 << 20)  # flat outside what is known
    assert cached.predict_us(B, 4096) is None
    cached.measure([G, A], [1 << 20], 1.0)
    mid = cached.predict_us(A, 1 << 16)
    assert cached.predict_us(A, 4096) < mid < cached.predict_us(A, 1 << 20)  # type: ignore[operator]
    cached.measure([G, A], [1 << 16], 1.0)
    assert slow.caps[-1] is not None and slow.caps[-1] >= MIN_ITERS


def test_call_cost_counts_samples_warmup_and_overhead() -> None:
    m = Measurement(A, 4096, "float32", 2, (100.0,) * 1000, 0)
    assert call_cost([m]) == pytest.approx(0.1 * 1.1 + 0.01)


def test_one_interleaved_call_per_size() -> None:
    inner = bench()
    cached = CachedMeasurer(inner)
    got = cached.measure([G, A, B], [4096, 65536], 1.0)
    assert [(m.candidate, m.size_bytes) for m in got] == [(c, s) for s in (4096, 65536) for c in (G, A, B)]
    assert [call[:2] for call in inner.calls] == [((G, A, B), (4096,)), ((G, A, B), (65536,))]
    assert inner.calls[0][2] == pytest.approx(3.0 / 6)


def test_together_gives_every_candidate_a_shared_call() -> None:
    inner = bench()
    cached = CachedMeasurer(inner)
    cached.measure([G, A], [4096], 1.0)
    assert len(inner.calls) == 1
    both = cached.together([G, A], 4096, 1.0)  # they share the sweep's call: nothing to measure
    assert len(inner.calls) == 1 and both[0].calls[0].call == both[1].calls[0].call
    three = cached.together([A, B], 4096, 1.0)  # B is new, A was measured without it: one call of both
    assert inner.calls[-1][:2] == ((A, B), (4096,)) and len(three[0].calls) == 2 and len(three[1].calls) == 1
    assert three[0].calls[1].call == three[1].calls[0].call
    fresh = cached.together([A, B], 65536, 1.0)  # neither known: their first call, together
    assert inner.calls[-1][:2] == ((A, B), (65536,)) and fresh[0].calls[0].call == fresh[1].calls[0].call
