"""Hardware nobody measured: leave one arch out, the way a new GPU arrives, and score it against copying.

A fold drops every sweep and every claimed crossover of one arch, fits on
the rest, plans for that arch and scores the plan on the arch's own sweeps
(``validate.score_sweep``: rows as each engine runs them). Beside the model,
each fold scores:

- ``vllm copy`` / ``sglang copy``: the nearest arch's row under each
  engine's practice (``copy_source``): the arch the engine's dispatch gives
  it when it has no row of its own (SGLang runs SM100's config on 10.3),
  else the previous arch in the engine's table (vLLM's 10.7 rows are
  10.3's), else the next; rows that ``artune check`` finds copied are never
  a source;
- ``vllm`` / ``sglang``: the arch's own hand row.

From the folds come:

- the weight of the hand tables' claims (``choose_claim_weight``): the one
  whose folds score best;
- ``copy_rules``: the regions (world size, mode, size range) where the
  folds say the model loses to a copy; the modelled table takes the copied
  rows there (``HardwareModel.copied``);
- ``calibrate``: a split-conformal factor over the folds' blind errors, so
  that a plan's stated p90 covers what the blind folds saw.

An AMD arch's fold has no copies to score: the engines' reference tables are
for CUDA, so it scores the model against RCCL at every size where its
sweeps measured it (``validate.comparators``), makes no copy rule, and its
blind errors calibrate the AMD plans' interval on their own (``stored_summary``
keeps them under ``rocm``). The claims' weight is chosen on the NVIDIA folds,
whose archs the claims are about.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from artune import rocm
from artune.costmodel import calibrate as cal
from artune.costmodel import gpu, validate
from artune.measure.stats import geomean
from artune.table.types import Table

KiB, MiB = 1 << 10, 1 << 20
ENGINES = ("vllm", "sglang")
COPIES = tuple(f"{e} copy" for e in ENGINES)
#: the size ranges a copy rule covers: small messages (latency-bound) and large (bandwidth-bound)
BANDS: tuple[tuple[int, int | None], ...] = ((0, MiB), (MiB + 1, None))
MARGIN = 0.01  # a copy takes a region only when it beats the model there by 1% or more
MIN_POINTS = 3  # ... on at least this many blind sizes: one size at a band's edge is no verdict
LEVEL = 0.9


def copy_source(engine: str, arch: str) -> str:
    """The arch whose row ``engine``'s practice copies for ``arch`` (never ``arch`` itself, never a copy)."""
    from artune.formats.references import reference_set

    tables = reference_set(engine).tables
    if arch not in tables:
        given = validate.engine_table(engine, arch).platform.arch
        if given in tables:
            return given
    copies = cal.copied(tables)
    others = sorted((a for a in tables if a != arch and a not in copies), key=float)
    lower = [a for a in others if float(a) < float(arch)]
    return lower[-1] if lower else others[0]


def copy_table(engine: str, arch: str) -> Table:
    """The nearest arch's table under ``engine``'s practice (``copy_source``)."""
    from artune.formats.references import reference_set

    return reference_set(engine).tables[copy_source(engine, arch)]


def fold_theta(result: cal.Result, data: cal.Data) -> dict[str, np.ndarray]:
    """The fit's parameters, a family with no data in ``data`` taking the nearest fitted family's."""
    theta = result.theta()
    fitted = {cal.machine_for(s.preset).family for s in data.sweeps} | {
        cal.machine_for(c.preset).family for c in data.fitted
    }
    for family in gpu.FAMILIES:
        nearest = gpu.nearest_family(family, fitted)
        if family not in fitted and nearest is not None:
            for name in gpu.FAMILY_PARAMS:
                theta[gpu.family_name(name, family)] = theta[gpu.family_name(name, nearest)]
    return theta


@dataclass(frozen=True)
class ArchFold:
    """One arch held out: its sweeps scored, and the fold model's own predicted regret on each."""

    arch: str
    scores: tuple[validate.SweepScore, ...]
    predicted: tuple[float, ...]
    sources: Mapping[str, str]  # engine copy -> the arch copied


def _predicted_regret(predicted, score: validate.SweepScore) -> float:
    """The fold model's own view of its plan on the sweep's sizes and kernels (geomean over sizes)."""
    regrets = []
    s = score.sweep
    for row, times in zip(score.rows, s.times, strict=True):
        measured = [k for k, t in zip(s.kernels, times, strict=True) if not math.isnan(t)]
        pred = {k: float(predicted(k, [row.nbytes])[0]) for k in measured}
        regrets.append(pred[row.choices["model"]] / min(pred.values()))
    return geomean(regrets)


