"""Where the tuner's measurements come from: the ``Measurer`` protocol and its resumable cache.

A ``Measurer`` measures candidates at sizes and says which algorithms and
tunables there are. ``CommMeasurer`` is the real one (the measurement harness
on a Communicator); tests use ``artune.tune.synthetic.SyntheticMeasurer``.

``CachedMeasurer`` wraps a bench with what a run already knows (the
measurement log): a (candidate, size) whose key is known is never measured
again, and new measurements are handed to ``record`` (rank 0 appends them to
the log). Each size is one harness call with every missing candidate
interleaved (the harness measures sizes one after the other anyway; one call
per size lets each size have its own iteration cap and progress step).
What it returns is ``Pooled``: every call that timed the candidate at that
size so far. ``more`` adds one call where a decision was unsure; the log
keeps every call, in order, so a rerun over it takes the n-th call of a key
from the log where this run asks for it the n-th time.

Budgets must be identical on every rank (the harness derives iteration
counts from them). So the time a call took is *agreed*: a bench with an
``agree(seconds)`` that answers (``CommMeasurer``: rank 0's wall time, broadcast)
supplies it, otherwise it is estimated from the samples (``call_cost``),
which are identical on every rank. Two corrections keep a noisy machine
within its budget: the iteration count is capped from the mean time the
candidates took at nearby sizes already measured (the harness sizes its
iterations from the median of a few calls, and a heavy-tailed machine's mean
is much higher), and while calls overrun on average, later calls are handed
proportionally less.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from artune.measure.records import Candidate, Measurement, measurement_key
from artune.table.types import ParamValue
from artune.tune.compare import Pooled

if TYPE_CHECKING:
    from artune.communicator import Communicator

log = logging.getLogger(__name__)

MIN_CALL_BUDGET_S = 0.02
MAX_OVERSHOOT = 4.0
MIN_ITERS = 10  # the harness's own floor
WARMUP_SHARE = 0.1  # the harness warms up for a tenth of the timed budget
CALL_OVERHEAD_S = 0.01  # per measurement: correctness check and cost estimate


def call_cost(measurements: Sequence[Measurement]) -> float:
    """Seconds a harness call took, estimated from its samples: identical on every rank.

    The timed samples (slowest rank per iteration) plus the warm-up share,
    plus a small fixed overhead per measurement for the check and estimate.
    """
    timed = sum(sum(m.samples_us) for m in measurements) * 1e-6
    return timed * (1.0 + WARMUP_SHARE) + CALL_OVERHEAD_S * len(measurements)


class Measurer(Protocol):
    """A source of measurements for one world size and dtype (sum): what the tuner asks of a machine.

    ``mode`` is the dispatch mode measured (``eager``, or ``graph`` on CUDA),
    ``hosts`` how many hosts the ranks span (the plan is for that topology).
    """

    world_size: int
    dtype: str
    baseline: str
    mode: str
    hosts: int

    @property
    def algorithms(self) -> tuple[str, ...]:
        """Algorithms that can reduce ``dtype`` here, simplest first (the baseline first)."""
        ...

    def tunables(self, name: str) -> dict[str, tuple[ParamValue, ...]]:
        """Declared parameters of ``name`` and their candidate values (empty: none)."""
        ...

    def measure(
        self, candidates: Sequence[Candidate], sizes: Sequence[int], budget_s: float, max_iters: int | None = None
    ) -> list[Measurement]:
        """Every candidate at every size, interleaved, in about ``budget_s`` seconds in all (collective);
        at most ``max_iters`` timed rounds per size when given."""
        ...

    def agree(self, seconds: float) -> float | None:
        """The seconds a call took as every rank counts them (``seconds``: this rank's wall time; collective),
        or ``None`` to count them from the samples (``call_cost``)."""
        ...


#: what a run's journal gets per harness call: the phase, the size, the keys measured, the seconds counted
Journal = Callable[[str, int, tuple[str, ...], float], None]


class Progress(Protocol):
    """Where a run reports how far it is (budget seconds spent)."""

    def phase(self, description: str) -> None: ...

    def advance(self, seconds: float) -> None: ...


class NoProgress:
    """A progress sink that shows nothing (ranks other than 0, tests)."""

    def phase(self, description: str) -> None:
        """Ignore."""

    def advance(self, seconds: float) -> None:
        """Ignore."""


class CachedMeasurer:
    """A bench that reuses known measurements, records new ones and accounts the time spent."""

    def __init__(
        self,
        bench: Measurer,
        known: Iterable[Measurement] = (),
        record: Callable[[Measurement], None] | None = None,
        progress: Progress | None = None,
        redop: str = "sum",
        journal: Journal | None = None,
    ) -> None:
        self.bench = bench
        self.world_size = bench.world_size
        self.hosts = bench.hosts  # ranks across hosts: the plan is for that topology
        self.dtype = bench.dtype
        self.baseline = bench.baseline
        self.mode = bench.mode
        self.redop = redop
        self.record = record
        self.journal = journal  # rank 0: every call's counted seconds, so a replay budgets exactly alike
        self.progress: Progress = progress or NoProgress()
        self._known: dict[str, list[Measurement]] = {}
        for m in known:
            self._known.setdefault(m.key, []).append(m)
        self._from_log = {key: len(ms) for key, ms in self._known.items()}
        self._used: dict[str, int] = {}  # key -> how many of its calls this run has used, in order of first use
        self._pooled: dict[tuple[str, int], Pooled] = {}
        self.measured = 0  # measurements taken by this run
        self.calls = 0
        self.remeasured = 0  # calls taken again (``more``) where a decision was unsure
        self.spent_by_phase: dict[str, float] = {}  # budget seconds per ``phase``
        self._phase = ""
        self.spent_s = 0.0  # seconds of measuring, from the samples (identical on every rank)
        self.wall_s = 0.0  # this rank's wall time inside the harness (for reports only, never for decisions)
        self._requested_s = 0.0
        self._cost_s = 0.0

    def phase(self, name: str) -> None:
        """Count what follows against phase ``name`` (and show it on the progress bar)."""
        self._phase = name
        self.progress.phase(name)

    @property
    def overshoot(self) -> float:
        """How much longer calls took than asked so far (from samples; 1 to 4): budgets are divided by it."""
        if self._requested_s <= 0:
            return 1.0
        return min(MAX_OVERSHOOT, max(1.0, self._cost_s / self._requested_s))

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The wrapped bench's algorithms."""
        return self.bench.algorithms

    def tunables(self, name: str) -> dict[str, tuple[ParamValue, ...]]:
        """The wrapped bench's tunables."""
        return self.bench.tunables(name)

    def key(self, candidate: Candidate, size: int) -> str:
        """The measurement key of ``candidate`` at ``size`` on this bench."""
        return measurement_key(candidate, size, self.dtype, self.redop, self.world_size)

    def get(self, candidate: Candidate, size: int) -> Pooled | None:
        """What this run used of ``candidate`` at ``size`` so far, or ``None``."""
        key = self.key(candidate, size)
        used = self._used.get(key, 0)
        if not used:
            return None
        found = self._pooled.get((key, used))
        if found is None:  # one object per state: its medians are computed once
            found = self._pooled[(key, used)] = Pooled(tuple(self._known[key][:used]))
        return found

    @property
    def reused(self) -> int:
        """How many measurements this run took from the log instead of measuring them."""
        return sum(min(n, self._from_log.get(key, 0)) for key, n in self._used.items())

    def used(self) -> list[Measurement]:
        """Every measurement (call) this run used, new or reused, keys in order of first use."""
        return [m for key, n in self._used.items() for m in self._known[key][:n]]

    def measure(self, candidates: Sequence[Candidate], sizes: Sequence[int], budget_s: float) -> list[Pooled]:
        """Each candidate at each size; only pairs this run has not used yet are measured (or taken from the
        log), with their share of ``budget_s``."""
        candidates = list(dict.fromkeys(candidates))
        sizes = list(dict.fromkeys(sizes))
        pairs = max(1, len(candidates) * len(sizes))
        for size in sizes:
            fresh = [c for c in candidates if self._used.get(self.key(c, size), 0) == 0]
            self._take(fresh, size, budget_s * len(fresh) / pairs)
        return [self._evidence(c, s) for s in sizes for c in candidates]

    def together(self, candidates: Sequence[Candidate], size: int, budget_s: float) -> list[Pooled]:
        """Each candidate at ``size`` with one harness call at least that timed them all, interleaved: what
        is known when there is one, else one more call of them all (the first for those not measured yet),
        so a comparison of any two of them is paired."""
        candidates = list(dict.fromkeys(candidates))
        known = [self.get(c, size) for c in candidates]
        if all(e is None for e in known):
            return self.measure(candidates, [size], budget_s)
        if all(e is not None for e in known):
            shared = set.intersection(*({m.call for m in e.calls if m.call} for e in known if e is not None))
            if shared:
                return [e for e in known if e is not None]
        return self.more(candidates, size, budget_s)

    def more(self, candidates: Sequence[Candidate], size: int, budget_s: float) -> list[Pooled]:
        """One more call of ``candidates`` at ``size``, interleaved (each one's next call from the log, when
        there is one): where a decision was unsure."""
        candidates = list(dict.fromkeys(candidates))
        self._take(candidates, size, budget_s)
        self.remeasured += 1
        return [self._evidence(c, size) for c in candidates]

    def _take(self, candidates: list[Candidate], size: int, budget_s: float) -> None:
        """The next call of each of ``candidates`` at ``size``: from the log when it has one, else measured
        (every missing one in one harness call)."""
        if not candidates:
            return
        keys = [self.key(c, size) for c in candidates]
        missing = [
            c for c, k in zip(candidates, keys, strict=True) if self._used.get(k, 0) >= len(self._known.get(k, ()))
        ]
        if missing:
            self._measure_one(missing, size, budget_s * len(missing) / len(candidates))
        for k in keys:
            self._used[k] = self._used.get(k, 0) + 1

    def _evidence(self, candidate: Candidate, size: int) -> Pooled:
        found = self.get(candidate, size)
        if found is None:
            raise RuntimeError(f"CachedMeasurer: the bench returned no measurement for {self.key(candidate, size)}")
        return found

    def _measure_one(self, missing: list[Candidate], size: int, share: float) -> None:
        share = max(MIN_CALL_BUDGET_S, share)
        handed = share / self.overshoot
        predicted = [self.predict_us(c, size) for c in missing]
        cap = None
        if all(p is not None for p in predicted):
            cap = max(MIN_ITERS, int(handed * 1e6 / sum(predicted)))  # type: ignore[arg-type]
        started = time.monotonic()
        got = self.bench.measure(missing, [size], handed, cap)
        wall = time.monotonic() - started
        agreed = self.bench.agree(wall)
        spent = float(agreed) if agreed is not None else call_cost(got)
        self.calls += 1
        self.wall_s += wall
        self.spent_s += spent
        self.spent_by_phase[self._phase] = self.spent_by_phase.get(self._phase, 0.0) + spent
        self._requested_s += handed
        self._cost_s += spent
        self.progress.advance(spent)
        log.debug(
            "measured %s at %d: %.3fs asked, %.3fs handed, cap %s, %.3fs spent, %.3fs wall",
            ",".join(c.key for c in missing),
            size,
            share,
            handed,
            cap,
            spent,
            wall,
        )
        if self.journal is not None:
            self.journal(self._phase, size, tuple(self.key(c, size) for c in missing), spent)
        for m in got:
            # decide on what the log keeps (microseconds to 3 decimals), so a rerun over it decides the same
            m = replace(m, samples_us=tuple(np.round(np.asarray(m.samples_us, dtype=np.float64), 3).tolist()))
            self._known.setdefault(m.key, []).append(m)
            self.measured += 1
            if self.record is not None:
                self.record(m)

    def predict_us(self, candidate: Candidate, size: int) -> float | None:
        """The mean time per call of ``candidate`` at ``size`` from the nearest sizes measured (same
        algorithm), interpolated on log-log axes; ``None`` when there is nothing to go by."""
        points: dict[int, float] = {}
        for m in (m for calls in self._known.values() for m in calls):
            same = m.candidate.algorithm == candidate.algorithm and m.samples_us and m.status == "ok"
            if same and (m.size_bytes not in points or m.candidate == candidate):
                points[m.size_bytes] = sum(m.samples_us) / len(m.samples_us)
        if not points:
            return None
        sizes = sorted(points)
        if size <= sizes[0]:
            return points[sizes[0]]
        if size >= sizes[-1]:
            return points[sizes[-1]]  # flat: never predicts too much, so never caps too hard
        upper = next(s for s in sizes if s >= size)
        lower = max(s for s in sizes if s <= size)
        if upper == lower:
            return points[lower]
        f = math.log(size / lower) / math.log(upper / lower)
        return math.exp((1 - f) * math.log(points[lower]) + f * math.log(points[upper]))


class CommMeasurer:
    """The real bench: the measurement harness over a Communicator, fp32 sum.

    ``device="cuda"`` measures CUDA tensors with ``timing`` (a
    ``TimingSpec``: CUDA events for eager, graph replays for graph mode); the
    baseline is then the process group for CUDA (NCCL).
    """

    def __init__(
        self, comm: Communicator, dtype: str = "float32", check: bool = True, device: str = "cpu", timing: Any = None
    ) -> None:
        import torch

        from artune.measure.harness import make_timer
        from artune.measure.timers import TimingSpec

        self.comm = comm
        self.world_size = comm.world_size
        self.hosts: int = comm.hosts
        self.dtype = dtype
        self.check = check
        self.device = device
        self.timing = timing if timing is not None else TimingSpec("wall" if device == "cpu" else "events")
        self.mode = self.timing.mode
        self._timer = make_timer(self.timing)
        self._torch_dtype = getattr(torch, dtype)
        self.baseline = comm.baseline_for(device)
        usable = comm.available(self._torch_dtype, "sum", device, self.mode)
        names = [self.baseline, *comm.algorithms]
        self._algorithms = tuple(n for n in dict.fromkeys(names) if n in usable)

    @property
    def algorithms(self) -> tuple[str, ...]:
        """Algorithms that reduce this dtype here, the process group first."""
        return self._algorithms

    def tunables(self, name: str) -> dict[str, tuple[ParamValue, ...]]:
        """The algorithm's declared parameters."""
        return {k: tuple(v) for k, v in self.comm.tunables(name).items()}  # type: ignore[misc]

    def measure(
        self, candidates: Sequence[Candidate], sizes: Sequence[int], budget_s: float, max_iters: int | None = None
    ) -> list[Measurement]:
        """One collective harness call; ``budget_s`` is shared by the sizes (the harness's is per size)."""
        from artune.measure.harness import measure

        return measure(
            self.comm,
            list(candidates),
            list(sizes),
            dtype=self._torch_dtype,
            budget_s=max(1e-3, budget_s / max(1, len(sizes))),
            max_iters=max(MIN_ITERS, max_iters) if max_iters is not None else 20_000,
            check=self.check,
            device=self.device,
            timer=self._timer,
        )

    def agree(self, seconds: float) -> float:
        """Rank 0's ``seconds``, on every rank (how long a call took, for the budget)."""
        import torch
        import torch.distributed as dist

        group = getattr(self.comm, "group", None)
        value = torch.tensor([seconds], dtype=torch.float64)
        dist.broadcast(value, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
        return float(value.item())
