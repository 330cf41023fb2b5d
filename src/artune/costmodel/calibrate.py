"""Fit the GPU forms on published latencies and crossovers; bootstrap; let the data choose per-world-size terms.

Data (``Data``): the per-size sweeps of ``artune.costmodel.published`` and the
crossovers that SGLang's SM90 (tuned on H200) and SM100 (tuned on B200)
tables claim, every world size and both modes. A claim is not a timing: it
weighs ``Data.claim_weight`` per group against one sweep, the weight the
blind-arch folds choose (``artune.costmodel.blind.choose_claim_weight``), and an
arch whose rows copy another's makes no claim. SGLang's SM107
(Rubin) table and TensorRT-LLM's strategy tables are never fitted: they are
the held-out crossovers (``HELD_OUT``).

Loss: every sweep counts equally (each point weighs ``1 / points in its
sweep``), and every crossover group (one arch, one mode) weighs the claims'
weight. A sweep
point's residual is ``log(predicted / measured)`` with the sweep's own
offset added to every kernel (its harness's per-call cost, the same for all
of its kernels); a crossover's is ``log(predicted / published)`` (for a
lower bound, only a prediction below it counts). Huber weights (10% for
times, 30% for crossovers) keep an outlier from pulling the fit. Weak
log-normal priors (``gpu.PARAMS``: NCCL's own ``tuning.cc`` figures, unit
efficiencies) hold parameters the data says little about. The fit is
Levenberg-Marquardt in log parameters, numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from artune import catalog
from artune.costmodel import gpu
from artune.costmodel.published import SWEEPS, Sweep

KiB, MiB = 1 << 10, 1 << 20
UNTUNED = 100 * MiB  # SGLang's 128 MB "untuned maximum": a crossover at or above it is a lower bound
LO, HI = 4 * KiB, float(1 << 30)
FAMILY_PRESET = {"9.0": "h200", "10.0": "b200", "10.7": "rubin"}  # the GPU each SGLang table was tuned on
HUBER_TIME, HUBER_CROSS = 0.10, 0.30
PRIOR_WEIGHT = 0.002
#: what one claimed crossover group (one arch and mode of a hand table) weighs against one sweep; the
#: blind-arch folds choose among these (``artune.costmodel.blind.choose_claim_weight``)
CLAIM_WEIGHTS = (0.0, 0.1, 0.3, 1.0)


@dataclass(frozen=True)
class ClaimedCrossover:
    """A hand table's crossover: where its author says ``lead`` (one-shot unless said) stops being the
    fastest, and what replaces it. A claim, not a timing: the fit weighs claims apart from the sweeps
    (``Data.claim_weight``)."""

    source: str
    arch: str
    preset: str
    world_size: int
    mode: str
    nbytes: int
    lower_bound: bool = False  # the band reaches the table's maximum
    rival: str = "2shot_pull"  # what the publisher switches to
    lead: str = "1shot_push"
    start: int = 0  # where the lead's band starts (for the record: the fit asks where the lead loses for good)

    @property
    def group(self) -> str:
        return f"{self.source} {self.arch} {self.mode}"

    @property
    def one_shot(self) -> bool:
        """Whether this is where one-shot ends (the view the crossover tables report)."""
        return catalog.scheme_of(self.lead) is catalog.Scheme.ONE_SHOT


#: TensorRT-LLM ``AllReduceBestStrategyTableSM90/SM100``, fusion NONE, hidden 8192, bf16 (NVIDIA/TensorRT-LLM
#: ``cpp/tensorrt_llm/common/customAllReduceUtils.h``, commit 005b299): ONESHOT up to this size, then TWOSHOT
#: (or NCCL at ws 2, where the IPC workspace cap ends the custom kernels: a lower bound). No multicast in that
#: choice.
TRTLLM = (
    ClaimedCrossover("TRT-LLM", "9.0", "h100-sxm", 2, "graph", 8 * MiB, lower_bound=True, rival="nccl"),
    ClaimedCrossover("TRT-LLM", "9.0", "h100-sxm", 4, "graph", 256 * KiB),
    ClaimedCrossover("TRT-LLM", "9.0", "h100-sxm", 8, "graph", 256 * KiB),
    ClaimedCrossover("TRT-LLM", "10.0", "b200", 2, "graph", 8 * MiB, lower_bound=True, rival="nccl"),
    ClaimedCrossover("TRT-LLM", "10.0", "b200", 4, "graph", 2 * MiB),
    ClaimedCrossover("TRT-LLM", "10.0", "b200", 8, "graph", 1 * MiB),
)


def sglang_crossovers(archs: Iterable[str] = ("9.0", "10.0", "10.7"), every: bool = False) -> list[ClaimedCrossover]:
    """SGLang's crossovers per (arch, world size, mode) from the bundled reference tables.

    By default where one-shot ends; ``every``: each boundary where the first
    choice changes kernel (one-shot to two-shot, two-shot to multicast, to
    NCCL above the last band, ...), a boundary at SGLang's untuned maximum
    being a lower bound. NCCL is never a lead (its lines are a minimum).
    """
    from artune.formats.references import reference_set

    out: list[ClaimedCrossover] = []
    tables = reference_set("sglang").tables
    copies = copied(tables)
    for arch in archs:
        if arch in copies:
            continue  # rows copied from another arch are no claim about this one
        # the rows as SGLang wrote them (from its sweeps) are the publisher's crossovers; the 16 MiB
        # workspace clip that the reference applies at run time is not one; one host's rows (its plans
        # across a rack run the same rows again)
        for plan in (p.as_written() for p in tables[arch].plans if p.hosts == 1):
            bands = plan.bands
            names = [b.candidates[0] for b in bands] + [plan.fallback]
            ends = [b.upto if b.upto is not None else int(HI) for b in bands]
            start = 0
            for i, end in enumerate(ends):
                lead, rival = names[i], names[i + 1]
                if gpu.KERNEL_OF[lead] != gpu.KERNEL_OF[rival] and lead != "nccl":
                    c = ClaimedCrossover("SGLang", arch, FAMILY_PRESET[arch], plan.world_size, plan.mode, end)
                    # the forms do not tell push from pull: the rival is the model's own name for its kernel
                    rival = gpu.candidate(rival) or rival
                    out.append(replace(c, lower_bound=end >= UNTUNED, rival=rival, lead=lead, start=start))
                    if not every:
                        break
                if gpu.KERNEL_OF[lead] != gpu.KERNEL_OF[rival]:
                    start = end + 1
    return out


def copied(tables: Mapping[str, Any]) -> set[str]:
    """The archs whose plans repeat an earlier arch's in every world size and mode (``artune check``'s rule)."""
    from artune.table.check import copied_archs

    rows = {arch: {(p.world_size, p.mode): (p.bands, p.fallback) for p in t.plans} for arch, t in tables.items()}
    return {arch for arch, _parent, _equal, _total in copied_archs({"plans": {a: rows[a] for a in rows}})}


def training_crossovers() -> list[ClaimedCrossover]:
    """The crossovers every fit may use: every boundary of SGLang SM90 and SM100, all world sizes, both modes."""
    return sglang_crossovers(("9.0", "10.0"), every=True)


def held_out_crossovers() -> list[ClaimedCrossover]:
    """Never fitted: SGLang SM107 (Rubin) and TensorRT-LLM's tables."""
    return sglang_crossovers(("10.7",)) + list(TRTLLM)