def _arch_order(arch: str) -> tuple[bool, float, str]:
    """NVIDIA's archs by capability, then AMD's by gfx name."""
    return (True, 0.0, arch) if rocm.is_gfx(arch) else (False, float(arch), "")


def arches(data: cal.Data) -> list[str]:
    """The archs with at least one sweep that has a choice to score."""
    return sorted({validate.preset_arch(s.preset) for s in data.sweeps if s.choice}, key=_arch_order)


def is_amd(fold: ArchFold) -> bool:
    """Whether the fold held out an AMD arch."""
    return rocm.is_gfx(fold.arch)


def leave_one_arch_out(data: cal.Data, terms: Sequence[str] = (), start: cal.Result | None = None) -> list[ArchFold]:
    """For every arch with a sweep to score: fit without it, plan for it, score on its sweeps."""
    out = []
    for arch in arches(data):
        kept = data.without_arch(arch)
        theta = fold_theta(cal.fit(kept, terms, start), kept)
        engines = () if rocm.is_gfx(arch) else ENGINES  # no engine's reference rows are for an AMD GPU
        tables = {f"{e} copy": copy_table(e, arch) for e in engines}
        scores, predicted = [], []
        for s in data.sweeps:
            if s.choice and validate.preset_arch(s.preset) == arch:
                pred = validate.predictor(theta, s.preset, s.world_size, s.mode)
                score = validate.score_sweep(s, pred, engines, tables)
                scores.append(score)
                predicted.append(_predicted_regret(pred, score))
        sources = {f"{e} copy": copy_source(e, arch) for e in engines}
        out.append(ArchFold(arch, tuple(scores), tuple(predicted), sources))
    return out


def choose_claim_weight(
    data: cal.Data, weights: Sequence[float] = cal.CLAIM_WEIGHTS
) -> tuple[float, dict[float, float]]:
    """The claims' weight whose blind-arch folds score best (each sweep once), and every weight's score."""
    totals = {}
    for w in weights:
        folds = leave_one_arch_out(cal.Data(data.sweeps, data.crossovers, w))
        totals[w] = geomean([s.geomean("model") for f in folds if not is_amd(f) for s in f.scores])
    best = min(totals, key=lambda w: (round(totals[w], 4), w))
    return best, totals


# ------------------------------------------------------------------ where copying wins


@dataclass(frozen=True)
class CopyRule:
    """A region where, on archs held out, a copy beat the model: there the modelled table copies."""

    world_size: int
    mode: str
    lo: int
    hi: int | None
    engine: str  # whose copy
    model: float  # the model's geomean regret over the region's blind sizes
    copy: float  # the copy's
    points: int
    sweeps: tuple[str, ...]

    def covers(self, world_size: int, mode: str, nbytes: int) -> bool:
        return (
            world_size == self.world_size
            and mode == self.mode
            and self.lo <= nbytes
            and (self.hi is None or nbytes <= self.hi)
        )

    @property
    def where(self) -> str:
        from artune.sizes import human_size

        size = f"above {human_size(self.lo - 1)}" if self.hi is None else f"up to {human_size(self.hi)}"
        return f"ws {self.world_size} {self.mode} {size}"

    def why(self, source: str) -> str:
        """``copied from 10.0 (vllm): on archs held out, the model loses to copying at ws 6 graph above 1MiB ...``."""
        return (
            f"copied from {source} ({self.engine}'s row, by scheme): on archs held out, the model loses to copying "
            f"at {self.where} (regret {self.model:.3f} against {self.copy:.3f} over {self.points} sizes of "
            f"{', '.join(self.sweeps)})"
        )


def _region_rows(folds: Sequence[ArchFold]):
    regions: dict[tuple[int, str, int], list[tuple[str, validate.Row]]] = {}
    for fold in folds:
        if is_amd(fold):
            continue  # nothing was copied there
        for score in fold.scores:
            s = score.sweep
            for row in score.rows:
                band = next(
                    i for i, (lo, hi) in enumerate(BANDS) if lo <= row.nbytes and (hi is None or row.nbytes <= hi)
                )
                regions.setdefault((s.world_size, s.mode, band), []).append((s.id, row))
    return regions


