"""The GPU cost model: the forms with parameters from hardware figures and a few calibrated factors.

A ``Hardware`` is what a preset (``presets.toml``) or a user's TOML says of
one GPU: NVLink bandwidth per direction, the per-round latency of a
peer-memory synchronisation (graph mode), the per-call overhead, SM count,
multicast. ``Factors`` are what is calibrated across GPUs on published data
(``bench/calibrate_gpu.py``): how much of the link each kernel family reaches,
how much slower a round is in eager mode, and a multicast operation's
latency in rounds. The four algorithms, with SGLang's names:

- ``1shot_push`` (form ``one_shot``): overhead + round + (p-1) n / (B eta1);
- ``2shot_pull`` (``two_shot``): overhead + 2 rounds + 2 (p-1)/p n / (B eta2);
- ``2shot_pull_mc`` (``multicast``, where the hardware has it):
  overhead + c_mc rounds + n / (B eta_mc);
- ``nccl`` (``ring``, NCCL's own model from its ``tuning.cc`` figures):
  the fastest of ring LL / LL128 / Simple (and NVLS with multicast):
  base + 2 (p-1) hop latency + bytes / bus bandwidth.

Uncertainty: each calibrated figure carries its bootstrap 5-95% interval;
replicates draw each figure independently from a log-normal with that
interval (correlations between figures are dropped, which widens the band).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from artune.model.cost import VERSION
from artune.model.forms import FORMS, Context

REPLICATES = 200
SEED = 7
_Z90 = 1.6449  # a 5-95% interval spans 2 x 1.645 standard deviations
# NCCL's tuning.cc figures (us): base latency per protocol, NVLink per-step latency, bandwidth factor
_NCCL_RING = {"LL": (6.6, 0.6, 0.5), "LL128": (14.0, 1.9, 0.92), "Simple": (8.4, 3.4, 1.0)}
_NCCL_NVLS_HW_US = 25.0


@dataclass(frozen=True)
class Figure:
    """A value with its 5-95% interval (``lo == hi == value`` when exact)."""

    value: float
    lo: float
    hi: float

    @classmethod
    def exact(cls, value: float) -> Figure:
        return cls(value, value, value)

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` log-normal draws centred on ``value`` with this interval (the value itself when exact)."""
        if self.lo >= self.hi or self.value <= 0:
            return np.full(count, self.value)
        sigma = math.log(self.hi / self.lo) / (2 * _Z90)
        return self.value * np.exp(rng.normal(0.0, sigma, count))


@dataclass(frozen=True)
class Factors:
    """Calibrated across GPUs: link efficiencies, eager round factor, multicast latency in rounds."""

    eta_one: Figure
    eta_two: Figure
    eta_mc: Figure
    eager_round: Figure
    mc_rounds: Figure
    eta_ring: Figure
    source: str = ""


@dataclass(frozen=True)
class Hardware:
    """One GPU's figures, each with where it comes from (``sources``)."""

    name: str
    arch: str
    device: str
    nvlink_GBps: float  # per GPU, per direction
    round_us: Figure  # one peer-memory synchronisation round, graph mode
    overhead_us: float  # per call, graph mode
    eager_overhead_us: float  # added per call in eager mode (launch)
    sms: int | None
    multicast: bool
    factors: Factors
    sources: tuple[str, ...] = ()

    def with_factors(self, factors: Factors) -> Hardware:
        return replace(self, factors=factors)


ALGORITHMS = ("1shot_push", "2shot_pull", "2shot_pull_mc", "nccl")


