"""Validate the cost model on CPU: fit world sizes 2 and 4, predict 3; fit a coarse size grid, check off-grid.

    flock /tmp/artune-cpu.lock python bench/model_cpu_ws3.py --out DIR [--budget SECONDS]

Runs ``artune tune --world-size 2 --world-size 3 --world-size 4 --no-install``
into ``DIR`` (a rerun resumes the logs), then:

1. fits the model on the world-size 2 and 4 logs only, builds the world-size 3
   plan (``artune plan``'s code) and measures its regret on every size of the
   world-size 3 log: ``time(plan's choice) / time(fastest algorithm)`` at that
   size, all at default parameters. Side by side: artune's rule for a
   missing world size (the measured world-size 2 plan) and the table tuned on
   world size 3 itself;
2. fits world sizes 2 and 4 on a coarse grid only (powers of 4 bytes) and
   reports the prediction error and the regret of the predicted choice on the
   sizes that grid left out.

World size 3 is more ranks than this machine's 2 cores: the model describes
that (a per-round cost for each rank beyond the cores, byte costs scaled by
ranks per core), fitted on world size 4 (two ranks per core).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from artune.costmodel.cost import fit_logs, fit_points, points_from_logs
from artune.costmodel.fit import Points
from artune.costmodel.plan import build_plan
from artune.measure.stats import geomean
from artune.sizes import format_bound, human_size
from artune.table.decide import decide
from artune.table.io import load_table


def _by_size(points: dict[str, Points], world_size: int) -> dict[int, dict[str, float]]:
    """Default-parameter times at ``world_size``: size -> algorithm -> us, sizes where every algorithm ran."""
    out: dict[int, dict[str, float]] = {}
    for name, pts in points.items():
        for p, n, t in zip(pts.p, pts.n, pts.t, strict=True):
            if int(p) == world_size:
                out.setdefault(int(n), {})[name] = float(t)
    return {n: times for n, times in out.items() if len(times) == len(points)}


def _regret(choose, measured: dict[int, dict[str, float]]) -> tuple[float, float, int, list[str]]:
    regrets, misses = [], []
    for n, times in sorted(measured.items()):
        pick = choose(n)
        r = times[pick] / min(times.values())
        regrets.append(r)
        if r > 1.05:
            misses.append(f"{human_size(n)} {pick} {r:.2f}")
    worst = max(regrets)
    return geomean(regrets), worst, len(regrets), misses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="tune output folder (reused when it has the logs)")
    parser.add_argument("--budget", type=float, default=None, help="tune budget per world size")
    parser.add_argument("--quick", action="store_true", help="tune --quick")
    args = parser.parse_args()
    out = Path(args.out)
    logs = {ws: out / f"measurements-ws{ws}.jsonl" for ws in (2, 3, 4)}
    if not all(p.exists() for p in logs.values()):
        cmd = [sys.executable, "-m", "artune", "tune", "--no-install", "--no-progress", "--out", str(out)]
        cmd += [a for ws in (2, 3, 4) for a in ("--world-size", str(ws))]
        cmd += ["--quick"] if args.quick else []
        cmd += ["--budget", str(args.budget)] if args.budget else []
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    print(f"machine: {os.cpu_count()} cores; logs in {out}\n")

    # 1. world size 3 from 2 and 4
    model = fit_logs([logs[2], logs[4]])
    lo, hi = model.size_range
    predicted = build_plan(model, 3, "eager", lo, hi)
    plan = predicted.plan
    print(f"predicted ws=3 plan: {[(format_bound(b.upto), b.candidates[0]) for b in plan.bands]}, then {plan.fallback}")
    print(f"model's own {predicted.regret}\n")
    every, _, _ = points_from_logs([logs[2], logs[3], logs[4]])
    measured3 = _by_size({a: every[a] for a in model.algorithms}, 3)
    tuned = load_table(out / "table.toml")

    def chooser(table, ws):
        return lambda n: decide(table, n, ws, "eager").algorithm

    from artune.table.types import Table

    modelled = Table(tuned.platform, plan.provenance, (plan,))
    ws2_rule = Table(tuned.platform, tuned.provenance, tuple(p for p in tuned.plans if p.world_size == 2))
    print("| world size 3, regret on every measured size | sizes | geomean | worst | sizes with regret > 1.05 |")
    print("|---|---:|---:|---:|---|")
    for name, choose in (
        ("modelled from ws 2 + 4 (artune plan)", chooser(modelled, 3)),
        ("nearest smaller plan (ws 2, measured)", chooser(ws2_rule, 3)),
        ("tuned on ws 3 itself", chooser(tuned, 3)),
    ):
        geo, worst, count, misses = _regret(choose, measured3)
        print(f"| {name} | {count} | {geo:.3f} | {worst:.2f} | {', '.join(misses) or 'none'} |")

    # prediction error of the times themselves at ws 3
    errs = []
    for n, times in measured3.items():
        for a, t in times.items():
            errs.append(float(model.predict(a, 3, [n])[0]) / t - 1)
    errs_a = np.abs(np.array(errs))
    print(
        f"\nws=3 time prediction: median |error| {np.median(errs_a):.0%}, "
        f"90th percentile {np.percentile(errs_a, 90):.0%} over {len(errs)} (size, algorithm) points"
    )

    # 2. sizes: fit a coarse grid (powers of 4), check the rest
    pts24, _, _ = points_from_logs([logs[2], logs[4]])
    coarse = {
        a: p.take(np.flatnonzero([(int(n) & (int(n) - 1)) == 0 and int(n).bit_length() % 2 == 1 for n in p.n]))
        for a, p in pts24.items()
    }
    grid_model = fit_points(
        coarse,
        kind="cpu",
        arch=model.arch,
        device=model.device,
        cores=model.ctx.cores,
        chunk_bytes=model.ctx.chunk_bytes,
        inputs="coarse grid",
    )
    print("\n| sizes off the coarse grid (powers of 4) | sizes | median abs time error | regret geomean | worst |")
    print("|---|---:|---:|---:|---:|")
    for ws in (2, 4):
        measured = {
            n: t
            for n, t in _by_size({a: pts24[a] for a in grid_model.algorithms}, ws).items()
            if not ((n & (n - 1)) == 0 and n.bit_length() % 2 == 1)
        }
        if not measured:
            continue
        err = [
            abs(float(grid_model.predict(a, ws, [n])[0]) / t - 1) for n, ts in measured.items() for a, t in ts.items()
        ]

        def pick(n, ws=ws):
            times = {a: float(grid_model.predict(a, ws, [n])[0]) for a in grid_model.algorithms}
            return min(times, key=times.__getitem__)

        geo, worst, count, _ = _regret(pick, measured)
        print(f"| ws={ws} | {count} | {np.median(err):.0%} | {geo:.3f} | {worst:.2f} |")


if __name__ == "__main__":
    main()
