"""What a shared-memory all-reduce costs when the scheduler puts both ranks on one CPU.

On a machine with a core per rank, a rank woken by a socket (a gloo barrier,
an engine's metadata broadcast) is often placed on its waker's CPU, and the
two ranks then share one core until the load balancer moves one, some
milliseconds later. A wait that spins there only holds off the peer it waits
for. The compiled round's waits read the CPU their peer last ran on and
yield at once when it is their own.

Two ranks run ``shm_one_shot`` and ``shm_two_shot`` interleaved, in turns of
back-to-back calls, placed two ways: ``apart`` (pinned to CPUs 0 and 1) and
``together`` (both pinned to CPU 0, the state above). Both use the spin that
two ranks on two cores get by default (20 us), since the state arises on such
a machine. Reported per size and algorithm: the median over turns of the
slowest rank's mean per call, the ratio together/apart, and each rank's
count of waits that yielded at once (``shared_waits``).
Run: ``python bench/bench_shared_cpu.py [--turns 30]``.
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
from artune.sizes import format_size

SIZES = (2 << 10, 64 << 10)
ALGORITHMS = ("shm_one_shot", "shm_two_shot")
SPIN_US = 20.0  # artune.algorithms.shm.channel._default_spin_phases for ranks <= cores


def _rank(ctx: RankContext, cpus: list[int], turns: int) -> dict[str, object]:
    from artune.algorithms.shm.algorithms import ShmOneShot, ShmTwoShot
    from artune.algorithms.shm.channel import ShmChannel

    torch.set_num_threads(1)
    os.sched_setaffinity(0, {cpus[ctx.rank]})
    channel = ShmChannel(None, timeout=30.0, buffer_bytes=1 << 20, spin_us=SPIN_US)
    try:
        algos = {"shm_one_shot": ShmOneShot(channel), "shm_two_shot": ShmTwoShot(channel)}
        times: dict[str, list[float]] = {}
        for size in SIZES:
            t = torch.ones(size // 4)
            calls = max(20, (1 << 20) // size)
            for name in ALGORITHMS:
                algos[name].all_reduce(t, "sum", {})  # bind the step
            for turn in range(turns):
                for name in ALGORITHMS if turn % 2 == 0 else ALGORITHMS[::-1]:
                    dist.barrier()
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        algos[name].all_reduce(t, "sum", {})
                    times.setdefault(f"{size}/{name}", []).append((time.perf_counter() - t0) / calls * 1e6)
        native = channel.native
        return {"times": times, "shared_waits": native.shared_waits if native else None}
    finally:
        channel.close()


def _slowest(results: list[dict[str, object]]) -> dict[str, float]:
    """Per size/algorithm: the median over turns of the slowest rank's mean per call."""
    keys = results[0]["times"]  # type: ignore[index]
    return {
        k: statistics.median(max(r["times"][k][i] for r in results) for i in range(len(keys[k])))  # type: ignore[index]
        for k in keys  # type: ignore[union-attr]
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        print("needs two CPUs: 'apart' pins the ranks to different ones", file=sys.stderr)
        return 2
    apart = run_ranks(_rank, 2, cpus[:2], args.turns, timeout=600)
    together = run_ranks(_rank, 2, [cpus[0]] * 2, args.turns, timeout=600)
    a, t = _slowest(apart), _slowest(together)
    print(f"2 ranks, spin {SPIN_US:g} us, median of {args.turns} turns, slowest rank, us per call")
    print(f"{'size':>8} {'algorithm':13} {'apart':>8} {'together':>9} {'ratio':>6}")
    for k in a:
        size, name = k.split("/")
        print(f"{format_size(int(size)):>8} {name:13} {a[k]:8.2f} {t[k]:9.2f} {t[k] / a[k]:6.2f}")
    shared = [r["shared_waits"] for r in together]
    print(f"waits that yielded at once (per rank): together {shared}, apart {[r['shared_waits'] for r in apart]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