class HardwareModel:
    """Predicts the GPU algorithms from a ``Hardware``; the ``Predictor`` ``artune.model.plan`` needs."""

    kind = "cuda"
    baseline = "nccl"
    version = VERSION
    open_ended = False  # as the engines' tables: NCCL above the largest size planned

    def __init__(self, hardware: Hardware, replicates: int = REPLICATES, seed: int = SEED) -> None:
        self.hw = hardware
        self.arch = hardware.arch
        self.device = hardware.device
        self.inputs = (
            f"preset {hardware.name}: NVLink {hardware.nvlink_GBps:g} GB/s per direction, "
            f"round {hardware.round_us.value:.3g} us, overhead {hardware.overhead_us:g} us, "
            f"multicast {'yes' if hardware.multicast else 'no'}; factors {hardware.factors.source}"
        )
        rng = np.random.default_rng(seed)
        f = hardware.factors
        self._draws = {
            "round": hardware.round_us.draw(rng, replicates),
            "eta_one": f.eta_one.draw(rng, replicates),
            "eta_two": f.eta_two.draw(rng, replicates),
            "eta_mc": f.eta_mc.draw(rng, replicates),
            "eager": f.eager_round.draw(rng, replicates),
            "mc_rounds": f.mc_rounds.draw(rng, replicates),
            "eta_ring": f.eta_ring.draw(rng, replicates),
        }
        self._point = {
            "round": np.array([hardware.round_us.value]),
            "eta_one": np.array([f.eta_one.value]),
            "eta_two": np.array([f.eta_two.value]),
            "eta_mc": np.array([f.eta_mc.value]),
            "eager": np.array([f.eager_round.value]),
            "mc_rounds": np.array([f.mc_rounds.value]),
            "eta_ring": np.array([f.eta_ring.value]),
        }

    def refusal(self, world_size: int) -> str | None:
        """The GPU model refuses only world sizes below 2 (one NVLink domain is assumed)."""
        return None if world_size >= 2 else f"world size {world_size}: an all-reduce needs at least 2 ranks"

    def candidates(self, world_size: int, mode: str) -> list[str]:
        """The algorithms this hardware runs (multicast only where it exists)."""
        return [a for a in ALGORITHMS if a != "2shot_pull_mc" or self.hw.multicast]

    def params(self) -> dict[str, dict[str, int | str]]:
        """Kernel grid sizes for SGLang's algorithms (SM count where the preset gives it)."""
        sms: int | str = self.hw.sms if self.hw.sms else "sms"
        pull: int | str = min(192, self.hw.sms) if self.hw.sms else "min(192,sms)"
        return {"1shot_push": {"blocks": sms}, "2shot_pull": {"blocks": pull}, "2shot_pull_mc": {"blocks": pull}}

    def _theta(self, algorithm: str, world_size: int, mode: str, d: dict[str, np.ndarray]) -> np.ndarray:
        """Per replicate, the form's parameter vector (overhead, round, us per MB of peer bytes)."""
        b = self.hw.nvlink_GBps * 1e3  # bytes per us
        over = self.hw.overhead_us + (self.hw.eager_overhead_us if mode == "eager" else 0.0)
        rnd = d["round"] * (d["eager"] if mode == "eager" else 1.0)
        ones = np.ones_like(rnd)
        if algorithm == "1shot_push":
            return np.column_stack([over * ones, rnd, 1e6 / (b * d["eta_one"])])
        if algorithm == "2shot_pull":
            return np.column_stack([over * ones, rnd, 1e6 / (b * d["eta_two"])])
        if algorithm == "2shot_pull_mc":
            return np.column_stack([over * ones, rnd * d["mc_rounds"], 1e6 / (b * d["eta_mc"])])
        raise KeyError(algorithm)

    def _nccl_lines(self, world_size: int, mode: str, d: dict[str, np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        """NCCL's own cost model, one line ``(us, us per byte)`` per protocol, per replicate."""
        b = self.hw.nvlink_GBps * 1e3 * d["eta_ring"]
        over = self.hw.overhead_us + (self.hw.eager_overhead_us if mode == "eager" else 0.0)
        steps = 2 * (world_size - 1)
        bus = 2 * (world_size - 1) / world_size
        lines = [(over + base + steps * hop + 0 * b, bus / (b * factor)) for base, hop, factor in _NCCL_RING.values()]
        if self.hw.multicast:
            lines.append((over + _NCCL_NVLS_HW_US + 0 * b, 1.0 / (self.hw.nvlink_GBps * 1e3 * d["eta_mc"])))
        return lines

    def lines(self, algorithm: str, world_size: int, mode: str = "graph") -> list[tuple[float, float]]:
        """The central prediction as straight lines ``(us at 0 bytes, us per byte)``; NCCL is their minimum."""
        if algorithm == "nccl":
            return [(float(a[0]), float(s[0])) for a, s in self._nccl_lines(world_size, mode, self._point)]
        t0, t1 = self._predict(algorithm, world_size, [0, 1_000_000], mode, self._point)[0]
        return [(float(t0), float(t1 - t0) / 1e6)]

    def _predict(self, algorithm: str, world_size: int, sizes: Sequence[int], mode: str, d: dict[str, np.ndarray]):
        n = np.asarray(sizes, dtype=float)
        if algorithm == "nccl":
            lines = self._nccl_lines(world_size, mode, d)
            return np.minimum.reduce([a[:, None] + s[:, None] * n[None, :] for a, s in lines])
        form = FORMS[{"1shot_push": "one_shot", "2shot_pull": "two_shot", "2shot_pull_mc": "multicast"}[algorithm]]
        theta = self._theta(algorithm, world_size, mode, d)
        link = [form.params.index(k) for k in ("overhead_us", "round_us", "peer_us_per_MB")]
        x = form.matrix(np.full_like(n, world_size), n, Context())[:, link]
        return theta @ x.T

    def samples(self, algorithm: str, world_size: int, sizes: Sequence[int], mode: str = "graph") -> np.ndarray:
        """Predicted microseconds per replicate, shape ``(replicates, len(sizes))``."""
        return self._predict(algorithm, world_size, sizes, mode, self._draws)

    def predict(self, algorithm: str, world_size: int, sizes: Sequence[int], mode: str = "graph") -> np.ndarray:
        """Predicted microseconds with the central figures."""
        return self._predict(algorithm, world_size, sizes, mode, self._point)[0]
