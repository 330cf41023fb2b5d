"""Time per DDP training step with the ``artune`` backend against gloo, side by side in one run.

    python bench/bench_ddp.py [--world-size 2] [--hidden 64,1024] [--steps 60]

Every rank builds, per model size, two identical DDP models over the same
ranks: one on the default gloo group, one on an ``artune`` group (made with
``new_group(backend="artune")``), and trains them on the same data in
alternating steps (gloo, artune, gloo, artune, ...), so drift on this shared
VM hits both alike. A step is forward, backward (DDP's bucket all-reduces)
and an SGD step, timed per rank; the step time is the slowest rank's, and the
median (p20-p80) over the timed steps is printed with the ratio
t(gloo) / t(artune). The two models' parameters must stay equal (with 2
ranks both backends sum a + b exactly), which is checked at the end.

``--hidden`` sets the MLP width (3 layers; 64 gives ~38 KB of gradients,
where latency dominates, 1024 ~8.5 MB, where bandwidth does). Ranks are
pinned to CPU r mod the CPU count and use one thread each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from artune.launch import RankContext, run_ranks


def _model(hidden: int):
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(256, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, 16),
    )  # fmt: skip


def _rank(ctx: RankContext, widths: list[int], steps: int, warmup: int) -> list[dict]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from artune.backend import register

    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[ctx.rank % len(cpus)]})
    register()
    artune_group = dist.new_group(backend="artune")
    out = []
    for hidden in widths:
        models = {"gloo": DDP(_model(hidden)), "artune": DDP(_model(hidden), process_group=artune_group)}
        opts = {name: torch.optim.SGD(m.parameters(), lr=0.01) for name, m in models.items()}
        gen = torch.Generator().manual_seed(ctx.rank)
        times: dict[str, list[float]] = {name: [] for name in models}
        for step in range(warmup + steps):
            x, y = torch.randn(32, 256, generator=gen), torch.randn(32, 16, generator=gen)
            for name, model in models.items():
                start = time.perf_counter()
                opts[name].zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opts[name].step()
                if step >= warmup:
                    times[name].append((time.perf_counter() - start) * 1e6)
        # the slowest rank per step, over gloo (outside the timed region)
        slowest = {}
        for name, values in times.items():
            t = torch.tensor(values, dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            slowest[name] = t.tolist()
        equal = all(
            torch.equal(a, b) for a, b in zip(models["gloo"].parameters(), models["artune"].parameters(), strict=True)
        )
        grad_bytes = sum(p.numel() * p.element_size() for p in models["gloo"].parameters())
        out.append({"hidden": hidden, "grad_bytes": grad_bytes, "slowest": slowest, "equal": equal})
        del models, opts
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--hidden", default="64,1024", help="MLP widths to time, comma-separated")
    parser.add_argument("--steps", type=int, default=60, help="timed steps per backend and width")
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(argv)
    widths = [int(w) for w in args.hidden.split(",")]
    rows = run_ranks(_rank, args.world_size, widths, args.steps, args.warmup, timeout=900)[0]
    print(f"DDP step (forward + backward + SGD), world size {args.world_size}, {args.steps} steps per backend")
    print("| MLP width | gradients | gloo us/step med (p20-p80) | artune us/step med (p20-p80) | t(gloo)/t(artune) "
          "| params equal |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|:---:|")
    for row in rows:
        cells = {}
        for name in ("gloo", "artune"):
            p20, med, p80 = np.percentile(row["slowest"][name], [20, 50, 80])
            cells[name] = (med, f"{med:.0f} ({p20:.0f}-{p80:.0f})")
        ratio = cells["gloo"][0] / cells["artune"][0]
        kib = row["grad_bytes"] / 1024
        print(f"| {row['hidden']} | {kib:.0f} KiB | {cells['gloo'][1]} | {cells['artune'][1]} | {ratio:.2f}x "
              f"| {row['equal']} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