def copy_rules(folds: Sequence[ArchFold]) -> tuple[CopyRule, ...]:
    """Every region (world size, mode, size range) where the best copy beat the model on the blind folds."""
    out = []
    for (ws, mode, band), rows in sorted(_region_rows(folds).items()):
        model = geomean([r.regrets["model"] for _, r in rows])
        copies = {who: geomean([r.regrets[who] for _, r in rows]) for who in COPIES}
        who = min(copies, key=copies.__getitem__)
        if copies[who] < model * (1 - MARGIN) and len(rows) >= MIN_POINTS:
            lo, hi = BANDS[band]
            ids = tuple(dict.fromkeys(i for i, _ in rows))
            out.append(CopyRule(ws, mode, lo, hi, who.removesuffix(" copy"), model, copies[who], len(rows), ids))
    return tuple(out)


def hybrid_regrets(score: validate.SweepScore, rules: Sequence[CopyRule]) -> list[float]:
    """The hybrid's regret per size: a covering rule's copy, else the model (an AMD GPU's: no rule copies)."""
    s = score.sweep
    if validate.kind_of(s.preset) != "cuda":
        return [row.regrets["model"] for row in score.rows]
    out = []
    for row in score.rows:
        rule = next((r for r in rules if r.covers(s.world_size, s.mode, row.nbytes)), None)
        out.append(row.regrets[f"{rule.engine} copy"] if rule else row.regrets["model"])
    return out


def hybrid_scores(folds: Sequence[ArchFold]) -> dict[str, dict[str, float]]:
    """Per sweep id, the hybrid's geomean regret: ``hybrid`` with the rules of every fold (what the table
    does), ``hybrid, nested`` with the rules of the other arches' folds only (an honest blind score)."""
    every = copy_rules(folds)
    out: dict[str, dict[str, float]] = {}
    for fold in folds:
        nested = copy_rules([f for f in folds if f.arch != fold.arch])
        for score in fold.scores:
            out[score.sweep.id] = {
                "hybrid": geomean(hybrid_regrets(score, every)),
                "hybrid, nested": geomean(hybrid_regrets(score, nested)),
            }
    return out


# ------------------------------------------------------------------ calibrated intervals


@dataclass(frozen=True)
class Calibration:
    """Split-conformal over the blind folds' sweeps: a plan's stated p90 is its predicted regret times ``factor``.

    The errors are the model's own (not the hybrid's, which copies where the
    model lost): ``log(blind regret / the fold model's predicted regret)``
    per blind sweep. ``covered`` counts the sweeps whose regret the factor
    from every other blind sweep covers; ``arch_covered`` the same with the
    factor from the other archs' sweeps only (a stricter split).
    """

    factor: float
    units: int
    covered: int
    arch_covered: int

    @property
    def coverage(self) -> float:
        return self.covered / self.units if self.units else 0.0

    @property
    def arch_coverage(self) -> float:
        return self.arch_covered / self.units if self.units else 0.0

    def __str__(self) -> str:
        return (
            f"p90 = predicted x {self.factor:.3f} (split-conformal over {self.units} blind-arch sweeps; "
            f"covers {self.covered}/{self.units} = {self.coverage:.0%} of them left out)"
        )


def conformal_factor(errors: Sequence[float], level: float = LEVEL) -> float:
    """The split-conformal quantile of ``log(actual / predicted)`` errors, as a factor (>= 1)."""
    if not errors:
        return 1.0
    ordered = sorted(errors)
    k = min(len(ordered), math.ceil((len(ordered) + 1) * level)) - 1
    return math.exp(max(0.0, ordered[k]))


def calibrate(folds: Sequence[ArchFold], who: str = "model", level: float = LEVEL, amd: bool = False) -> Calibration:
    """The factor over every blind sweep's error, and how often it covers a sweep left out of it: over the
    NVIDIA folds, or (``amd``) the AMD ones."""
    units = [
        (f.arch, math.log(s.geomean(who) / p), s.geomean(who), p)
        for f in folds
        if is_amd(f) == amd
        for s, p in zip(f.scores, f.predicted, strict=True)
    ]
    covered = arch_covered = 0
    for i, (arch, _e, actual, predicted) in enumerate(units):
        others = [e for j, (_a, e, _r, _p) in enumerate(units) if j != i]
        other_archs = [e for a, e, _r, _p in units if a != arch]
        covered += actual <= predicted * conformal_factor(others, level) * (1 + 1e-9)
        arch_covered += actual <= predicted * conformal_factor(other_archs, level) * (1 + 1e-9)
    return Calibration(conformal_factor([e for _a, e, _r, _p in units], level), len(units), covered, arch_covered)


