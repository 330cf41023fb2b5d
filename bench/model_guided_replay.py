"""Would a model-guided sweep pay on CPU? A replay of real ``artune tune`` logs (issue #20, item 5).

    python bench/model_guided_replay.py DIR/measurements-ws2.jsonl [...] [--start-every 4] [--disagree 0.1]

The tuner's sweep measures every algorithm at every coarse size. The
model-guided alternative measures a sparse start (every ``--start-every``-th
coarse size, both ends included), fits the CPU cost model
(``artune.costmodel.cost.fit_points``) and then measures, one size at a time,
the coarse size where the most bootstrap refits disagree with the central
fit on the fastest algorithm (the least certain crossover first), until no
unmeasured coarse size has ``--disagree`` of the refits disagreeing. Nothing
is measured here: "measuring" a size takes what the log holds for it, so both
strategies see the same figures.

Both are scored on the log's held-out sizes (the tuner's regret phase: every
algorithm measured at off-grid sizes it never swept), as time(choice) /
time(fastest there):

- ``sweep``: every coarse size measured; a held-out size takes the winner at
  its nearest coarse size (in log space);
- ``model``: the measured sizes; a held-out size between two measured sizes
  with the same winner takes it, elsewhere the model's central choice.

Printed per log: coarse measurements (sizes x algorithms) and held-out regret
(geomean, worst) of each, next to the tuner's own table (its report's figure,
which also probes, settles and bisects: more measurements than the sweep).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np

from artune.algorithms.shm.algorithms import DEFAULT_CHUNK_BYTES
from artune.costmodel.cost import CostModel, fit_points
from artune.costmodel.fit import Points
from artune.measure.records import MeasurementLog
from artune.measure.stats import geomean
from artune.sizes import human_size
from artune.tune.config import TuneConfig


def _times(path: Path) -> tuple[dict[int, dict[str, float]], int]:
    """Per size, each default-parameter algorithm's time (us, the latest call); the world size."""
    log = MeasurementLog(path)
    out: dict[int, dict[str, float]] = {}
    for m in log.latest().values():
        if m.ok and not m.candidate.params and math.isfinite(m.time_us) and m.time_us > 0:
            out.setdefault(m.size_bytes, {})[m.candidate.algorithm] = m.time_us
    return out, log.header.world_size


def _fit(times: dict[int, dict[str, float]], sizes: list[int], ws: int, names: list[str]) -> CostModel:
    points = {
        a: Points(np.full(len(sizes), ws, float), np.array(sizes, float), np.array([times[s][a] for s in sizes]))
        for a in names
    }
    return fit_points(
        points,
        kind="cpu",
        arch="",
        device="",
        cores=os.cpu_count(),
        chunk_bytes=DEFAULT_CHUNK_BYTES,
        inputs="replay",
        replicates=100,
    )


def _disagreement(model: CostModel, ws: int, sizes: list[int], names: list[str]) -> np.ndarray:
    """Per size, the share of bootstrap refits whose fastest algorithm is not the central fit's."""
    central = np.argmin(np.stack([model.predict(a, ws, sizes) for a in names]), axis=0)
    reps = np.argmin(np.stack([model.samples(a, ws, sizes) for a in names]), axis=0)  # (replicates, sizes)
    return (reps != central[None, :]).mean(axis=0)


def _winner(row: dict[str, float], names: list[str]) -> str:
    return min(names, key=row.__getitem__)


def _regret(choices: dict[int, str], times: dict[int, dict[str, float]]) -> tuple[float, float]:
    r = [times[s][c] / min(times[s].values()) for s, c in choices.items()]
    return math.exp(sum(map(math.log, r)) / len(r)), max(r)


def replay(path: Path, start_every: int, disagree: float) -> tuple[str, dict[str, tuple[int, float]]]:
    """One log's lines, and per strategy its measurement count and held-out geomean regret."""
    times, ws = _times(path)
    coarse = [s for s in TuneConfig.full().sweep_sizes() if s in times]
    names = sorted(set.intersection(*(set(times[s]) for s in coarse)))
    coarse = [s for s in coarse if all(a in times[s] for a in names)]
    held = sorted(s for s, row in times.items() if s not in coarse and all(a in row for a in names))

    def nearest(s: int, among: list[int]) -> int:
        return min(among, key=lambda c: abs(math.log(c / s)))

    sweep = {s: _winner(times[nearest(s, coarse)], names) for s in held}

    measured = sorted({*coarse[::start_every], coarse[-1]})
    while True:
        model = _fit(times, measured, ws, names)
        rest = [s for s in coarse if s not in measured]
        if not rest:
            break
        share = _disagreement(model, ws, rest, names)
        if share.max() < disagree:
            break
        measured = sorted({*measured, rest[int(np.argmax(share))]})
    guided = {}
    central = dict(zip(held, np.argmin(np.stack([model.predict(a, ws, held) for a in names]), axis=0), strict=True))
    for s in held:
        lo = max((m for m in measured if m <= s), default=None)
        hi = min((m for m in measured if m >= s), default=None)
        same = lo is not None and hi is not None and _winner(times[lo], names) == _winner(times[hi], names)
        guided[s] = _winner(times[lo], names) if same else names[int(central[s])]

    sweep_regret, guided_regret = _regret(sweep, times), _regret(guided, times)
    tuned = _tuned_regret(path.parent / "report.md")
    text = (
        f"{path}: ws={ws}, {len(names)} algorithms ({', '.join(names)}), {len(coarse)} coarse sizes, "
        f"{len(held)} held-out sizes {human_size(held[0])}..{human_size(held[-1])}\n"
        f"  sweep: {len(coarse) * len(names):4d} measurements, held-out regret {sweep_regret[0]:.3f} "
        f"(worst {sweep_regret[1]:.3f})\n"
        f"  model: {len(measured) * len(names):4d} measurements, held-out regret {guided_regret[0]:.3f} "
        f"(worst {guided_regret[1]:.3f}); measured {', '.join(human_size(s) for s in measured)}\n"
        f"  the tuner's own table (report.md): {tuned}"
    )
    counts = {
        "sweep": (len(coarse) * len(names), sweep_regret[0]),
        "model": (len(measured) * len(names), guided_regret[0]),
    }
    return text, counts


def _tuned_regret(report: Path) -> str:
    if not report.is_file():
        return "no report.md beside the log"
    for line in report.read_text(encoding="utf-8").splitlines():
        if line.startswith("Regret on"):
            return line.split(": ", 1)[1].split(";")[0]
    return "not in report.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path, help="artune tune measurement logs (measurements-wsN.jsonl)")
    parser.add_argument("--start-every", type=int, default=4, help="the sparse start: every k-th coarse size")
    parser.add_argument("--disagree", type=float, default=0.1, help="stop when no size has this share of refits")
    options = parser.parse_args(argv)
    totals: dict[str, list[tuple[int, float]]] = {"sweep": [], "model": []}
    for path in options.logs:
        text, counts = replay(path, options.start_every, options.disagree)
        print(text)
        for name, value in counts.items():
            totals[name].append(value)
    if len(options.logs) > 1:
        print(f"over {len(options.logs)} logs (--start-every {options.start_every}, --disagree {options.disagree}):")
        for name, values in totals.items():
            geo = geomean(r for _, r in values)
            print(f"  {name}: {sum(n for n, _ in values)} measurements, held-out regret {geo:.3f} geomean of the logs'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