@dataclass(frozen=True)
class Data:
    """What one fit sees."""

    sweeps: tuple[Sweep, ...] = SWEEPS
    crossovers: tuple[ClaimedCrossover, ...] = ()
    claim_weight: float = 1.0  # one claimed crossover group against one sweep

    def without(self, sweep_id: str) -> Data:
        return replace(self, sweeps=tuple(s for s in self.sweeps if s.id != sweep_id))

    def without_arch(self, arch: str) -> Data:
        """A new GPU arriving: none of ``arch``'s sweeps and none of its claims."""
        from artune.costmodel.presets import load_preset

        return replace(
            self,
            sweeps=tuple(s for s in self.sweeps if load_preset(s.preset).arch != arch),
            crossovers=tuple(c for c in self.crossovers if c.arch != arch),
        )

    @property
    def fitted(self) -> tuple[ClaimedCrossover, ...]:
        """The claims the fit weighs (none at weight 0)."""
        return self.crossovers if self.claim_weight > 0 else ()


def default_data(claim_weight: float = 1.0) -> Data:
    return Data(SWEEPS, tuple(training_crossovers()), claim_weight)


# ------------------------------------------------------------------ machines


def machine_for(preset: str, unseen_rule: str = "between") -> gpu.Machine:
    """The forms' view of a bundled preset."""
    from artune.costmodel.presets import load_preset

    return load_preset(preset).machine(unseen_rule)


