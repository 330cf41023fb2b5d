"""Validation the way a sceptic would: leave one sweep out, and score the hand tables on the same points.

``score_sweep`` is the one scoring function: for every size of a sweep, the
modelled plan's choice and each engine's hand-table choice among the
kernels the sweep measured at that size, and their regret
``time(choice) / time(fastest measured)``.

- The model's choice is its plan's: the lowest predicted time, keeping the
  previous size's choice unless another is predicted ``SWITCH_MARGIN``
  faster (``artune.costmodel.plan``'s rule).
- An engine's choice is its reference table's decision
  (``artune.table.decide.decide`` on
  ``artune.formats.references.reference_set(engine).resolve(arch)``, so it
  follows whatever rules those tables implement), with ``available``
  the engine algorithms whose kernel the sweep measured at that size: the
  engine's first match among what ran. vLLM's ``custom_ar`` runs one stage
  or two by vLLM's own rule (``csrc/custom_all_reduce.cuh``: one stage at
  world size 2, below 512 KiB up to 4 ranks, below 256 KiB up to 8). Where
  the sweep lacks the engine's own kernel, the same class from another
  implementation stands in (for example torch's one-shot for vLLM's), and
  NCCL is the sweep's NCCL column, however it was run.
- On an AMD GPU artune reads no engine's ROCm rows as reference tables (the
  engines' reference tables are for CUDA), so a sweep there is scored
  against RCCL at every size, where it measured RCCL at every size
  (``comparators``): the process group every engine falls back to.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from artune import catalog, rocm
from artune.costmodel import calibrate as cal
from artune.costmodel import gpu
from artune.costmodel.plan import SWITCH_MARGIN
from artune.costmodel.published import Sweep
from artune.measure.stats import geomean
from artune.table.types import Table

ENGINES = ("vllm", "sglang")


def engine_kernel(algorithm: str, world_size: int, nbytes: int) -> str:
    """The model kernel an engine algorithm name runs for one message (vLLM's custom all-reduce: by its rule)."""
    if algorithm == "custom_ar":
        from artune.formats.vllm.rules import custom_ar_kernel

        stage = custom_ar_kernel(world_size, nbytes)[0]
        found = gpu.model_kernel(catalog.KERNELS[f"custom_ar/{stage}"])
        assert found is not None  # the catalog gives both stages a scheme the model has a form for
        return found
    return gpu.KERNEL_OF[algorithm]


def stand_in(kernel: str, measured: Sequence[str]) -> str | None:
    """The measured column for ``kernel``: itself, else its class in another implementation, else ``None``."""
    if kernel in measured:
        return kernel
    cls = kernel.partition("/")[0]
    same = [k for k in measured if k.partition("/")[0] == cls]
    return same[0] if same else None


ENGINE_NAMES = frozenset((*gpu.KERNEL_OF, "custom_ar"))  # the engine algorithms the forms describe


def engine_table(engine: str, arch: str) -> Table:
    """The table ``engine`` runs on ``arch`` (its own row, or what its dispatch gives that arch)."""
    from artune.formats.references import reference_set

    log = logging.getLogger("artune.table.family")
    level = log.level
    log.setLevel(logging.ERROR)  # a borrowed table warns once per arch; the score says which table decided
    try:
        return reference_set(engine).resolve(arch)
    finally:
        log.setLevel(level)


def table_choice(table: Table, world_size: int, mode: str, nbytes: int, measured: Sequence[str]) -> str:
    """The measured column ``table`` picks at ``nbytes`` as its engine runs it (``nccl`` when nothing else ran)."""
    from artune.table.decide import decide

    available = {name for name in ENGINE_NAMES if stand_in(engine_kernel(name, world_size, nbytes), measured)}
    decision = decide(table, nbytes, world_size, mode, frozenset(available | {"nccl"}))
    column = stand_in(engine_kernel(decision.algorithm, world_size, nbytes), measured)
    return column if column is not None else stand_in(gpu.KERNEL_OF["nccl"], measured) or measured[0]


def hand_choice(engine: str, arch: str, world_size: int, mode: str, nbytes: int, measured: Sequence[str]) -> str:
    """The measured column the engine's hand table for ``arch`` picks at ``nbytes``."""
    return table_choice(engine_table(engine, arch), world_size, mode, nbytes, measured)


def preset_arch(preset: str) -> str:
    from artune.costmodel.presets import load_preset

    return load_preset(preset).arch


def kind_of(preset: str) -> str:
    """The platform of a preset's GPU: ``rocm`` for an AMD arch, else ``cuda``."""
    return rocm.KIND if rocm.is_gfx(preset_arch(preset)) else "cuda"


def engines_for(sweep: Sweep) -> tuple[str, ...]:
    """The engines whose own tables score ``sweep``: vLLM's and SGLang's reference tables are for CUDA."""
    return ENGINES if kind_of(sweep.preset) == "cuda" else ()


def comparators(sweep: Sweep) -> dict[str, Table]:
    """The choosers a sweep on an AMD GPU is scored against: ``rccl`` (RCCL at every size) where it measured
    RCCL at every size; none on an NVIDIA GPU (its engines' own tables score it: ``engines_for``)."""
    if kind_of(sweep.preset) == "cuda":
        return {}
    from artune.table.family import conservative_default
    from artune.table.types import Platform

    rccl = gpu.KERNEL_OF["rccl"]
    if rccl not in sweep.kernels or any(math.isnan(row[sweep.kernels.index(rccl)]) for row in sweep.times):
        return {}
    return {"rccl": conservative_default(Platform(rocm.KIND, preset_arch(sweep.preset)))}


@dataclass(frozen=True)
class Row:
    nbytes: int
    best: str
    choices: Mapping[str, str]  # who -> measured column chosen
    regrets: Mapping[str, float]


@dataclass(frozen=True)
class SweepScore:
    """One sweep's rows and, per chooser (``model``, ``vllm``, ``sglang``), the geomean and worst regret."""

    sweep: Sweep
    rows: tuple[Row, ...]

    def geomean(self, who: str) -> float:
        return geomean(r.regrets[who] for r in self.rows)

    def worst(self, who: str) -> float:
        return max(r.regrets[who] for r in self.rows)


def model_choices(predicted: Callable[[str, Sequence[int]], np.ndarray], sweep: Sweep) -> list[str]:
    """The modelled plan's column per size: the predicted fastest measured one, sticky within the margin."""
    out: list[str] = []
    previous = ""
    for n, row in zip(sweep.sizes, sweep.times, strict=True):
        measured = [k for k, t in zip(sweep.kernels, row, strict=True) if not math.isnan(t)]
        times = {k: float(predicted(k, [n])[0]) for k in measured}
        pick = min(times, key=times.__getitem__)
        if previous in times and times[previous] <= times[pick] * (1 + SWITCH_MARGIN):
            pick = previous
        out.append(pick)
        previous = pick
    return out


def score_sweep(
    sweep: Sweep,
    predicted: Callable[[str, Sequence[int]], np.ndarray],
    engines: Sequence[str] | None = None,
    tables: Mapping[str, Table] | None = None,
    picks: Sequence[str] | None = None,
) -> SweepScore:
    """Model and hand tables on every size of ``sweep``: choices and regrets (the one scoring function).

    ``engines`` (default: ``engines_for(sweep)``) are scored by their own
    table for the sweep's arch; the sweep's ``comparators`` and ``tables``
    add choosers by name (a copied table, say); ``picks`` replaces the
    model's plan with given columns per size (a hybrid's).
    """
    arch = preset_arch(sweep.preset)
    picks = list(picks) if picks is not None else model_choices(predicted, sweep)
    engines = engines_for(sweep) if engines is None else engines
    choosers = {e: engine_table(e, arch) for e in engines} | comparators(sweep) | dict(tables or {})
    rows = []
    for n, row, pick in zip(sweep.sizes, sweep.times, picks, strict=True):
        have = {k: t for k, t in zip(sweep.kernels, row, strict=True) if not math.isnan(t)}
        measured = list(have)
        best = min(have, key=have.__getitem__)
        choices = {"model": pick}
        for who, table in choosers.items():
            choices[who] = table_choice(table, sweep.world_size, sweep.mode, n, measured)
        rows.append(Row(n, best, choices, {who: have[c] / have[best] for who, c in choices.items()}))
    return SweepScore(sweep, tuple(rows))


def predictor(theta: gpu.Theta, preset: str, world_size: int, mode: str, unseen_rule: str = "between"):
    """Predicted times of the kernels of one GPU, world size and mode from ``theta`` (b = 1)."""
    machine = cal.machine_for(preset, unseen_rule)
    bandwidth = cal.family_bandwidth()

    def predicted(kernel: str, sizes: Sequence[int]) -> np.ndarray:
        return gpu.kernel_times(theta, kernel, machine, world_size, sizes, mode, bandwidth)[0]

    return predicted


def leave_one_sweep_out(data: cal.Data, terms: Sequence[str] = (), start: cal.Result | None = None) -> list[SweepScore]:
    """For every sweep with a choice: fit without it, plan for its GPU and world size, score on its times."""
    out = []
    for s in data.sweeps:
        if not s.choice:
            continue
        fold = cal.fit(data.without(s.id), terms, start)
        out.append(score_sweep(s, predictor(fold.theta(), s.preset, s.world_size, s.mode)))
    return out


def total(scores: Sequence[SweepScore], who: str) -> tuple[float, float]:
    """Over sweeps, each counting once: the geomean of their geomean regrets, and the worst size."""
    geo = geomean(s.geomean(who) for s in scores)
    return geo, max(s.worst(who) for s in scores)


# ------------------------------------------------------------------ crossovers held out, and their intervals

LEVEL = 0.9


@dataclass(frozen=True)
class Interval:
    """A held-out crossover: published, predicted (central) and the interval, with and without residuals."""

    crossover: cal.ClaimedCrossover
    predicted: float
    lo: float
    hi: float
    lo_params: float  # the interval from parameter refits alone
    hi_params: float

    @property
    def log_ratio(self) -> float:
        r = math.log(self.predicted / self.crossover.nbytes)
        return min(0.0, r) if self.crossover.lower_bound else r

    def covers(self, params_only: bool = False) -> bool:
        lo, hi = (self.lo_params, self.hi_params) if params_only else (self.lo, self.hi)
        if self.crossover.lower_bound:
            return hi >= self.crossover.nbytes
        return lo <= self.crossover.nbytes <= hi


def intervals(fit: gpu.GpuFit, crossovers: Sequence[cal.ClaimedCrossover], unseen_rule: str = "between", seed: int = 3):
    """Each crossover's central prediction and ``LEVEL`` interval from the stored replicates.

    The interval is a bootstrap prediction interval: each replicate's
    crossover times ``exp`` of a residual drawn from the training crossovers'
    log misses (the scatter the forms leave), so that it covers a new
    crossover, not only the mean one; the parameter-only interval is reported
    next to it.
    """
    rng = np.random.default_rng(seed)
    central, reps = fit.theta("central"), fit.theta("replicates")
    tail = (1 - LEVEL) / 2 * 100
    residuals = np.array(fit.crossover_residuals) if fit.crossover_residuals else np.zeros(1)
    noise = np.exp(rng.choice(residuals, len(fit.replicates)))  # one miss per replicate, the same for every set
    out = []
    for c in crossovers:
        machine = cal.machine_for(c.preset, unseen_rule)
        pred = float(cal.predicted_crossover(central, c, machine, fit.family_bandwidth)[0])
        draws = cal.predicted_crossover(reps, c, machine, fit.family_bandwidth)
        noisy = np.clip(draws * noise, cal.LO, cal.HI)  # a miss does not move "never within 1 GiB" further
        lo, hi = np.percentile(noisy, [tail, 100 - tail])
        plo, phi = np.percentile(draws, [tail, 100 - tail])
        out.append(Interval(c, pred, float(lo), float(hi), float(plo), float(phi)))
    return out


def interval_summary(rows: Sequence[Interval]) -> dict[str, float]:
    """Geomean ratio, geomean factor off, worst factor, share within 2x, coverage (with and without residuals)."""
    logs = np.array([r.log_ratio for r in rows])
    return {
        "points": len(rows),
        "geomean": float(np.exp(logs.mean())),
        "factor": float(np.exp(np.abs(logs).mean())),
        "worst": float(np.exp(np.abs(logs).max())),
        "within2": int((np.abs(logs) <= math.log(2)).sum()),
        "coverage": float(np.mean([r.covers() for r in rows])),
        "coverage_params": float(np.mean([r.covers(True) for r in rows])),
    }
