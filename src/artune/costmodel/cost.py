"""A fitted cost model: per algorithm, a form, its parameters and their bootstrap replicates.

``fit_logs`` reads measurement logs (``artune tune``'s JSONL), fits every
algorithm that has a form, bootstraps the fit and returns a ``CostModel``
that predicts other world sizes and sizes, or refuses where it cannot:

- a world size below 2;
- any world size other than the one fitted, when the fit saw only one (the
  world-size dependence is then unknown);
- more ranks than cores (oversubscription) when no fitted world size was
  oversubscribed, or beyond the largest fitted one: the model describes
  oversubscription (a per-round cost for each rank beyond the cores, and
  byte costs scaled by ranks per core) only between measured points.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from artune.catalog import SHM_CHUNK_BYTES
from artune.costmodel.bootstrap import bootstrap, interval
from artune.costmodel.fit import Points, identified, relative_residuals, robust_loss, shape_findings, solve
from artune.costmodel.forms import Context, Form, form_for
from artune.errors import ArtuneError, ModelRefusal

VERSION = "artune.model/1"
_CACHE_CANDIDATES = tuple(1 << k for k in range(20, 28))  # 1 MiB .. 128 MiB
_CACHE_GAIN = 0.8  # a cache term is kept only when it cuts the robust loss by 20% or more


@dataclass(frozen=True)
class AlgorithmModel:
    """One algorithm's fit: the form, parameters, bootstrap replicates, residuals and findings."""

    algorithm: str
    form: Form
    theta: np.ndarray
    replicates: np.ndarray
    free: np.ndarray
    points: Points
    residuals: np.ndarray
    findings: tuple[str, ...]

    def parameters(self) -> list[tuple[str, float, float, float, bool]]:
        """``(name, value, lo, hi, identified)`` per parameter, the interval the bootstrap's 5-95%."""
        lo, hi = interval(self.replicates)
        return [
            (name, float(self.theta[i]), float(lo[i]), float(hi[i]), bool(self.free[i]))
            for i, name in enumerate(self.form.params)
        ]


@dataclass(frozen=True)
class CostModel:
    """Fitted algorithms on one machine, with what they were fitted on."""

    kind: str  # cpu / cuda
    arch: str
    device: str
    ctx: Context
    algorithms: dict[str, AlgorithmModel]
    world_sizes: tuple[int, ...]
    size_range: tuple[int, int]
    baseline: str
    inputs: str
    version: str = VERSION
    notes: tuple[str, ...] = field(default=())
    open_ended: bool = True  # as the tuner's tables: the winner at the largest measured size keeps larger ones

    def refusal(self, world_size: int) -> str | None:
        """Why the model will not predict at ``world_size``, or ``None``."""
        fitted = self.world_sizes
        if world_size < 2:
            return f"world size {world_size}: an all-reduce needs at least 2 ranks"
        if len(fitted) < 2 and world_size not in fitted:
            return (
                f"world size {world_size}: the fit saw only world size {fitted[0]}, so how time grows with "
                "ranks is unknown; measure two or more world sizes"
            )
        cores = self.ctx.cores
        if cores and world_size > cores:
            over = [p for p in fitted if p > cores]
            if not over:
                return (
                    f"world size {world_size} oversubscribes the {cores} cores and no fitted world size did; "
                    "the model does not extrapolate into oversubscription (measure one oversubscribed world size)"
                )
            if world_size > max(over):
                return (
                    f"world size {world_size} oversubscribes the {cores} cores beyond the largest fitted "
                    f"world size {max(over)}; the model does not extrapolate oversubscription"
                )
        return None

    def check(self, world_size: int) -> None:
        """Raise ``ModelRefusal`` when the model will not predict at ``world_size``."""
        why = self.refusal(world_size)
        if why:
            raise ModelRefusal(why)

    @property
    def interval_factor(self) -> float | None:
        """No blind-arch calibration for a machine's own fit: its bootstrap p90 stands."""
        return None

    def copied(self, world_size: int, mode: str, sizes: Sequence[int]) -> list[None]:
        """A fit of the machine's own logs copies nothing."""
        return [None] * len(sizes)

    def candidates(self, world_size: int, mode: str = "eager") -> list[str]:
        """The algorithms the model can predict (every fitted one; CPU has one mode)."""
        return sorted(self.algorithms)

    def samples(self, algorithm: str, world_size: int, sizes: Sequence[int], mode: str = "eager") -> np.ndarray:
        """Predicted microseconds per bootstrap replicate, shape ``(replicates, len(sizes))``."""
        self.check(world_size)
        m = self.algorithms[algorithm]
        n = np.asarray(sizes, dtype=float)
        return m.form.predict(m.replicates, np.full_like(n, world_size), n, self.ctx)

    def predict(self, algorithm: str, world_size: int, sizes: Sequence[int]) -> np.ndarray:
        """Predicted microseconds with the fitted parameters."""
        self.check(world_size)
        m = self.algorithms[algorithm]
        n = np.asarray(sizes, dtype=float)
        return m.form.predict(m.theta, np.full_like(n, world_size), n, self.ctx)