def family_bandwidth() -> dict[str, float]:
    """The NVLink GB/s per direction of each fitted family's reference GPU (H200, B200)."""
    return {"9": machine_for("h200").nvlink_GBps, "10": machine_for("b200").nvlink_GBps}


# ------------------------------------------------------------------ the problem


def parameter_names(terms: Sequence[str] = ()) -> list[str]:
    """Physical parameters, then the chosen per-world-size terms (``term@wsN``)."""
    names = list(gpu.PARAMS)
    names += [gpu.family_name(k, f) for f in gpu.FAMILIES for k in gpu.FAMILY_PARAMS]
    return names + list(terms)


def prior(name: str) -> tuple[float, float]:
    """The prior centre and log-sd of parameter ``name``."""
    if name in gpu.PARAMS:
        return gpu.PARAMS[name][:2]
    base = name.partition("@")[0]
    if base in gpu.FAMILY_PARAMS:
        return gpu.FAMILY_PARAMS[base][:2]
    if base in gpu.TERMS:
        return 1.0, gpu.TERM_PRIOR_SD
    raise KeyError(name)


class Problem:
    """Residuals of one data set for batches of parameter vectors (log space)."""

    def __init__(self, data: Data, terms: Sequence[str] = ()) -> None:
        self.data = data
        self.terms = tuple(terms)
        self.names = parameter_names(terms)
        self.sweeps = [s for s in data.sweeps]
        self.offsets = [f"offset:{s.id}" for s in self.sweeps]
        self.all_names = self.names + self.offsets
        self.bandwidth = family_bandwidth()
        self.machines = {p: machine_for(p) for p in {s.preset for s in self.sweeps} | {c.preset for c in data.fitted}}
        centres = np.array([prior(n)[0] for n in self.names])
        self.prior_centre = np.log(centres)
        self.prior_sd = np.array([prior(n)[1] for n in self.names])
        # per sweep and kernel: sizes, times
        self.columns: list[tuple[int, str, np.ndarray, np.ndarray]] = []
        weights, kinds = [], []
        for i, s in enumerate(self.sweeps):
            pts = s.points()
            for kernel in s.kernels:
                n = np.array([n for n, k, _ in pts if k == kernel], dtype=float)
                t = np.array([t for _, k, t in pts if k == kernel], dtype=float)
                self.columns.append((i, kernel, n, t))
                weights += [1.0 / len(pts)] * len(n)
                kinds += [0] * len(n)
        groups: dict[str, int] = {}
        for c in data.fitted:
            groups[c.group] = groups.get(c.group, 0) + 1
        for c in data.fitted:
            weights.append(data.claim_weight / groups[c.group])
            kinds.append(1)
        weights += [PRIOR_WEIGHT] * len(self.names)
        kinds += [2] * len(self.names)
        self.weights = np.array(weights)
        self.huber = np.array([HUBER_TIME, HUBER_CROSS, np.inf])[np.array(kinds)]
        self.lower = np.concatenate([self.prior_centre - 7.0, np.full(len(self.offsets), math.log(0.01))])
        self.upper = np.concatenate([self.prior_centre + 7.0, np.full(len(self.offsets), math.log(1000.0))])
        for i, name in enumerate(self.names):
            if name.startswith("link@"):
                self.upper[i] = 0.0  # a kernel does not move more than its link: a fraction of at most 1

    def theta(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """``x`` (b, k) in log space -> name -> (b,)."""
        values = np.exp(np.atleast_2d(x))
        return {name: values[:, i] for i, name in enumerate(self.all_names)}

    def residuals(self, x: np.ndarray) -> np.ndarray:
        """Residual vectors, shape (b, N): sweep points, crossovers, priors."""
        x = np.atleast_2d(x)
        th = self.theta(x)
        cache: dict[tuple[str, str, int, str], list[tuple[np.ndarray, np.ndarray]]] = {}

        def lines(kernel: str, preset: str, p: int, mode: str) -> list[tuple[np.ndarray, np.ndarray]]:
            key = (kernel, preset, p, mode)
            if key not in cache:
                cache[key] = gpu.kernel_lines(th, kernel, self.machines[preset], p, mode, self.bandwidth)
            return cache[key]

        out = []
        for i, kernel, n, t in self.columns:
            s = self.sweeps[i]
            pred = np.minimum.reduce(
                [a[:, None] + b[:, None] * n[None, :] for a, b in lines(kernel, s.preset, s.world_size, s.mode)]
            )
            pred = pred + th[self.offsets[i]][:, None]
            out.append(np.log(np.maximum(pred, 1e-6) / t[None, :]))
        for c in self.data.fitted:
            (lead,) = lines(gpu.KERNEL_OF[c.lead], c.preset, c.world_size, c.mode)
            rival = lines(gpu.KERNEL_OF[c.rival], c.preset, c.world_size, c.mode)
            r = np.log(gpu.first_crossing(lead, rival, LO, HI) / c.nbytes)
            out.append((np.minimum(0.0, r) if c.lower_bound else r)[:, None])
        out.append((x[:, : len(self.names)] - self.prior_centre) / self.prior_sd)
        return np.concatenate(out, axis=1)

    def loss(self, r: np.ndarray) -> np.ndarray:
        """The weighted Huber loss of residual vectors (b, N) -> (b,)."""
        a = np.abs(r)
        h = self.huber
        rho = np.where(a <= h, 0.5 * a**2, h * (a - 0.5 * h))
        return (rho * self.weights).sum(axis=1)


def predicted_crossover(
    theta: gpu.Theta, c: ClaimedCrossover, machine: gpu.Machine, bandwidth: Mapping[str, float]
) -> np.ndarray:
    """Where the model's ``c.lead`` becomes slower than what the publisher switches to (b,)."""
    (lead,) = gpu.kernel_lines(theta, gpu.KERNEL_OF[c.lead], machine, c.world_size, c.mode, bandwidth)
    rival = gpu.kernel_lines(theta, gpu.KERNEL_OF[c.rival], machine, c.world_size, c.mode, bandwidth)
    return gpu.first_crossing(lead, rival, LO, HI)


def crossover_log_ratio(
    theta: gpu.Theta, c: ClaimedCrossover, machine: gpu.Machine, bandwidth: Mapping[str, float]
) -> np.ndarray:
    """``log(predicted / published)``; for a lower bound only a prediction below it counts."""
    r = np.log(predicted_crossover(theta, c, machine, bandwidth) / c.nbytes)
    return np.minimum(0.0, r) if c.lower_bound else r


# ------------------------------------------------------------------ the fit


@dataclass(frozen=True)
class Result:
    """A fit: parameter names and values (offsets included), its loss and iterations."""

    names: tuple[str, ...]
    values: np.ndarray
    loss: float
    iterations: int
    terms: tuple[str, ...] = ()
    offsets: Mapping[str, float] = field(default_factory=dict, hash=False)

    def theta(self) -> dict[str, np.ndarray]:
        return {n: np.array([v]) for n, v in zip(self.names, self.values, strict=True)}

    def value(self, name: str) -> float:
        return float(self.values[self.names.index(name)])


def _start(problem: Problem, start: Result | None) -> np.ndarray:
    x = np.concatenate([problem.prior_centre, np.full(len(problem.offsets), math.log(3.0))])
    if start is not None:
        known = dict(zip(start.names, np.log(start.values), strict=True))
        known.update({f"offset:{k}": math.log(v) for k, v in start.offsets.items()})
        x = np.array([known.get(n, xi) for n, xi in zip(problem.all_names, x, strict=True)])
    return np.clip(x, problem.lower, problem.upper)


_SCAN = np.log([0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 1.02, 1.05, 1.1, 1.25, 1.4, 2.0])


def _polish(problem: Problem, x: np.ndarray, loss: float) -> tuple[np.ndarray, float, bool]:
    """One pass of batched scans along each parameter: the piecewise forms have kinks where the local steps stop."""
    moved = False
    for i in range(len(x)):
        batch = np.repeat(x[None, :], len(_SCAN), axis=0)
        batch[:, i] = np.clip(batch[:, i] + _SCAN, problem.lower[i], problem.upper[i])
        losses = problem.loss(problem.residuals(batch))
        j = int(np.argmin(losses))
        if losses[j] < loss - 1e-9:
            x, loss, moved = batch[j], float(losses[j]), True
    return x, loss, moved


def _levenberg_marquardt(problem: Problem, x: np.ndarray, iterations: int) -> tuple[np.ndarray, float, int]:
    """LM steps with Huber weights (IRLS) from ``x``: the point, its loss, the iterations taken."""
    k = len(x)
    step = 1e-4
    lam = 1e-2
    r0 = problem.residuals(x)[0]
    loss = float(problem.loss(r0[None, :])[0])
    done = 0
    while done < iterations:
        done += 1
        batch = np.vstack([x, x + step * np.eye(k)])
        r = problem.residuals(batch)
        r0 = r[0]
        jac = (r[1:] - r0) / step  # (k, N)
        a = np.abs(r0)
        w = problem.weights * np.where(a <= problem.huber, 1.0, problem.huber / np.maximum(a, 1e-12))
        # einsum, not @: BLAS would start its threads for these small products, and on a busy machine they spin
        hess = np.einsum("in,jn->ij", jac * w, jac)
        grad = np.einsum("in,n->i", jac * w, r0)
        improved, gain = False, 0.0
        while lam < 1e10:
            damped = hess + lam * np.diag(np.diag(hess) + 1e-9)
            try:
                delta = -np.linalg.solve(damped, grad)
            except np.linalg.LinAlgError:
                lam *= 10
                continue
            trial = np.clip(x + delta, problem.lower, problem.upper)
            trial_loss = float(problem.loss(problem.residuals(trial))[0])
            if trial_loss < loss:
                gain = loss - trial_loss
                x, loss, lam = trial, trial_loss, max(lam / 3, 1e-7)
                improved = True
                break
            lam *= 4
        if not improved or gain < 1e-6 * max(1.0, loss):
            break
    return x, loss, done


def fit(
    data: Data, terms: Sequence[str] = (), start: Result | None = None, iterations: int = 200, polish: int = 8
) -> Result:
    """Levenberg-Marquardt with Huber weights (IRLS) in log parameters, within bounds, then coordinate scans
    (``polish`` passes at most) and LM again, until neither moves."""
    problem = Problem(data, terms)
    x = _start(problem, start)
    known = set(start.names) if start is not None else set()
    for i, name in enumerate(problem.names):
        if name in problem.terms and name not in known:
            # a new term starts where it fits best with the rest held (one batched scan): a warm start at 1
            # can sit in a kink of the crossovers' piecewise forms that the local steps do not leave
            batch = np.repeat(x[None, :], 41, axis=0)
            batch[:, i] += np.linspace(-2.0, 2.0, 41)
            x = batch[int(np.argmin(problem.loss(problem.residuals(batch))))]
    x, loss, done = _levenberg_marquardt(problem, x, iterations)
    for _ in range(polish):
        x, loss, moved = _polish(problem, x, loss)
        if not moved:
            break
        x, loss, more = _levenberg_marquardt(problem, x, iterations)
        done += more
    values = np.exp(x)
    names = problem.names
    offsets = {s.id: float(v) for s, v in zip(problem.sweeps, values[len(names) :], strict=True)}
    return Result(tuple(names), values[: len(names)], loss, done, tuple(terms), offsets)


def residuals_of(result: Result, data: Data) -> dict[str, np.ndarray]:
    """Per sweep id the time residuals, and ``"crossovers"`` their log ratios, at ``result``."""
    problem = Problem(data, result.terms)
    x = _start(problem, result)
    r = problem.residuals(x)[0]
    out: dict[str, list[float]] = {}
    at = 0
    for i, _kernel, n, _t in problem.columns:
        out.setdefault(problem.sweeps[i].id, []).extend(r[at : at + len(n)])
        at += len(n)
    out["crossovers"] = list(r[at : at + len(data.fitted)])
    return {k: np.array(v) for k, v in out.items()}


# ------------------------------------------------------------------ per-world-size terms


def crossover_loss(result: Result, crossovers: Sequence[ClaimedCrossover]) -> float:
    """The mean Huber loss of ``crossovers`` (log ratios) under ``result``."""
    th = result.theta()
    bandwidth = family_bandwidth()
    r = np.array([float(crossover_log_ratio(th, c, machine_for(c.preset), bandwidth)[0]) for c in crossovers])
    a = np.abs(r)
    return float(np.mean(np.where(a <= HUBER_CROSS, 0.5 * a**2, HUBER_CROSS * (a - 0.5 * HUBER_CROSS))))


def group_cv_loss(data: Data, terms: Sequence[str], start: Result | None = None) -> float:
    """Leave one crossover group (arch, mode) out: the summed loss of each group under a fit without it."""
    groups = sorted({c.group for c in data.fitted})
    total = 0.0
    for g in groups:
        kept = tuple(c for c in data.crossovers if c.group != g)
        fold = fit(replace(data, crossovers=kept), terms, start, polish=2)
        total += crossover_loss(fold, [c for c in data.crossovers if c.group == g])
    return total


def candidate_terms(data: Data) -> list[str]:
    """Every per-world-size term for the world sizes the crossovers have."""
    sizes = sorted({c.world_size for c in data.fitted})
    return [gpu.term_name(t, ws) for t in gpu.TERMS for ws in sizes]


TERM_GAIN = 0.02  # a term is kept when it cuts the cross-validated loss by at least 2% (and by 1e-4)
SCREEN = 6  # candidates tried by cross-validation per step: the best ones by training loss


def select_terms(data: Data, max_terms: int = 4, log: list[str] | None = None) -> tuple[str, ...]:
    """Forward selection: add the term that most lowers the leave-one-group-out crossover loss, while it pays.

    Each step screens the candidates by the training loss they buy (the best
    ``SCREEN``), cross-validates those by crossover group (fit without one
    arch-and-mode group, score it) and keeps the best if it lowers the
    cross-validated loss by ``TERM_GAIN`` or more. ``log`` collects a line per
    step (what was tried, what it bought).
    """
    chosen: list[str] = []
    base = fit(data)
    current = group_cv_loss(data, chosen, base)
    for _ in range(max_terms):
        tried = [t for t in candidate_terms(data) if t not in chosen]
        gains = sorted(((base.loss - fit(data, [*chosen, t], base, polish=0).loss, t) for t in tried), reverse=True)
        screened = [t for gain, t in gains[:SCREEN] if gain > 0]
        if not screened:
            break
        scored = sorted((group_cv_loss(data, [*chosen, t], base), t) for t in screened)
        best_loss, best = scored[0]
        if log is not None:
            log.append(
                f"cross-validated loss {current:.4f}; best candidate {best} -> {best_loss:.4f} "
                f"(tried {', '.join(t for _, t in scored)})"
            )
        if best_loss > current * (1 - TERM_GAIN) or best_loss > current - 1e-4:
            break
        chosen.append(best)
        current = best_loss
        base = fit(data, chosen, base)
    return tuple(chosen)


# ------------------------------------------------------------------ bootstrap and the stored fit

REPLICATES = 200
SEED = 20261201


def resample(data: Data, rng: np.random.Generator) -> Data:
    """A bootstrap data set: sweeps drawn with replacement within each arch family (a sweep is one unit:
    its points share a harness and a GPU), crossovers within each group."""
    by_family: dict[str, list[Sweep]] = {}
    for s in data.sweeps:
        by_family.setdefault(machine_for(s.preset).family, []).append(s)
    sweeps: list[Sweep] = []
    for members in by_family.values():
        for j, i in enumerate(rng.integers(0, len(members), len(members))):
            sweeps.append(replace(members[i], id=f"{members[i].id}#{j}"))
    groups: dict[str, list[ClaimedCrossover]] = {}
    for c in data.crossovers:
        groups.setdefault(c.group, []).append(c)
    crossovers = [m[i] for m in groups.values() for i in rng.integers(0, len(m), len(m))]
    return Data(tuple(sweeps), tuple(crossovers), data.claim_weight)


def bootstrap(
    data: Data, terms: Sequence[str], central: Result, replicates: int = REPLICATES, seed: int = SEED
) -> np.ndarray:
    """Parameter vectors of refits on resampled data, shape ``(replicates, len(central.names))``."""
    rng = np.random.default_rng(seed)
    out = np.empty((replicates, len(central.names)))
    for i in range(replicates):
        out[i] = fit(resample(data, rng), terms, central, iterations=30, polish=1).values
    return out


def crossover_residuals(result: Result, data: Data) -> tuple[float, ...]:
    """The training claims' log(predicted / claimed), lower bounds that hold left out (whatever they weighed)."""
    th, bandwidth = result.theta(), family_bandwidth()
    out = []
    for c in data.crossovers:
        r = float(crossover_log_ratio(th, c, machine_for(c.preset), bandwidth)[0])
        if not (c.lower_bound and r == 0.0):
            out.append(r)
    return tuple(out)


def overheads(result: Result, data: Data) -> dict[str, float]:
    """The per-call overhead common to all kernels, per ``family/mode``: the median of the sweeps' offsets."""
    values: dict[str, list[float]] = {}
    for s in data.sweeps:
        if s.id in result.offsets:
            values.setdefault(f"{machine_for(s.preset).family}/{s.mode}", []).append(result.offsets[s.id])
    return {k: float(np.median(v)) for k, v in sorted(values.items())}


def stored_fit(
    data: Data,
    terms: Sequence[str],
    central: Result,
    replicates: np.ndarray,
    seed: int = SEED,
    blind: Mapping[str, Any] | None = None,
) -> gpu.GpuFit:
    """The fit as ``gpu.GpuFit``, with ``unseen:share`` (1/2 centrally, uniform per replicate) appended."""
    rng = np.random.default_rng(seed + 1)
    names = (*central.names, "unseen:share")
    share = rng.uniform(0.0, 1.0, len(replicates))
    source = (
        f"bench/calibrate_gpu.py: {len(data.sweeps)} sweeps, {len(data.crossovers)} SGLang SM90/SM100 "
        f"claimed crossovers at weight {data.claim_weight:g}; terms {', '.join(terms) or 'none'}; "
        f"{len(replicates)} bootstrap refits"
    )
    return gpu.GpuFit(
        names,
        np.append(central.values, 0.5),
        np.column_stack([replicates, share]),
        family_bandwidth(),
        crossover_residuals(central, data),
        overheads(central, data),
        source,
        dict(central.offsets),
        dict(blind or {}),
    )
