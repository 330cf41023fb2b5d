"""What a small all-reduce costs above the compiled round: the Communicator's fast path against its general path.

Two ranks (pinned to CPUs 0 and 1, one thread each) reduce one fp32 tensor
(``--size``, default 4 KiB) with ``shm_one_shot``, three ways interleaved in
turns of ``--turn`` back-to-back calls:

- ``round``: the bound compiled step called directly (the round alone, no
  Communicator);
- ``router``: ``comm.all_reduce(t)``, which a repeated call takes into C
  through the compiled ``Router`` (``artune.communicator.fastpath``);
- ``params``: the call naming its parameters
  (``params={"chunk_bytes": 1 MiB}``, the default, as the tuner's variants
  do): routed once like ``router``, plus freezing the parameters per call;
- ``general``: the same call with the router swapped for a ``Gate`` (no
  routes), so it takes the Python path every call: the route lookup by key,
  the busy guard, the autograd and contiguity checks.

Per turn the mean time per call; reported: the median over turns of the
slowest rank's turn means, and each way's overhead above ``round``.
Run: ``python bench/bench_call_overhead.py [--size 4KiB] [--turns 200]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

from artune.launch import RankContext, run_ranks
from artune.sizes import format_size, parse_size


def _rank(ctx: RankContext, nbytes: int, turns: int, turn: int) -> dict[str, list[float]]:
    from artune.algorithms.shm.algorithms import DEFAULT_CHUNK_BYTES
    from artune.communicator import Communicator
    from artune.communicator.fastpath import Gate

    os.sched_setaffinity(0, {ctx.rank % (os.cpu_count() or 1)})
    with Communicator() as comm:
        t = torch.ones(nbytes // 4)
        comm.all_reduce(t, algorithm="shm_one_shot")  # first sight: routes it
        step = comm._routes.eager[(t.shape, t.dtype, t.device, "sum", "shm_one_shot")].run
        router, gate = comm._fast, Gate()
        named = {"chunk_bytes": DEFAULT_CHUNK_BYTES}

        def general() -> None:
            comm._fast = gate
            comm.all_reduce(t, algorithm="shm_one_shot")
            comm._fast = router

        ways = {
            "round": lambda: step(t),
            "router": lambda: comm.all_reduce(t, algorithm="shm_one_shot"),
            "params": lambda: comm.all_reduce(t, algorithm="shm_one_shot", params=named),
            "general": general,
        }
        means: dict[str, list[float]] = {name: [] for name in ways}
        clock = time.perf_counter_ns
        for _ in range(turns):
            for name, call in ways.items():
                call()  # settles the ranks after the previous way
                start = clock()
                for _ in range(turn):
                    call()
                means[name].append((clock() - start) / turn / 1e3)
        slowest = torch.tensor([means[name] for name in ways], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return {name: slowest[i].tolist() for i, name in enumerate(ways)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="4KiB", help="message size (default 4KiB)")
    parser.add_argument("--turns", type=int, default=200, help="turns per way (default 200)")
    parser.add_argument("--turn", type=int, default=200, help="back-to-back calls per turn (default 200)")
    options = parser.parse_args(argv)
    nbytes = parse_size(options.size)
    env = {"OMP_NUM_THREADS": "1"}
    result = run_ranks(_rank, 2, nbytes, options.turns, options.turn, timeout=600, env=env)[0]
    base = statistics.median(result["round"])
    print(f"# {format_size(nbytes)} fp32 SUM, shm_one_shot, world size 2; per call, median over turns, slowest rank")
    print(f"{'way':10s} {'us/call':>8s} {'above round':>12s}")
    for name, values in result.items():
        med = statistics.median(values)
        print(f"{name:10s} {med:8.2f} {med - base:+11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
