"""A synthetic bench: measurements from a cost model and a seeded model of a noisy machine.

It stands in for the measurement harness wherever timing noise must not
decide the outcome: the tuner's tests (known crossovers, known noise, wrong
candidates, tunables) and dry runs of the report. Each algorithm has a cost
function ``cost(size_bytes, params) -> microseconds``. A call is timed the
way the harness times it: rounds of turns, each candidate ``burst`` calls in
turn, odd rounds in reverse order, as many rounds as fit the budget (within
``[min_samples, max_samples]`` samples). Each call's time is its cost times

- ``1 + noise * N(0, 1)`` per rank (clipped to stay positive);
- the machine's speed, ``exp(x)``, where ``x`` drifts from turn to turn
  (an AR(1) walk of standard deviation ``drift`` whose correlation lasts
  about ``drift_turns`` turns), shared by every candidate and every rank, and
  carried from one call to the next (``drift``);
- with probability ``tail`` per rank, a spike of ``1 + tail_scale * P``
  where ``P`` is Pareto-distributed with infinite variance (a descheduled
  rank: heavy tails);
- ``1 + slow_rank`` on the last rank;

and a sample is the slowest rank's time, as the harness records it. With
``slow_share``, a call is in the machine's other regime with that
probability (a whole call, as a shared machine's states are), and then an
algorithm with a cost in ``slow_costs`` takes that cost instead. Every
call is recorded in ``calls`` so tests can see exactly what was measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from artune.measure.records import Candidate, Measurement
from artune.table.types import ParamValue

Cost = Callable[[int, Mapping[str, ParamValue]], float]

TAIL_SHAPE = 1.5  # Pareto shape: a finite mean, an infinite variance


def linear_cost(latency_us: float, gbps: float) -> Cost:
    """``latency + size / bandwidth``: the alpha-beta model of one all-reduce."""
    return lambda size, params: latency_us + size / (gbps * 1e3)


@dataclass
class SyntheticMeasurer:
    """A ``Measurer`` whose measurements come from ``costs`` on a modelled noisy machine (see the module)."""

    costs: Mapping[str, Cost]
    noise: float = 0.02
    seed: int = 0
    min_samples: int = 10
    max_samples: int = 200
    world_size: int = 2
    dtype: str = "float32"
    baseline: str = "gloo"
    mode: str = "eager"
    hosts: int = 1
    params: Mapping[str, Mapping[str, tuple[ParamValue, ...]]] = field(default_factory=dict)
    wrong: Callable[[Candidate, int], bool] = lambda candidate, size: False
    failing: Callable[[Candidate, int], str] = lambda candidate, size: ""  # a status, or "" when it runs
    burst: int = 3
    drift: float = 0.0
    drift_turns: float = 50.0
    tail: float = 0.0
    tail_scale: float = 1.0
    slow_rank: float = 0.0
    slow_costs: Mapping[str, Cost] = field(default_factory=dict)
    slow_share: float = 0.0
    calls: list[tuple[tuple[Candidate, ...], tuple[int, ...], float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng(self.seed)
        self._x = 0.0  # the machine's log speed now

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The baseline first, then the modelled algorithms in the order given."""
        return tuple(dict.fromkeys([self.baseline, *self.costs]))

    def tunables(self, name: str) -> dict[str, tuple[ParamValue, ...]]:
        """The declared tunables of ``name``."""
        return dict(self.params.get(name, {}))

    def agree(self, seconds: float) -> float | None:
        """``None``: a modelled call's seconds are counted from its samples."""
        return None

    def measure(
        self, candidates: Sequence[Candidate], sizes: Sequence[int], budget_s: float, max_iters: int | None = None
    ) -> list[Measurement]:
        """Every candidate at every size, in the harness's order (size-major)."""
        self.calls.append((tuple(candidates), tuple(sizes), budget_s))
        out = []
        for size in sizes:
            call = f"synthetic-{len(self.calls)}-{size}"
            status = {c: self.failing(c, size) for c in candidates}
            live = [c for c in candidates if not status[c]]
            regime = self.slow_costs if self.slow_share and self._rng.random() < self.slow_share else {}
            costs = [regime.get(c.algorithm, self.costs[c.algorithm])(size, c.params_dict) for c in live]
            round_us = max(sum(costs), 1e-9)
            iters = int(min(self.max_samples, max(self.min_samples, budget_s / len(sizes) * 1e6 / round_us)))
            if max_iters is not None:
                iters = max(self.min_samples, min(iters, max_iters))
            samples = self._timed(costs, math.ceil(iters / self.burst)) if live else {}
            rows = dict(zip(live, samples, strict=True)) if live else {}
            for cand in candidates:
                nwrong = size // 4 if self.wrong(cand, size) else 0
                if status[cand]:
                    m = Measurement(
                        cand, size, self.dtype, self.world_size, (), nwrong, status[cand], "synthetic failure"
                    )
                else:
                    m = Measurement(
                        cand, size, self.dtype, self.world_size, rows[cand], nwrong, "ok", burst=self.burst, call=call
                    )
                out.append(m)
        return out

    def _timed(self, costs: list[float], rounds: int) -> list[tuple[float, ...]]:
        """``rounds`` rounds of turns of every cost: each one's samples, in time order."""
        k, b, w = len(costs), self.burst, max(1, self.world_size)
        turns = rounds * k
        # the machine's speed per turn: an AR(1) walk in log space, continued from the last call
        rho = math.exp(-1.0 / max(self.drift_turns, 1e-9))
        steps = self._rng.standard_normal(turns) * self.drift * math.sqrt(1.0 - rho * rho)
        speed = []
        x = self._x
        for step in steps.tolist():
            x = rho * x + step
            speed.append(x)
        self._x = x
        per_rank = 1.0 + self.noise * self._rng.standard_normal((turns, b, w))
        if self.tail > 0:
            hit = self._rng.random((turns, b, w)) < self.tail
            per_rank *= np.where(hit, 1.0 + self.tail_scale * self._rng.pareto(TAIL_SHAPE, (turns, b, w)), 1.0)
        if self.slow_rank:
            per_rank[:, :, -1] *= 1.0 + self.slow_rank
        factor = np.maximum(per_rank, 0.05).max(axis=2) * np.exp(speed)[:, None]  # the slowest rank per call
        # turn t of round r belongs to candidate t % k, or k - 1 - t % k in odd rounds (reversed order)
        slot = np.arange(turns) % k
        owner = np.where((np.arange(turns) // k) % 2 == 0, slot, k - 1 - slot)
        out = np.empty((k, rounds, b))
        out[owner, np.arange(turns) // k] = factor * np.asarray(costs)[owner][:, None]
        return [tuple(row.ravel().tolist()) for row in out]
