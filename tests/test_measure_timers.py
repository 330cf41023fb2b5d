"""The timers with fake clocks: which interval each figure is, the division by calls per graph, the L2 flush."""

from __future__ import annotations

import numpy as np
import pytest

from artune.measure.cuda_timing import EventTimer, GraphTimer
from artune.measure.harness import Schedule, _timed_loop, make_timer
from artune.measure.timers import TimingSpec, WallTimer


class FakeGpu:
    """A stream whose clock advances by each call's cost; events read the clock when recorded."""

    def __init__(self) -> None:
        self.now_ms = 0.0
        self.log: list[str] = []

    def event(self) -> FakeEvent:
        return FakeEvent(self)

    def stream(self) -> str:
        return "stream"


class FakeEvent:
    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu
        self.at: float | None = None

    def record(self, stream: str) -> None:
        assert stream == "stream"
        self.at = self.gpu.now_ms
        self.gpu.log.append("record")

    def synchronize(self) -> None:
        self.gpu.log.append("sync")

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.at is not None and end.at is not None
        return end.at - self.at


def test_wall_timer_times_each_call_with_its_clock() -> None:
    ticks = iter(range(0, 1000, 10))  # every clock() read advances 10 ns
    timer = WallTimer(clock=lambda: next(ticks))
    out = np.zeros(5)
    calls = []
    timer.burst(lambda: calls.append(1), 3, out, 2)
    assert out.tolist() == [0, 0, 10, 10, 10] and len(calls) == 3
    assert timer.prepare(print) is print
    assert timer.spec.mode == "eager"


def test_event_timer_charges_each_interval_to_its_call_and_waits_once() -> None:
    gpu = FakeGpu()
    costs = iter([0.002, 0.005, 0.003])  # ms

    def call() -> None:
        gpu.now_ms += next(costs)
        gpu.log.append("call")

    timer = EventTimer(event=gpu.event, stream=gpu.stream)
    out = np.zeros(3)
    timer.burst(call, 3, out, 0)
    assert out == pytest.approx([2000.0, 5000.0, 3000.0])  # ns
    assert gpu.log.count("sync") == 1 and gpu.log[-1] == "sync"  # one host wait, after the burst


def test_graph_timer_divides_replays_by_calls_per_graph_and_flushes_outside_the_timed_region() -> None:
    gpu = FakeGpu()
    captured: list[int] = []

    class Graph:
        def replay(self) -> None:
            gpu.now_ms += 0.040  # 10 calls of 4 us
            gpu.log.append("replay")

    def capture(call: object, k: int) -> Graph:
        captured.append(k)
        return Graph()

    def flusher() -> object:
        def flush() -> None:
            gpu.now_ms += 1.0  # a slow flush must not show in the figure
            gpu.log.append("flush")

        return flush

    timer = GraphTimer(10, True, capture=capture, flusher=flusher, event=gpu.event, stream=gpu.stream)
    replay = timer.prepare(lambda: None)
    assert captured == [10]
    out = np.zeros(4)
    timer.burst(replay, 4, out, 0)
    assert out == pytest.approx([4000.0] * 4)  # 40 us per replay / 10 calls
    assert gpu.log[:4] == ["flush", "record", "replay", "record"]
    assert timer.spec == TimingSpec("graph", 10, True) and timer.spec.mode == "graph"


def test_timing_spec_rejects_nonsense_and_describes_itself() -> None:
    with pytest.raises(ValueError, match="timer"):
        TimingSpec("sundial")
    with pytest.raises(ValueError, match="calls_per_graph"):
        TimingSpec("graph", 0)
    assert "L2 flushed" in TimingSpec("graph", 10, True).describe()
    assert "no L2 flush" in TimingSpec("graph", 10, False).describe()
    assert isinstance(make_timer(TimingSpec()), WallTimer)


def test_timed_loop_uses_the_timer_given() -> None:
    """The harness's rounds go through the timer: a fake one's figures are what come back."""

    class Constant:
        spec = TimingSpec("events")

        def prepare(self, call: object) -> object:
            return call

        def burst(self, call, n, out, first) -> None:  # type: ignore[no-untyped-def]
            for b in range(n):
                call()
                out[first + b] = 1234.0

    class Control:
        def barrier(self) -> None:
            pass

        def max(self, values: np.ndarray) -> np.ndarray:
            return values

    schedule = Schedule(budget_s=0.001, warmup_s=0.0, min_iters=6, max_iters=6, burst=3, settle=1)
    samples, failures = _timed_loop([lambda: None, lambda: None], 1e-6, schedule, Control(), Constant())  # type: ignore[arg-type]
    assert failures == [None, None]
    assert samples.shape == (2, 6) and (samples == 1234.0).all()