def points_from_logs(paths: Sequence[str | Path]) -> tuple[dict[str, Points], dict[str, str], list[str]]:
    """Default-parameter, correct measurements per algorithm; the platform; what was read.

    ``ArtuneError`` for a log that cannot be read or logs from different machines.
    """
    from artune.measure.records import MeasurementLog

    rows: dict[str, list[tuple[int, int, float]]] = {}
    platform: dict[str, str] = {}
    host = ""
    described: list[str] = []
    for path in paths:
        if not Path(path).is_file():
            raise ArtuneError(
                f"{path}: no such measurement log; 'artune tune --out DIR' writes DIR/measurements-ws<N>.jsonl"
            )
        log = MeasurementLog(path)
        header = log.header
        if platform and (header.platform != platform or header.host_fingerprint != host):
            raise ArtuneError(f"{path}: measured on another machine than {paths[0]}; fit one machine at a time")
        platform, host = header.platform, header.host_fingerprint
        kept = 0
        for m in log.latest().values():
            if not m.ok or m.candidate.params or not math.isfinite(m.time_us) or m.time_us <= 0:
                continue
            rows.setdefault(m.candidate.algorithm, []).append((m.world_size, m.size_bytes, m.time_us))
            kept += 1
        described.append(f"{Path(path).name} (ws={header.world_size}, {kept} points)")
    points = {
        name: Points(*(np.array(col, dtype=float) for col in zip(*sorted(values), strict=True)))
        for name, values in rows.items()
    }
    return points, {**platform, "host": host}, described


def _this_host(host: str) -> bool:
    from artune import machine

    return host == machine.fingerprint()


def _choose_cache(fittable: dict[str, tuple[Form, Points]], base: Context) -> int | None:
    """The cache size that explains the data best, or ``None`` when a cache term does not earn its place."""

    def loss(ctx: Context) -> float:
        return sum(
            robust_loss(relative_residuals(form, solve(form, pts, ctx), pts, ctx)) for form, pts in fittable.values()
        )

    without = loss(base)
    best, best_loss = None, without
    for cache in _CACHE_CANDIDATES:
        value = loss(Context(base.cores, cache, base.chunk_bytes))
        if value < best_loss:
            best, best_loss = cache, value
    return best if best is not None and best_loss <= _CACHE_GAIN * without else None


def fit_points(
    points: dict[str, Points],
    *,
    kind: str,
    arch: str,
    device: str,
    cores: int | None,
    chunk_bytes: int | None,
    inputs: str,
    replicates: int = 200,
) -> CostModel:
    """Fit every algorithm with a form; ``ArtuneError`` when nothing can be fitted."""
    fittable = {a: (f, pts) for a, pts in points.items() if (f := form_for(a)) is not None and len(pts) >= 3}
    if not fittable:
        raise ArtuneError(f"{inputs}: no algorithm with a cost form and at least 3 measurements to fit")
    base = Context(cores=cores, cache_bytes=None, chunk_bytes=chunk_bytes)
    ctx = Context(cores, _choose_cache(fittable, base), chunk_bytes)
    models: dict[str, AlgorithmModel] = {}
    for name, (form, pts) in sorted(fittable.items()):
        free = identified(form, pts, ctx)
        theta = solve(form, pts, ctx, free)
        residuals = relative_residuals(form, theta, pts, ctx)
        models[name] = AlgorithmModel(
            name,
            form,
            theta,
            bootstrap(form, pts, ctx, free, replicates),
            free,
            pts,
            residuals,
            tuple(shape_findings(pts, residuals)),
        )
    all_p = sorted({int(p) for m in models.values() for p in m.points.p})
    all_n = [int(n) for m in models.values() for n in m.points.n]
    baseline = "gloo" if kind == "cpu" else "nccl"
    skipped = sorted(set(points) - set(fittable))
    notes = (f"not modelled (no form, or under 3 points): {', '.join(skipped)}",) if skipped else ()
    return CostModel(
        kind, arch, device, ctx, models, tuple(all_p), (min(all_n), max(all_n)), baseline, inputs, notes=notes
    )


def fit_logs(paths: Sequence[str | Path], cores: int | None = None, replicates: int = 200) -> CostModel:
    """Fit the measurement logs at ``paths`` (one machine).

    ``cores``: the machine's cores; by default this machine's when the logs
    were measured here. ``ArtuneError`` when the logs are from another machine
    and ``cores`` is not given (oversubscription could not be described).
    """
    points, platform, described = points_from_logs(paths)
    kind = platform.get("kind", "cpu")
    if cores is None and kind == "cpu":
        if not _this_host(platform.get("host", "")):
            raise ArtuneError(
                "the logs were measured on another machine; give its core count with --cores N "
                "(the model needs it to describe oversubscription)"
            )
        cores = os.cpu_count() or 1
    chunk = None
    if kind == "cpu":
        chunk = SHM_CHUNK_BYTES
    return fit_points(
        points,
        kind=kind,
        arch=platform.get("arch", ""),
        device=platform.get("device", ""),
        cores=cores,
        chunk_bytes=chunk,
        inputs="; ".join(described),
        replicates=replicates,
    )
