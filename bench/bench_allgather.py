"""All-gather on the ``artune`` backend (an integer all-reduce of a zeroed buffer) against gloo's, in one run.

    python bench/bench_allgather.py [--world-size 2] [--sizes 4KiB,...,16MiB] [--turns 15] [--burst 10]

Every rank joins the default gloo group and an ``artune`` group over the same
ranks (``new_group(backend="artune")``) and, per size (the gathered output's
bytes, bf16), calls ``dist.all_gather_into_tensor`` on each in turns of
``--burst`` back-to-back calls, gloo and artune alternating, ``--turns`` turns
each. A turn's time per call is the slowest rank's; the median (p20-p80) over
turns is printed with t(gloo)/t(artune). The backend normally sends
all-gathers above ``GATHER_MAX_BYTES`` to gloo; this script lifts that cap so
that the sizes above it show what the cap avoids. Every output is checked bit
for bit (the inputs hold -0.0, inf and NaN too).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from artune.launch import RankContext, run_ranks
from artune.sizes import format_size, parse_size

SIZES = "4KiB,16KiB,64KiB,256KiB,1MiB,4MiB,16MiB"


def _rank(ctx: RankContext, sizes: list[int], turns: int, burst: int) -> dict:
    import torch
    import torch.distributed as dist

    from artune.backend import process_group

    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[ctx.rank % len(cpus)]})
    process_group.GATHER_MAX_BYTES = max(sizes)  # measure the route above the cap too
    groups = {"gloo": dist.group.WORLD, "artune": dist.new_group(backend="artune")}
    out = {}
    for nbytes in sizes:
        n = nbytes // 2 // ctx.world_size
        gen = torch.Generator().manual_seed(ctx.rank)
        inp = torch.randn(n, generator=gen).to(torch.bfloat16)
        inp[:3] = torch.tensor([-0.0, float("inf"), float("nan")])
        want = torch.empty(n * ctx.world_size, dtype=torch.bfloat16)
        dist.all_gather_into_tensor(want, inp, group=groups["gloo"])
        outputs = {name: torch.empty_like(want) for name in groups}
        times: dict[str, list[float]] = {name: [] for name in groups}
        for _ in range(turns):
            for name, group in groups.items():
                for _ in range(2):  # untimed: the other backend's skew is not charged to this one
                    dist.all_gather_into_tensor(outputs[name], inp, group=group)
                start = time.perf_counter()
                for _ in range(burst):
                    dist.all_gather_into_tensor(outputs[name], inp, group=group)
                times[name].append((time.perf_counter() - start) / burst * 1e6)
        exact = all(torch.equal(o.view(torch.int16), want.view(torch.int16)) for o in outputs.values())
        slowest = {}
        for name, values in times.items():
            t = torch.tensor(values, dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            slowest[name] = t.tolist()
        calls = dict(groups["artune"].allgather_calls)
        out[nbytes] = {"slowest": slowest, "exact": exact, "calls": calls}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--sizes", default=SIZES, help="gathered output bytes, comma-separated")
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--burst", type=int, default=10)
    args = parser.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    rows = run_ranks(_rank, args.world_size, sizes, args.turns, args.burst, timeout=900)
    from artune.backend.process_group import GATHER_MAX_BYTES

    print(
        f"all_gather_into_tensor bf16, world size {args.world_size}, {args.turns} turns of {args.burst} calls per "
        f"backend; time per call = the slowest rank's; the backend's cap: {format_size(GATHER_MAX_BYTES)} (lifted here)"
    )
    print("| gathered | gloo us med (p20-p80) | artune us med (p20-p80) | t(gloo)/t(artune) | bit-exact |")
    print("|---:|---:|---:|---:|:---:|")
    for nbytes, row in rows[0].items():
        cells = {}
        for name in ("gloo", "artune"):
            p20, med, p80 = np.percentile(row["slowest"][name], [20, 50, 80])
            cells[name] = (med, f"{med:.1f} ({p20:.0f}-{p80:.0f})")
        exact = all(r[nbytes]["exact"] for r in rows)
        print(
            f"| {format_size(nbytes)} | {cells['gloo'][1]} | {cells['artune'][1]} "
            f"| {cells['gloo'][0] / cells['artune'][0]:.2f}x | {exact} |"
        )
    calls = rows[0][sizes[-1]]["calls"]
    print(f"\nall-gathers the artune group ran itself / sent to gloo: {calls}")
    return 0 if all(r[n]["exact"] for r in rows for n in sizes) else 1


if __name__ == "__main__":
    sys.exit(main())
