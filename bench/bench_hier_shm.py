"""``hier_shm`` against the flat gloo all-reduce, ranks split into simulated hosts, side by side in one run.

    python bench/bench_hier_shm.py [--split 2,2] [--sizes 4KiB,64KiB,1MiB,16MiB] [--budget 3] [--chunks 4MiB]

The ranks run on this machine; ``ARTUNE_HOST`` (artune's host-identity
override for tests and experiments) makes ``--split 2,2`` act as 2 hosts x 2
ranks, so shared memory is used only inside each simulated host and the
leaders' all-reduce goes over gloo's TCP loopback. Per size the artune
harness checks both candidates and times them interleaved (float32 sum, step
time = slowest rank), plus ``hier_shm`` at each ``--chunks`` size (its
``chunk_bytes``: how much one leaders' all-reduce carries). Prints per size
the median (p20-p80) of each and the ratio t(gloo) / t(hier_shm), the
default chunk first. On real hosts the leaders' step crosses the
network, which this cannot show: quote the ratios as "simulated hosts".
"""

from __future__ import annotations

import argparse
import os
import sys

from artune.launch import RankContext, run_ranks
from artune.measure.harness import measure
from artune.measure.records import Candidate
from artune.sizes import format_size, parse_size


def _candidates(chunks: list[int]) -> list[Candidate]:
    return [Candidate("gloo"), Candidate("hier_shm"), *(Candidate.of("hier_shm", {"chunk_bytes": c}) for c in chunks)]


def _rank(ctx: RankContext, hosts: list[str], sizes: list[int], budget: float, chunks: list[int]) -> list[tuple]:
    os.environ["ARTUNE_HOST"] = hosts[ctx.rank]
    import torch

    import artune

    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[ctx.rank % len(cpus)]})
    torch.set_num_threads(1)
    with artune.Communicator(timeout=60, check=False) as comm:
        assert "hier_shm" in comm.algorithms, comm.shm_unavailable_reason
        found = measure(comm, _candidates(chunks), sizes, budget_s=budget)
    return [(m.candidate.key, m.size_bytes, m.status, m.nwrong, m.summary) for m in found]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="2,2", help="ranks per simulated host, e.g. 2,2 or 3,1")
    parser.add_argument("--sizes", default="4KiB,64KiB,1MiB,16MiB")
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of timed calls per size")
    parser.add_argument("--chunks", default="", help="also time hier_shm with these chunk_bytes, e.g. 4MiB")
    args = parser.parse_args(argv)
    split = [int(x) for x in args.split.split(",")]
    hosts = [f"host{h}" for h, n in enumerate(split) for _ in range(n)]
    sizes = [parse_size(s, "--sizes") for s in args.sizes.split(",")]
    chunks = [parse_size(c, "--chunks") for c in args.chunks.split(",") if c]
    rows = run_ranks(_rank, len(hosts), hosts, sizes, args.budget, chunks, timeout=900)[0]
    by = {(key, size): (status, nwrong, s) for key, size, status, nwrong, s in rows}
    keys = [c.key for c in _candidates(chunks)]
    print(f"world size {len(hosts)} as {len(split)} simulated hosts ({'+'.join(map(str, split))}), float32 sum")
    print("| size | candidate | us med (p20-p80) | t(gloo)/t(this) | nwrong |")
    print("|---|---|---:|---:|---:|")
    for size in sizes:
        base = by[("gloo", size)]
        for key in keys:
            status, nwrong, s = by[(key, size)]
            if status != "ok":
                print(f"| {format_size(size)} | {key} | {status} | | {nwrong} |")
                continue
            ratio = base[2].median / s.median if base[0] == "ok" else float("nan")
            print(
                f"| {format_size(size)} | {key} | {s.median:.1f} ({s.p20:.0f}-{s.p80:.0f}) | {ratio:.2f}x | {nwrong} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
