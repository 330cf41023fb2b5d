"""A synthetic bench: measurements from a cost model and a seeded noise generator.

It stands in for the measurement harness wherever timing noise must not
decide the outcome: the tuner's tests (known crossovers, known noise, wrong
candidates, tunables) and dry runs of the report. Each algorithm has a cost
function ``cost(size_bytes, params) -> microseconds``; every sample is that
cost times ``1 + noise * N(0, 1)`` (clipped to stay positive), and a call
takes as many samples as fit its budget (like the harness, within
``[min_samples, max_samples]``). Every call is recorded in ``calls`` so tests
can see exactly what was measured.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from artune.measure.records import Candidate, Measurement
from artune.table.model import ParamValue

Cost = Callable[[int, Mapping[str, ParamValue]], float]


def linear_cost(latency_us: float, gbps: float) -> Cost:
    """``latency + size / bandwidth``: the alpha-beta model of one all-reduce."""
    return lambda size, params: latency_us + size / (gbps * 1e3)


@dataclass
class SyntheticBench:
    """A ``Bench`` whose measurements come from ``costs`` with relative noise ``noise``."""

    costs: Mapping[str, Cost]
    noise: float = 0.02
    seed: int = 0
    min_samples: int = 10
    max_samples: int = 200
    world_size: int = 2
    dtype: str = "float32"
    baseline: str = "gloo"
    mode: str = "eager"
    params: Mapping[str, Mapping[str, tuple[ParamValue, ...]]] = field(default_factory=dict)
    wrong: Callable[[Candidate, int], bool] = lambda candidate, size: False
    failing: Callable[[Candidate, int], str] = lambda candidate, size: ""  # a status, or "" when it runs
    calls: list[tuple[tuple[Candidate, ...], tuple[int, ...], float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The baseline first, then the modelled algorithms in the order given."""
        return tuple(dict.fromkeys([self.baseline, *self.costs]))

    def tunables(self, name: str) -> dict[str, tuple[ParamValue, ...]]:
        """The declared tunables of ``name``."""
        return dict(self.params.get(name, {}))

    def measure(
        self, candidates: Sequence[Candidate], sizes: Sequence[int], budget_s: float, max_iters: int | None = None
    ) -> list[Measurement]:
        """Every candidate at every size, in the harness's order (size-major)."""
        self.calls.append((tuple(candidates), tuple(sizes), budget_s))
        out = []
        for size in sizes:
            round_us = sum(self.costs[c.algorithm](size, c.params_dict) for c in candidates)
            iters = int(min(self.max_samples, max(self.min_samples, budget_s / len(sizes) * 1e6 / round_us)))
            if max_iters is not None:
                iters = max(self.min_samples, min(iters, max_iters))
            for cand in candidates:
                out.append(self._one(cand, size, iters))
        return out

    def _one(self, cand: Candidate, size: int, iters: int) -> Measurement:
        status = self.failing(cand, size)
        nwrong = size // 4 if self.wrong(cand, size) else 0
        if status:
            return Measurement(cand, size, self.dtype, self.world_size, (), nwrong, status, "synthetic failure")
        base = self.costs[cand.algorithm](size, cand.params_dict)
        samples = tuple(max(base * 0.05, base * (1.0 + self.noise * self._rng.gauss(0.0, 1.0))) for _ in range(iters))
        return Measurement(cand, size, self.dtype, self.world_size, samples, nwrong, "ok")
