"""One GPU's model: predicted times per algorithm, crossovers with intervals, and what to measure next.

``HardwareModel`` is the ``Predictor`` ``artune.costmodel.plan`` needs for a
GPU: a preset or a user's hardware file (``artune.costmodel.presets``) with the
fitted parameters of its arch family (``gpu.bundled_fit``). Its samples are
the bootstrap replicates, so a plan's predicted regret band and a
crossover's interval come from refits on resampled published data.

An AMD GPU (a gfx arch) is a ``rocm`` model: it plans SGLang's one-stage
kernel, QuickReduce at full precision and RCCL above them
(``gpu.ROCM_CANDIDATES``; a quantized QuickReduce level is lossy and planned
only when asked for), copies nothing (no engine's reference rows are for an
AMD GPU) and states the AMD folds' validation (``validation``).

``explain`` answers "how sure, and what would make it surer": per plan, each
crossover between neighbouring bands with its 90% interval (replicates, plus
a residual drawn from the training crossovers' misses, the way a bootstrap
prediction interval is made), and the cheapest sweep that would settle the
sizes where the replicates disagree on the fastest algorithm.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from artune import rocm
from artune.costmodel import blind, gpu
from artune.costmodel.cost import VERSION
from artune.costmodel.plan import SWITCH_MARGIN, Copy
from artune.costmodel.presets import Hardware
from artune.grid import log_spaced
from artune.measure.stats import geomean
from artune.sizes import human_size

LEVEL = 0.9
DISAGREE = 0.10  # a size is uncertain when at least this share of replicates picks another algorithm
SEED = 7


class HardwareModel:
    """Predicts the GPU algorithms on ``hardware`` from ``fit`` (the bundled one by default); ``algorithms``
    (default: the candidates of the GPU's platform) are catalog names, or kernels (``class/impl``)."""

    version = VERSION
    open_ended = False  # as the engines' tables: the library above the largest size planned

    def __init__(
        self,
        hardware: Hardware,
        fit: gpu.GpuFit | None = None,
        unseen_rule: str = "between",
        algorithms: Sequence[str] | None = None,
    ) -> None:
        self.hw = hardware
        amd = rocm.is_gfx(hardware.arch)
        self.kind = rocm.KIND if amd else "cuda"
        self.baseline = "rccl" if amd else "nccl"
        default = gpu.ROCM_CANDIDATES if amd else gpu.CANDIDATES
        self.algorithms = tuple(algorithms if algorithms is not None else default)
        self.fit = fit if fit is not None else gpu.bundled_fit()
        self.machine = hardware.machine(unseen_rule)
        self.arch = hardware.arch
        self.device = hardware.device
        family, seen = gpu.family_of(hardware.arch)
        how = f"family {family}" if seen else f"no fitted family: family {family}'s, round latency rule {unseen_rule}"
        self.inputs = (
            f"preset {hardware.name}: {hardware.fabric}, "
            f"multicast {'yes' if hardware.multicast else 'no'}, {how}; {self.fit.source}"
        )
        self._central = self.fit.theta("central")
        self._replicates = self.fit.theta("replicates")
        self.rules = blind.rules_from(self.fit.blind)

    @property
    def interval_factor(self) -> float | None:
        """The blind-arch folds' split-conformal factor on a plan's predicted regret (``None``: not validated);
        an AMD GPU's from the AMD folds."""
        blind_ = self.fit.blind.get("rocm", {}) if self.kind == rocm.KIND else self.fit.blind
        return blind_.get("factor")

    @property
    def validation(self) -> str:
        """How the model did on archs held out, the ones of this GPU's vendor: one line."""
        return blind.score_line(self.fit.blind, amd=self.kind == rocm.KIND)

    def copied(self, world_size: int, mode: str, sizes: Sequence[int]) -> list[Copy | None]:
        """Per size, the ``Copy`` where a copy rule takes it from the nearest arch's row, else ``None``.

        The copied row is decided as its engine runs it (vLLM's custom
        all-reduce by its 1-stage / 2-stage rule) and taken by scheme: the
        candidate of this model that runs a kernel of the same scheme.
        """
        from artune.costmodel.validate import ENGINE_NAMES, engine_kernel
        from artune.table.decide import decide

        if self.kind == rocm.KIND:
            return [None] * len(sizes)  # the copy rules copy the NVIDIA engines' rows
        out: list[Copy | None] = []
        names = self.candidates(world_size, mode)
        by_class = {}
        for name in reversed(names):
            by_class[gpu.KERNEL_OF.get(name, name).partition("/")[0]] = name
        for n in sizes:
            rule = next((r for r in self.rules if r.covers(world_size, mode, n)), None)
            if rule is None:
                out.append(None)
                continue
            source = blind.copy_source(rule.engine, self.arch)
            table = blind.copy_table(rule.engine, self.arch)
            # what the model has a form for can run (not FlashInfer's fused kernels, say)
            decision = decide(table, int(n), world_size, mode, ENGINE_NAMES | {"nccl"}, multicast=self.hw.multicast)
            name = by_class.get(engine_kernel(decision.algorithm, world_size, int(n)).partition("/")[0])
            out.append(Copy(name, rule.why(source), self.settle(rule, world_size, mode)) if name else None)
        return out

    def settle(self, rule: blind.CopyRule, world_size: int, mode: str, lo: int = 4 << 10, hi: int = 128 << 20) -> str:
        """The cheapest sweep that would settle a copy rule on this GPU: the region, two sizes per octave."""
        start, end = max(lo, rule.lo), min(hi, rule.hi or hi)
        sizes = log_spaced(start, max(end, start * 2), 2, itemsize=2)
        algs = [a for a in self.candidates(world_size, mode) if a != self.baseline] + [self.baseline]
        return (
            f"to settle it, measure on {self.device} world size {world_size} {mode}: {', '.join(algs)} at "
            f"{len(sizes)} sizes {human_size(sizes[0])}..{human_size(sizes[-1])} "
            f"({len(sizes) * len(algs)} measurements)"
        )

    def refusal(self, world_size: int) -> str | None:
        """The GPU model refuses only world sizes below 2 (one NVLink domain is assumed)."""
        return None if world_size >= 2 else f"world size {world_size}: an all-reduce needs at least 2 ranks"

    def candidates(self, world_size: int, mode: str) -> list[str]:
        """The algorithms this hardware runs at ``world_size`` (multicast only where it exists; QuickReduce at
        2, 4 and 8 ranks, say: the catalog's world sizes)."""
        from artune.catalog import SPECS

        def runs(name: str) -> bool:
            spec = SPECS.get(name)
            allowed = spec.conditions.world_sizes if spec is not None else None
            return allowed is None or world_size in allowed

        return [
            a
            for a in self.algorithms
            if (self.hw.multicast or not gpu.KERNEL_OF.get(a, a).startswith("multicast/")) and runs(a)
        ]

    def params(self) -> dict[str, dict[str, int | str]]:
        """Kernel grid sizes for SGLang's algorithms (SM count where the preset gives it); none on ROCm."""
        if self.kind == rocm.KIND:
            return {}
        sms: int | str = self.hw.sms if self.hw.sms else "sms"
        pull: int | str = min(192, self.hw.sms) if self.hw.sms else "min(192,sms)"
        return {"1shot_push": {"blocks": sms}, "2shot_pull": {"blocks": pull}, "2shot_pull_mc": {"blocks": pull}}

    def overhead(self, mode: str) -> float:
        """The per-call overhead common to all kernels (the fitted sweeps' median offset), us."""
        return self.fit.overhead_us.get(f"{self.machine.family}/{mode}", 0.0)

    def _times(self, theta: gpu.Theta, algorithm: str, world_size: int, sizes: Sequence[int], mode: str):
        kernel = gpu.KERNEL_OF.get(algorithm, algorithm)
        t = gpu.kernel_times(theta, kernel, self.machine, world_size, sizes, mode, self.fit.family_bandwidth)
        return t + self.overhead(mode)

    def samples(self, algorithm: str, world_size: int, sizes: Sequence[int], mode: str = "graph") -> np.ndarray:
        """Predicted microseconds per bootstrap replicate, shape ``(replicates, len(sizes))``."""
        return self._times(self._replicates, algorithm, world_size, sizes, mode)

    def predict(self, algorithm: str, world_size: int, sizes: Sequence[int], mode: str = "graph") -> np.ndarray:
        """Predicted microseconds with the central fit."""
        return self._times(self._central, algorithm, world_size, sizes, mode)[0]

    def crossover(
        self, lead: str, rival: str, world_size: int, mode: str, start: int = 0, residuals: bool = True
    ) -> tuple[float, np.ndarray]:
        """Where ``lead`` first becomes slower than ``rival`` at or above ``start``: central, and per replicate.

        Found on a grid of 16 sizes per octave (1 KiB to 1 GiB); ``residuals``
        multiplies each replicate's value by a drawn training-crossover miss
        (a prediction interval, not only the parameters' spread).
        """
        grid = np.geomspace(1 << 10, 1 << 30, 20 * 16 + 1)
        grid = grid[grid >= start] if start else grid

        def first(lead_t: np.ndarray, rival_t: np.ndarray) -> np.ndarray:
            slower = lead_t > rival_t  # (b, grid)
            return np.where(slower.any(axis=1), grid[np.argmax(slower, axis=1)], grid[-1])

        central = first(
            self.predict(lead, world_size, grid, mode)[None], self.predict(rival, world_size, grid, mode)[None]
        )
        draws = first(self.samples(lead, world_size, grid, mode), self.samples(rival, world_size, grid, mode))
        if residuals and self.fit.crossover_residuals:
            rng = np.random.default_rng(SEED)
            draws = draws * np.exp(rng.choice(np.array(self.fit.crossover_residuals), len(draws)))
        return float(central[0]), np.clip(draws, grid[0], grid[-1])


@dataclass(frozen=True)
class Crossing:
    """A crossover between two neighbouring bands of a plan, with its interval."""

    lead: str
    rival: str
    at: int  # the plan's bound
    crossover: float  # where the central fit's lead becomes slower than the rival
    lo: float  # the crossover's interval
    hi: float
    last: bool = False  # the plan's last band, ending at the top of its sizes where the fallback takes over

    def __str__(self) -> str:
        def size(n: float) -> str:
            return ">= 1GiB" if n >= 1 << 30 else human_size(round(n))

        interval = f"{LEVEL:.0%} interval {size(self.lo)}..{size(self.hi)}"
        head = f"{self.lead} -> {self.rival} at {human_size(self.at)}"
        if abs(math.log(self.at / self.crossover)) <= math.log(1.1):
            return f"{head} ({interval})"
        if self.at < self.crossover:
            why = "the top of the planned sizes" if self.last else "before the crossover"
            return f"{head}, {why} (crossover {size(self.crossover)}, {interval})"
        # nearly parallel lines: the plan keeps the lead until the rival is SWITCH_MARGIN faster, far on
        return f"{head}, where it is {SWITCH_MARGIN:.0%} faster (crossover {size(self.crossover)}, {interval})"


@dataclass(frozen=True)
class SuggestedSweep:
    """A sweep to run: where the replicates disagree, which algorithms, how many measurements."""

    world_size: int
    mode: str
    sizes: tuple[int, ...]
    algorithms: tuple[str, ...]
    disagreement: float  # the largest share of replicates picking another algorithm at one size
    expected_regret: float  # the central plan's expected regret over those sizes (replicates)

    @property
    def count(self) -> int:
        return len(self.sizes) * len(self.algorithms)

    def __str__(self) -> str:
        return (
            f"world size {self.world_size} {self.mode}: {', '.join(self.algorithms)} at {len(self.sizes)} sizes "
            f"{human_size(self.sizes[0])}..{human_size(self.sizes[-1])} ({self.count} measurements; up to "
            f"{self.disagreement:.0%} of refits pick another algorithm there, expected regret "
            f"{self.expected_regret:.3f})"
        )


def crossings(model: HardwareModel, plan) -> list[Crossing]:
    """The plan's crossovers between neighbouring bands, each with its interval."""
    tail = (1 - LEVEL) / 2 * 100
    out = []
    bands = list(plan.bands)
    pairs = [(a, b.candidates[0]) for a, b in pairwise(bands)]
    if bands and bands[-1].upto is not None and bands[-1].candidates[0] != plan.fallback:
        pairs.append((bands[-1], plan.fallback))
    for i, (band, rival) in enumerate(pairs):
        start = plan.bands[i - 1].upto + 1 if i else 0
        central, draws = model.crossover(band.candidates[0], rival, plan.world_size, plan.mode, start)
        lo, hi = np.percentile(draws, [tail, 100 - tail])
        last = band is bands[-1]
        out.append(Crossing(band.candidates[0], rival, int(band.upto), central, float(lo), float(hi), last))
    return out


def uncertain_sizes(
    model: HardwareModel, world_size: int, mode: str, lo: int, hi: int, per_octave: int = 4
) -> SuggestedSweep | None:
    """The sizes where the replicates disagree with the central choice, as one sweep to run (or ``None``)."""
    names = model.candidates(world_size, mode)
    sizes = log_spaced(lo, hi, per_octave, itemsize=2)
    reps = np.stack([model.samples(a, world_size, sizes, mode) for a in names])  # (algs, b, sizes)
    central = np.stack([model.predict(a, world_size, sizes, mode) for a in names])  # (algs, sizes)
    pick = np.argmin(central, axis=0)
    rep_pick = np.argmin(reps, axis=0)  # (b, sizes)
    other = (rep_pick != pick[None, :]).mean(axis=0)
    regret = reps[pick, :, np.arange(len(sizes))].T / reps.min(axis=0)  # (b, sizes)
    where = np.flatnonzero(other >= DISAGREE)
    if not len(where):
        return None
    first, last = max(0, where[0] - 1), min(len(sizes) - 1, where[-1] + 1)
    span = sizes[first : last + 1][:: max(1, per_octave // 2)]  # two sizes per octave suffice to place a crossover
    algs = {int(pick[i]) for i in where}
    for i in where:
        counts = np.bincount(rep_pick[:, i], minlength=len(names)) / rep_pick.shape[0]
        algs |= {j for j in np.flatnonzero(counts >= DISAGREE)}
    expected = geomean(regret[:, first : last + 1].ravel())
    return SuggestedSweep(
        world_size, mode, tuple(span), tuple(names[j] for j in sorted(algs)), float(other.max()), expected
    )


def cheapest(sweeps: Sequence[SuggestedSweep]) -> SuggestedSweep | None:
    """The sweep that buys the most expected regret per measurement."""
    useful = [m for m in sweeps if m.expected_regret > 1.0]
    if not useful:
        return None
    return max(useful, key=lambda m: math.log(m.expected_regret) * len(m.sizes) / m.count)
