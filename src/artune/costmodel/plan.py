"""Tables from a model: the predicted-fastest algorithm per size, and how sure the model is.

A ``Predictor`` (a fitted ``CostModel`` or a GPU ``HardwareModel``) predicts
each algorithm's time per bootstrap replicate. ``build_plan`` picks, on a
fine log-spaced grid, the algorithm with the lowest median prediction
(keeping the previous size's choice unless another is predicted 5% faster),
merges neighbours into bands with bounds at the interpolated crossover, and
computes the *predicted regret band*: for each replicate, the geometric mean
over the grid of ``time(plan's choice) / time(that replicate's best)``; the
band is the median and the 90th percentile of that over the replicates.
Every plan carries provenance ``modelled`` with the model version, its
inputs and that band (``Provenance.tool`` and ``notes``), so that ``check``,
``explain`` and ``export`` can say so.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from artune.errors import ArtuneError, ModelRefusal
from artune.grid import log_spaced, quantize
from artune.measure.stats import geomean
from artune.table.types import Band, ParamValue, Plan, Platform, Provenance, Table, freeze_params

GRID_PER_OCTAVE = 8
#: keep the incumbent algorithm unless the best is predicted this much faster: the model is not precise
#: enough for bands that differ by less (the tuner's noise floor is 5% too), and bands must not flap
SWITCH_MARGIN = 0.05


class Predictor(Protocol):
    """What ``build_plan`` needs of a model."""

    kind: str
    arch: str
    device: str
    baseline: str
    version: str
    inputs: str
    open_ended: bool  # the winner at the largest size keeps every larger size (else the fallback runs there)

    def refusal(self, world_size: int) -> str | None: ...

    def candidates(self, world_size: int, mode: str) -> list[str]: ...

    def samples(self, algorithm: str, world_size: int, sizes: Sequence[int], mode: str = "eager") -> np.ndarray: ...

    @property
    def interval_factor(self) -> float | None: ...

    def copied(self, world_size: int, mode: str, sizes: Sequence[int]) -> list[Copy | None]: ...


@dataclass(frozen=True)
class Copy:
    """A size the plan takes from the nearest arch's row: the algorithm, why, and the sweep that would settle it."""

    algorithm: str
    why: str
    settle: str


@dataclass(frozen=True)
class RegretBand:
    """Predicted regret of a plan: median and 90th percentile over replicates of the geomean over sizes."""

    median: float
    p90: float
    worst: float  # the largest per-size 90th percentile
    calibrated: float | None = None  # the p90 the blind-arch folds' errors give: median x their factor

    def __str__(self) -> str:
        text = f"predicted regret {self.median:.3f} geomean (p90 {self.p90:.3f}"
        if self.calibrated is not None:
            text += f", calibrated on archs held out {self.calibrated:.3f}"
        return text + f"), worst size {self.worst:.2f}"

    @property
    def high(self) -> float:
        """The p90 to state: the calibrated one where the model was validated by arch."""
        return self.calibrated if self.calibrated is not None else self.p90


@dataclass(frozen=True)
class ModelledPlan:
    """A plan with the figures behind it."""

    plan: Plan
    regret: RegretBand
    sizes: tuple[int, ...]
    choice: tuple[str, ...]
    copied: tuple[str, ...] = ()  # why sizes were copied from the nearest arch's row, one line per reason


def _sticky_argmin(median: np.ndarray) -> np.ndarray:
    """Per size, the fastest algorithm, except that the previous size's choice stays within the margin."""
    pick = np.argmin(median, axis=0)
    for i in range(1, median.shape[1]):
        previous = pick[i - 1]
        if median[previous, i] <= median[pick[i], i] * (1 + SWITCH_MARGIN):
            pick[i] = previous
    return pick


def _crossover(lo: int, hi: int, d_lo: float, d_hi: float, itemsize: int) -> int:
    """Where a difference of log-times changes sign between ``lo`` and ``hi`` (log-linear interpolation)."""
    if d_lo == d_hi:
        return lo
    f = min(1.0, max(0.0, d_lo / (d_lo - d_hi)))
    at = quantize(lo * (hi / lo) ** f, itemsize)
    return at if lo <= at < hi else lo


def _apply_copies(copies: Sequence[Copy | None], names: Sequence[str], pick: np.ndarray) -> tuple[str, ...]:
    """Put each copied size's algorithm into ``pick`` (in place); one line per reason, with the sweep to run."""
    why: dict[tuple[str, str], bool] = {}  # (reason, sweep) -> whether the copy changed any size's choice
    for i, copy in enumerate(copies):
        if copy is not None:
            at = names.index(copy.algorithm)
            why[copy.why, copy.settle] = why.get((copy.why, copy.settle), False) or bool(pick[i] != at)
            pick[i] = at
    same = " (the model's own choice there is the same)"
    return tuple(f"{w}{'' if changed else same}; {settle}" for (w, settle), changed in why.items())


