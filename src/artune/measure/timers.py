"""How the harness times a call: the host's wall clock, CUDA events, or CUDA-graph replays.

A ``Timer`` turns a candidate's call into what is timed (``prepare``) and
times a burst of those (``burst``), writing one nanosecond figure per call.
The harness owns the schedule (warm-up, interleaved turns, agreement between
ranks); the timer owns only the clock.

- ``WallTimer`` (CPU): ``time.perf_counter_ns`` around each call. This is
  exactly what the harness always did.
- ``EventTimer`` (CUDA, eager mode; in ``artune.measure.cuda_timing``): events
  recorded on the current stream between the calls of a burst, one
  synchronisation per burst, so the host never waits between calls.
- ``GraphTimer`` (CUDA, graph mode, as engines run decode; also there):
  ``prepare`` warms the call up on a side stream, captures ``calls_per_graph``
  back-to-back calls in one ``torch.cuda.CUDAGraph``; a timed call is one
  replay timed with events, divided by ``calls_per_graph``. With
  ``flush_l2`` a buffer the size of L2 is overwritten before each replay,
  outside the timed region (SGLang's benchmark does; vLLM's does not).

``TimingSpec`` is the recorded description of the timer, so a measurement log
says how its figures were taken. This module is the leaf: the CUDA timers
import it, and ``artune.measure.harness.make_timer`` picks one for a spec.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

Call = Callable[[], object]

TIMERS = ("wall", "events", "graph")


@dataclass(frozen=True)
class TimingSpec:
    """How figures are taken: ``wall`` (CPU), ``events`` (CUDA eager) or ``graph`` (CUDA graph replays)."""

    timer: str = "wall"
    calls_per_graph: int = 10
    flush_l2: bool = False

    def __post_init__(self) -> None:
        if self.timer not in TIMERS:
            raise ValueError(f"TimingSpec: timer {self.timer!r} is not one of {', '.join(TIMERS)}")
        if self.calls_per_graph < 1:
            raise ValueError(f"TimingSpec: calls_per_graph must be >= 1, got {self.calls_per_graph}")

    @property
    def mode(self) -> str:
        """The dispatch mode these figures are for (``graph`` or ``eager``)."""
        return "graph" if self.timer == "graph" else "eager"

    def describe(self) -> str:
        """One line for logs and reports."""
        if self.timer == "graph":
            flush = "L2 flushed before each replay" if self.flush_l2 else "no L2 flush"
            return f"CUDA graph: {self.calls_per_graph} calls per graph, timed per replay with events, {flush}"
        if self.timer == "events":
            return "CUDA events on the current stream around each call, one synchronisation per burst"
        return "host wall clock (time.perf_counter_ns) around each call"


class Timer(Protocol):
    """What the harness needs from a clock."""

    spec: TimingSpec

    def prepare(self, call: Call) -> Call:
        """What is timed for ``call`` (the call itself, or a graph replay of it); may run it untimed."""
        ...

    def burst(self, call: Call, n: int, out: np.ndarray, first: int) -> None:
        """Run the prepared ``call`` ``n`` times, writing each call's nanoseconds to ``out[first:first+n]``."""
        ...


class WallTimer:
    """The host's clock around each call (CPU tensors: the call returns when the data is there)."""

    spec = TimingSpec("wall")

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.clock = clock

    def prepare(self, call: Call) -> Call:
        """The call itself."""
        return call

    def burst(self, call: Call, n: int, out: np.ndarray, first: int) -> None:
        """``clock()`` before and after each call."""
        clock = self.clock
        for b in range(n):
            start = clock()
            call()
            out[first + b] = clock() - start