# ------------------------------------------------------------------ what the stored fit keeps


def stored_summary(folds: Sequence[ArchFold], weight: float, totals: Mapping[float, float]) -> dict:
    """What ``gpu-fit.json`` keeps of the folds (``GpuFit.blind``): plain data; the AMD folds' under ``rocm``."""
    cal_ = calibrate(folds)
    hybrid = hybrid_scores(folds)
    scores = [s for f in folds if not is_amd(f) for s in f.scores]
    score = {who: geomean([s.geomean(who) for s in scores]) for who in ("model", *COPIES, *ENGINES)}
    score |= {k: geomean([hybrid[s.sweep.id][k] for s in scores]) for k in ("hybrid", "hybrid, nested")}
    return {
        "claim_weight": weight,
        "claim_weights": {f"{w:g}": round(t, 4) for w, t in totals.items()},
        "factor": round(cal_.factor, 4),
        "units": cal_.units,
        "covered": cal_.covered,
        "arch_covered": cal_.arch_covered,
        "archs": [f.arch for f in folds if not is_amd(f)],
        "score": {k: round(v, 4) for k, v in score.items()},
        "rules": [
            {**r.__dict__, "model": round(r.model, 4), "copy": round(r.copy, 4), "sweeps": list(r.sweeps)}
            for r in copy_rules(folds)
        ],
        "rocm": amd_summary(folds),
    }


def amd_summary(folds: Sequence[ArchFold]) -> dict:
    """The AMD folds: their archs and sweeps, the model's geomean regret and RCCL's where it was measured at
    every size (``rccl_sweeps`` of them), and the AMD plans' calibrated interval."""
    amd = [f for f in folds if is_amd(f)]
    if not amd:
        return {}
    scores = [s for f in amd for s in f.scores]
    against = [s for s in scores if "rccl" in s.rows[0].regrets]
    cal_ = calibrate(folds, amd=True)
    out = {
        "archs": [f.arch for f in amd],
        "units": cal_.units,
        "covered": cal_.covered,
        "arch_covered": cal_.arch_covered,
        "factor": round(cal_.factor, 4),
        "score": {"model": round(geomean([s.geomean("model") for s in scores]), 4)},
        "rccl_sweeps": len(against),
    }
    if against:
        out["score"] |= {
            "model, where RCCL was measured": round(geomean([s.geomean("model") for s in against]), 4),
            "rccl": round(geomean([s.geomean("rccl") for s in against]), 4),
        }
    return out


def rules_from(blind: Mapping) -> tuple[CopyRule, ...]:
    """The copy rules a stored fit keeps."""
    return tuple(CopyRule(**{**r, "sweeps": tuple(r["sweeps"])}) for r in blind.get("rules", ()))


def score_line(blind: Mapping, amd: bool = False) -> str:
    """One line: the blind-arch score behind a modelled figure (``amd``: an AMD GPU's, from the AMD folds)."""
    if amd:
        return amd_score_line(blind.get("rocm", {}))
    if not blind:
        return "not validated on archs held out"
    s = blind["score"]
    return (
        f"on {len(blind['archs'])} archs held out ({', '.join(blind['archs'])}; {blind['units']} sweeps): model "
        f"{s['model']:.3f}, hybrid {s['hybrid']:.3f}, nearest-arch copy {min(s[c] for c in COPIES):.3f} geomean regret"
    )


def amd_score_line(amd: Mapping) -> str:
    """One line: the AMD folds' score behind a modelled figure for an AMD GPU."""
    if not amd:
        return "not validated on an AMD arch held out"
    s = amd["score"]
    text = (
        f"on {len(amd['archs'])} AMD arch(s) held out ({', '.join(amd['archs'])}; {amd['units']} sweeps): model "
        f"{s['model']:.3f} geomean regret"
    )
    if amd.get("rccl_sweeps"):
        text += (
            f"; on the {amd['rccl_sweeps']} that measured RCCL at every size: model "
            f"{s['model, where RCCL was measured']:.3f}, RCCL at every size {s['rccl']:.3f}"
        )
    return text + f"; interval p90 = predicted x {amd['factor']:.3f} ({amd['covered']}/{amd['units']} covered)"