def _regret_band(samples: np.ndarray, pick: np.ndarray, factor: float | None) -> RegretBand:
    """The plan's predicted regret over the replicates, its p90 calibrated by ``factor`` where there is one."""
    chosen = samples[pick, :, np.arange(samples.shape[2])]  # (sizes, reps)
    regret = chosen / samples.min(axis=0).T
    geo = np.exp(np.log(regret).mean(axis=0))
    median = float(np.median(geo))
    return RegretBand(
        median,
        float(np.percentile(geo, 90)),
        float(np.percentile(regret, 90, axis=1).max()),
        median * factor if factor is not None else None,
    )


def build_plan(
    model: Predictor,
    world_size: int,
    mode: str,
    lo: int,
    hi: int,
    params: Mapping[str, Mapping[str, ParamValue]] | None = None,
    itemsize: int = 4,
) -> ModelledPlan:
    """The modelled plan for ``(world_size, mode)`` over sizes ``lo..hi`` bytes; ``ModelRefusal`` where refused."""
    why = model.refusal(world_size)
    if why:
        raise ModelRefusal(why)
    names = model.candidates(world_size, mode)
    if not names:
        raise ArtuneError(f"no modelled algorithm runs at world size {world_size}")
    sizes = log_spaced(lo, hi, GRID_PER_OCTAVE, itemsize)
    samples = np.stack([model.samples(a, world_size, sizes, mode) for a in names])  # (algs, reps, sizes)
    samples = np.maximum(samples, 1e-9)
    median = np.median(samples, axis=1)  # (algs, sizes)
    pick = _sticky_argmin(median)
    copied = _apply_copies(model.copied(world_size, mode, sizes), names, pick)
    logm = np.log(median)
    bands: list[Band] = []
    for i in range(len(sizes)):
        last = i == len(sizes) - 1
        if not last and pick[i + 1] == pick[i]:
            continue
        if last:
            upto = sizes[i]
        else:
            a, b = pick[i], pick[i + 1]
            d_lo, d_hi = logm[a, i] - logm[b, i], logm[a, i + 1] - logm[b, i + 1]
            upto = _crossover(sizes[i], sizes[i + 1], d_lo, d_hi, itemsize)
        name = names[pick[i]]
        if bands and bands[-1].upto >= upto:
            continue
        bands.append(Band(upto, (name,)))
    while bands and bands[-1].candidates == (model.baseline,):
        bands.pop()  # the fallback runs above the last band anyway
    if bands and getattr(model, "open_ended", False):
        bands[-1] = Band(None, bands[-1].candidates)  # as the tuner does: the top winner keeps larger sizes
    band = _regret_band(samples, pick, model.interval_factor)
    used = {c for b in bands for c in b.candidates}
    plan_params = freeze_params({k: v for k, v in (params or {}).items() if k in used})
    provenance = modelled_provenance(model, band, "; ".join(copied))
    plan = Plan(world_size, mode, tuple(bands), model.baseline, plan_params, provenance)
    return ModelledPlan(plan, band, tuple(sizes), tuple(names[k] for k in pick), copied)


def modelled_provenance(model: Predictor, band: RegretBand | None = None, extra: str = "") -> Provenance:
    """Provenance ``modelled``: the model version in ``tool``; inputs and regret band in ``notes``."""
    notes = f"modelled, not measured; inputs: {model.inputs}"
    if band is not None:
        notes += f"; {band}"
    if extra:
        notes += f"; {extra}"
    return Provenance(
        source="modelled",
        date=datetime.date.today().isoformat(),
        device=model.device,
        tool=model.version,
        notes=notes,
    )


def modelled_table(
    model: Predictor,
    world_sizes: Sequence[int],
    modes: Sequence[str],
    lo: int,
    hi: int,
    params: Mapping[str, Mapping[str, ParamValue]] | None = None,
) -> tuple[Table, list[ModelledPlan], list[str]]:
    """A table of modelled plans; world sizes the model refuses are left out and their reasons returned."""
    plans: list[ModelledPlan] = []
    refused: list[str] = []
    for ws in sorted(set(world_sizes)):
        why = model.refusal(ws)
        if why:
            refused.append(why)
            continue
        for mode in modes:
            plans.append(build_plan(model, ws, mode, lo, hi, params))
    if not plans:
        raise ArtuneError("the model refused every world size asked for: " + "; ".join(refused))
    geo = geomean(p.regret.median for p in plans)
    worst = max(p.regret.p90 for p in plans)
    table_prov = modelled_provenance(model, extra=f"plans' predicted regret {geo:.3f} geomean, p90 up to {worst:.3f}")
    table = Table(Platform(model.kind, model.arch, model.device), table_prov, tuple(p.plan for p in plans))
    return table, plans, refused
