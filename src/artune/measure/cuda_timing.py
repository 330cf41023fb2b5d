"""CUDA timers: events on the current stream (eager) and CUDA-graph replays (graph).

Where this has run: docs/status.md.

``artune.measure.harness.make_timer`` chooses them; torch is imported only
when one runs. The event and stream factories are parameters so that the
arithmetic (which events bracket which call, the division by calls per
graph, where the L2 flush goes) is tested on CPU with a fake clock; on a GPU
they are ``torch.cuda.Event(enable_timing=True)`` and
``torch.cuda.current_stream``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from artune.measure.timers import Call, TimingSpec

#: graph-mode warm-up calls on a side stream before capture (collective: every rank runs as many)
WARMUP_CALLS = 3


def _cuda_event() -> Any:
    import torch

    return torch.cuda.Event(enable_timing=True)


def _current_stream() -> Any:
    import torch

    return torch.cuda.current_stream()


class EventTimer:
    """Events recorded on the current stream between the calls of a burst; one host wait per burst.

    Event ``b`` is recorded before call ``b`` and event ``b + 1`` after it, so
    the gap between calls (the host's dispatch, when the GPU runs ahead of
    it) is charged to the next call, as an eager engine would pay it.
    """

    spec = TimingSpec("events")

    def __init__(self, event: Callable[[], Any] = _cuda_event, stream: Callable[[], Any] = _current_stream) -> None:
        self._event = event
        self._stream = stream
        self._events: list[Any] = []

    def _take(self, n: int) -> list[Any]:
        while len(self._events) < n:
            self._events.append(self._event())
        return self._events[:n]

    def prepare(self, call: Call) -> Call:
        """The call itself."""
        return call

    def burst(self, call: Call, n: int, out: np.ndarray, first: int) -> None:
        """``n`` calls between ``n + 1`` events; milliseconds from ``elapsed_time`` become nanoseconds."""
        events = self._take(n + 1)
        stream = self._stream()
        events[0].record(stream)
        for b in range(n):
            call()
            events[b + 1].record(stream)
        events[n].synchronize()
        for b in range(n):
            out[first + b] = events[b].elapsed_time(events[b + 1]) * 1e6


class _Replay:
    """One captured graph of ``k`` calls: calling it replays the graph."""

    def __init__(self, graph: Any, k: int, before: Callable[[], object] | None) -> None:
        self.graph = graph
        self.k = k
        self.before = before

    def __call__(self) -> None:
        self.graph.replay()


def _capture(call: Call, k: int) -> Any:
    """Warm ``call`` up on a side stream, then capture ``k`` back-to-back calls in one CUDA graph."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP_CALLS):
            call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    # thread_local: other threads (NCCL's watchdog) may keep using CUDA while this thread captures
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for _ in range(k):
            call()
    torch.cuda.synchronize()
    return graph


def _l2_flusher() -> Callable[[], object]:
    """Overwrite twice the L2 cache of the current device (SGLang's benchmark flushes L2 before each replay)."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = int(getattr(props, "L2_cache_size", 0) or (128 << 20))
    scratch = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    return scratch.zero_


class GraphTimer:
    """Captured graphs of ``calls_per_graph`` calls, timed per replay with events (graph mode).

    ``capture(call, k)`` and the event/stream factories are parameters for
    the CPU tests; the defaults use ``torch.cuda``.
    """

    def __init__(
        self,
        calls_per_graph: int = 10,
        flush_l2: bool = False,
        *,
        capture: Callable[[Call, int], Any] = _capture,
        flusher: Callable[[], Callable[[], object]] = _l2_flusher,
        event: Callable[[], Any] = _cuda_event,
        stream: Callable[[], Any] = _current_stream,
    ) -> None:
        self.spec = TimingSpec("graph", calls_per_graph, flush_l2)
        self._capture = capture
        self._flush = flusher() if flush_l2 else None
        self._event = event
        self._stream = stream
        self._events: list[Any] = []

    def prepare(self, call: Call) -> _Replay:
        """Capture ``calls_per_graph`` calls of ``call`` (after a warm-up on a side stream)."""
        k = self.spec.calls_per_graph
        return _Replay(self._capture(call, k), k, self._flush)

    def burst(self, call: Call, n: int, out: np.ndarray, first: int) -> None:
        """``n`` replays, each between its own two events (a flush, when on, runs before the first)."""
        k = getattr(call, "k", 1)
        before = getattr(call, "before", None)
        while len(self._events) < 2 * n:
            self._events.append(self._event())
        events = self._events
        stream = self._stream()
        for b in range(n):
            if before is not None:
                before()
            events[2 * b].record(stream)
            call()
            events[2 * b + 1].record(stream)
        events[2 * n - 1].synchronize()
        for b in range(n):
            out[first + b] = events[2 * b].elapsed_time(events[2 * b + 1]) * 1e6 / k
