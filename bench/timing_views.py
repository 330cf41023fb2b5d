"""One-shot against two-shot, timed two ways in the same rounds: per call (the tuner's view) and per turn.

The tuner's harness times each call and keeps the slowest rank's time per call (then the median); the
robustness bench's scorer times a turn of back-to-back calls and divides (a mean). Both are taken here from the
same interleaved turns of two ranks, so where they disagree it is the statistic, and where they agree a
disagreement between a tune and its scoring is the machine changing between the two.

    python bench/timing_views.py                    # 1 KiB-2 MiB, turns of 3 and 16 calls, 120 rounds
    python bench/timing_views.py --rounds 200 --bursts 3 30

Per size and turn length it prints each algorithm's per-call figure (median over calls of the slowest rank's
time) and per-turn figure (median over turns of the slower rank's turn mean), and two-shot over one-shot in each
view. Run it with nothing else on the machine, then beside a busy process, and compare.
"""

from __future__ import annotations

import argparse
import socket
import time

import numpy as np

ALGORITHMS = ("shm_one_shot", "shm_two_shot")


def _rank(rank: int, port: int, sizes: list[int], bursts: list[int], rounds: int) -> None:
    import torch
    import torch.distributed as dist

    import artune
    from artune.table.bundled import cpu_default

    torch.set_num_threads(1)  # as a rank of artune tune does
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    clock = time.perf_counter_ns
    with artune.Communicator(table=cpu_default()) as comm:
        for size in sizes:
            tensor = torch.zeros(size // 4)
            for burst in bursts:
                calls = {a: np.zeros((rounds, burst)) for a in ALGORITHMS}
                turns = {a: np.zeros(rounds) for a in ALGORITHMS}
                for name in ALGORITHMS:
                    comm.all_reduce(tensor, algorithm=name)
                for r in range(rounds):
                    for name in ALGORITHMS if r % 2 == 0 else ALGORITHMS[::-1]:
                        comm.all_reduce(tensor, algorithm=name)  # settle, as the harness does
                        began = clock()
                        for b in range(burst):
                            start = clock()
                            comm.all_reduce(tensor, algorithm=name)
                            calls[name][r, b] = clock() - start
                        turns[name][r] = (clock() - began) / burst
                view: dict[str, tuple[float, float]] = {}
                for name in ALGORITHMS:
                    slowest = torch.from_numpy(np.concatenate([calls[name].ravel(), turns[name]]))
                    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # the slowest rank, call by call and turn by turn
                    per_call, per_turn = slowest[: calls[name].size].numpy(), slowest[calls[name].size :].numpy()
                    view[name] = (float(np.median(per_call)) / 1e3, float(np.median(per_turn)) / 1e3)
                if rank == 0:
                    (c1, t1), (c2, t2) = view[ALGORITHMS[0]], view[ALGORITHMS[1]]
                    calls_text = f"{c1:>10.1f} {c2:>10.1f} {c2 / c1:>8.2f}"
                    print(f"{size:>9} {burst:>4}  {calls_text}  {t1:>10.1f} {t2:>10.1f} {t2 / t1:>8.2f}", flush=True)
    dist.destroy_process_group()


def main() -> None:
    import torch.multiprocessing as mp

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1028, 16388, 65540, 262148, 716004, 2097156])
    parser.add_argument("--bursts", type=int, nargs="+", default=[3, 16])
    parser.add_argument("--rounds", type=int, default=120)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    head = f"{'size B':>9} {'turn':>4}  {'per call us: one':>10} {'two':>10} {'two/one':>8}"
    print(f"{head}  {'per turn: one':>10} {'two':>10} {'two/one':>8}")
    mp.start_processes(_rank, args=(port, args.sizes, args.bursts, args.rounds), nprocs=2, start_method="spawn")


if __name__ == "__main__":
    main()
