"""Is one process pair the machine? One-shot's time over two-shot's, in fresh process pairs and fresh Communicators.

    python bench/pair_states.py [--pairs 6] [--rounds 11] [--sizes 2KiB,64KiB,512KiB,2MiB] [--between 16MiB]

A table is tuned in one pair of ranks and deployed to others. Each pair here
is two fresh processes (``torch.multiprocessing``, a gloo group) that open an
``artune.Communicator`` twice, one after the other; in each, at every size,
``shm_one_shot`` and ``shm_two_shot`` take turns over ``--rounds`` rounds
(the order reversed every other round), each turn about 2 ms of back-to-back
calls timed with ``time.perf_counter`` (a barrier before, the slower rank's
time kept), as ``bench/tune_robustness.py`` scores a table. With
``--between 16MiB`` each of a turn's 20 calls comes after reading that much
memory (a ``sum``, untimed), as a decode step's weights come between its
all-reduces, and the calls alone are timed: the all-reduce a serving loop
sees, its buffers no longer warm from the call before. Per
Communicator and size it prints the median of the per-round ratios
(one-shot's time over two-shot's) with its 90% bootstrap interval over the
rounds; then, per size, how far those medians scatter over the
Communicators (their standard deviation) beside how far the rounds alone
would scatter them (the bootstrap's standard deviation of one median,
averaged over the Communicators). A ratio near 1 says the rounds explain the
scatter; well above 1, something that lasts as long as a Communicator's
rounds at one size (a second or so: a moment of the machine, or the pair
itself) moves the ratio, and rounds timed back to back are one draw of it,
however many there are. On the 2-core VM (2026-12-04, ``--pairs 3 --sizes
1104,1088,14116,14080,20436,2464``) it was 2.4-4.4x at 13.8 and 20 KiB, where
one Communicator found one-shot 1.25-1.59x slower at three consecutive sizes
and the others 0.87-0.98x: hence the robustness scorer's rounds visit every
size in turn.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from artune.sizes import human_size, parse_size
from tune_robustness import _end_with_the_bench, _free_port, calls_for

PAIR = ("shm_one_shot", "shm_two_shot")
COMMS = 2  # Communicators per pair, one after the other
STEPS = 20  # calls per turn with --between: each after a decode step's reads


def _rank(rank: int, world: int, port: int, sizes: list[int], rounds: int, between: int, out: str) -> None:
    _end_with_the_bench()
    import torch
    import torch.distributed as dist

    import artune
    from artune.table.bundled import cpu_default

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    weights = torch.ones(max(between, 4) // 4, dtype=torch.float32)  # what a decode step reads between calls
    found: list[dict[str, list[float]]] = []
    for _ in range(COMMS):
        with artune.Communicator(table=cpu_default()) as comm:
            ratios: dict[str, list[float]] = {}
            for size in sizes:
                tensor = torch.ones(size // 4, dtype=torch.float32)
                warm = torch.zeros(len(PAIR), dtype=torch.float64)
                for j, name in enumerate(PAIR):
                    comm.all_reduce(tensor, algorithm=name)
                    t0 = time.perf_counter()
                    comm.all_reduce(tensor, algorithm=name)
                    warm[j] = time.perf_counter() - t0
                dist.all_reduce(warm, op=dist.ReduceOp.MAX)
                calls = [calls_for(float(w)) for w in warm] if not between else [STEPS, STEPS]
                per: list[list[float]] = [[], []]
                for r in range(rounds):
                    for j in (0, 1) if r % 2 == 0 else (1, 0):
                        dist.barrier()
                        spent = 0.0
                        if between:  # each call after a step's reads, timed alone (waiting for the peer too)
                            for _ in range(calls[j]):
                                weights.sum()
                                t0 = time.perf_counter()
                                comm.all_reduce(tensor, algorithm=PAIR[j])
                                spent += time.perf_counter() - t0
                        else:
                            t0 = time.perf_counter()
                            for _ in range(calls[j]):
                                comm.all_reduce(tensor, algorithm=PAIR[j])
                            spent = time.perf_counter() - t0
                        took = torch.tensor([spent / calls[j]], dtype=torch.float64)
                        dist.all_reduce(took, op=dist.ReduceOp.MAX)
                        per[j].append(float(took.item()))
                ratios[str(size)] = [a / b for a, b in zip(*per, strict=True)]
            found.append(ratios)
    if rank == 0:
        Path(out).write_text(json.dumps(found))
    dist.destroy_process_group()


def median_interval(values: list[float], seed: int, reps: int = 2000) -> tuple[float, float, float, float]:
    """The median of ``values``, its 90% bootstrap interval and the bootstrap's standard deviation."""
    rng = np.random.default_rng(seed)
    v = np.asarray(values)
    boot = np.median(v[rng.integers(0, len(v), size=(reps, len(v)))], axis=1)
    return float(np.median(v)), float(np.quantile(boot, 0.05)), float(np.quantile(boot, 0.95)), float(np.std(boot))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--sizes", default="2KiB,64KiB,512KiB,2MiB")
    parser.add_argument(
        "--between", default="0", help="memory read before each call, untimed, as a decode step does (0: none)"
    )
    args = parser.parse_args()
    import torch.multiprocessing as mp

    sizes = [parse_size(s) for s in args.sizes.split(",")]
    medians: dict[int, list[float]] = {s: [] for s in sizes}
    noise: dict[int, list[float]] = {s: [] for s in sizes}
    with tempfile.TemporaryDirectory() as work:
        for p in range(args.pairs):
            out = f"{work}/pair-{p}.json"
            mp.start_processes(
                _rank,
                args=(2, _free_port(), sizes, args.rounds, parse_size(args.between), out),
                nprocs=2,
                start_method="spawn",
                join=True,
            )
            found: list[dict[str, Any]] = json.loads(Path(out).read_text())
            for c, ratios in enumerate(found):
                cells = []
                for s in sizes:
                    mid, low, high, sd = median_interval(ratios[str(s)], seed=p * COMMS + c)
                    medians[s].append(mid)
                    noise[s].append(sd)
                    cells.append(f"{human_size(s)} {mid:.3f} [{low:.3f}, {high:.3f}]")
                print(f"pair {p} communicator {c}: " + "  ".join(cells), flush=True)
    print(f"one-shot's time over two-shot's, median of {args.rounds} rounds, {args.pairs * COMMS} communicators:")
    for s in sizes:
        between, rounds = statistics.stdev(medians[s]), math.sqrt(statistics.mean(v * v for v in noise[s]))
        print(
            f"  {human_size(s)}: medians {min(medians[s]):.3f} to {max(medians[s]):.3f}, scattered by "
            f"{between:.3f} (sd) where the rounds alone scatter a median by {rounds:.3f}: {between / rounds:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
