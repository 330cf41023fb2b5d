"""``hier_shm`` against the flat gloo all-reduce, ranks split into simulated hosts, side by side in one run.

    python bench/bench_hier_shm.py [--split 2,2] [--sizes 4KiB,64KiB,1MiB,16MiB] [--budget 3]

The ranks run on this machine; ``ARTUNE_HOST`` (artune's host-identity
override for tests and experiments) makes ``--split 2,2`` act as 2 hosts x 2
ranks, so shared memory is used only inside each simulated host and the
leaders' all-reduce goes over gloo's TCP loopback. Per size the artune
harness checks both candidates and times them interleaved (float32 sum, step
time = slowest rank). Prints per size the median (p20-p80) of each and the
ratio t(gloo) / t(hier_shm). On real hosts the leaders' step crosses the
network, which this cannot show: quote the ratios as "simulated hosts".
"""

from __future__ import annotations

import argparse
import os
import sys

from artune.launch import RankContext, run_ranks
from artune.measure.harness import measure
from artune.sizes import format_size, parse_size

CANDIDATES = ("gloo", "hier_shm")


def _rank(ctx: RankContext, hosts: list[str], sizes: list[int], budget: float) -> list[tuple]:
    os.environ["ARTUNE_HOST"] = hosts[ctx.rank]
    import torch

    import artune

    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[ctx.rank % len(cpus)]})
    torch.set_num_threads(1)
    with artune.Communicator(timeout=60, check=False) as comm:
        assert "hier_shm" in comm.algorithms, comm.shm_unavailable_reason
        found = measure(comm, CANDIDATES, sizes, budget_s=budget)
    return [(m.candidate.algorithm, m.size_bytes, m.status, m.nwrong, m.summary) for m in found]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="2,2", help="ranks per simulated host, e.g. 2,2 or 3,1")
    parser.add_argument("--sizes", default="4KiB,64KiB,1MiB,16MiB")
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of timed calls per size")
    args = parser.parse_args(argv)
    split = [int(x) for x in args.split.split(",")]
    hosts = [f"host{h}" for h, n in enumerate(split) for _ in range(n)]
    sizes = [parse_size(s, "--sizes") for s in args.sizes.split(",")]
    rows = run_ranks(_rank, len(hosts), hosts, sizes, args.budget, timeout=600)[0]
    by = {(name, size): (status, nwrong, s) for name, size, status, nwrong, s in rows}
    print(f"world size {len(hosts)} as {len(split)} simulated hosts ({'+'.join(map(str, split))}), float32 sum")
    print("| size | gloo us med (p20-p80) | hier_shm us med (p20-p80) | t(gloo)/t(hier_shm) | nwrong |")
    print("|---|---:|---:|---:|---:|")
    for size in sizes:
        cells, ok = [], True
        for name in CANDIDATES:
            status, _nwrong, s = by[(name, size)]
            ok = ok and status == "ok"
            cells.append(f"{s.median:.1f} ({s.p20:.0f}-{s.p80:.0f})" if status == "ok" else status)
        ratio = by[("gloo", size)][2].median / by[("hier_shm", size)][2].median if ok else float("nan")
        wrong = sum(by[(n, size)][1] for n in CANDIDATES)
        print(f"| {format_size(size)} | {cells[0]} | {cells[1]} | {ratio:.2f}x | {wrong} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
