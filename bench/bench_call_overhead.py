"""What an all-reduce costs through the Communicator above its bound call, for every route, side by side.

Ranks (two, pinned to CPUs 0 and 1 with one thread each; for CUDA tensors one per GPU, at most two) reduce
one tensor (``--size``, default 4 KiB; fp32 on CPU, bf16 on CUDA) by each algorithm the Communicator runs
for it, in turns of ``--turn`` back-to-back calls, every way interleaved with the others:

- ``bound``: the route's bound call, called directly (a compiled shm step; gloo's or NCCL's call; no
  Communicator);
- ``agree``: the route's agreement round alone, for algorithms that do not compare calls themselves (the
  compiled header-only round over shared memory that the Communicator runs before a process-group call);
- ``bound+agree``: both, one after the other, called directly: the route as bound;
- ``comm``: ``comm.all_reduce(t, algorithm=name)``, a repeated call, which the compiled router takes
  straight to its route (``artune.communicator.fastpath``);
- ``general``: the same call with the router swapped for a ``Gate`` (no routes), so it takes the Python
  path every call: what every CUDA call and every gloo call paid before issue #54;
- ``torch.distributed.all_reduce``: the process group called directly, as a user without artune does.

A route's turn is ``--turn`` calls, or fewer (at least 5) where a turn would last more than 4 ms (gloo's
calls take milliseconds on a loaded machine). Per turn the mean time per call (on CUDA, synchronised at the
end of the turn: host time, the GPU waits on the host at this size); reported: the median over turns of the
slowest rank's turn means, in us, and the Communicator's overhead above the route's bound call
(``comm - bound``) and above the route as bound (``comm - (bound+agree)``).

Where a route's bound call is slow and noisy (gloo here, NCCL on a GPU), a second table times, inside each
call, what lies outside the route's agreement and bound call: through the Communicator, called directly,
and called directly after reading the tensor as the router does (``time_outside``).

Run: ``python bench/bench_call_overhead.py [--size 4KiB] [--turns 200] [--device cpu|cuda|all]``
(``all``, the default: CPU, and CUDA where a GPU is present). ``bench/gpu_check.py`` prints the same
tables on a GPU host.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from artune.launch import RankContext, run_ranks
from artune.sizes import format_size, parse_size

#: the ways each route is timed, in the order of the table's columns
WAYS = ("bound", "agree", "bound+agree", "comm", "general")


def ways_for(comm: Any, t: torch.Tensor) -> dict[tuple[str, str], Callable[[], object]]:
    """(route, way) -> a call of no arguments, for every algorithm ``comm`` runs ``t``'s dtype and device
    with, each routed once here (first sight); plus the process group called directly."""
    from artune.communicator.fastpath import Gate

    router, gate = comm._fast, Gate()
    nothing = torch.empty(0, device=t.device)  # what a compiled agreement step is called with: no data
    ways: dict[tuple[str, str], Callable[[], object]] = {
        ("torch.distributed.all_reduce", "bound"): lambda: dist.all_reduce(t, group=comm.group)
    }
    names = [n for n in comm.algorithms if n in comm.available(t.dtype, "sum", t.device)]
    for name in names:
        comm.all_reduce(t, algorithm=name)  # first sight: decided, agreed, routed
        route = comm._routes.eager[(t.shape, t.dtype, t.device, "sum", name)]
        run = route.run
        ways[(name, "bound")] = lambda run=run: run(t)
        if route.agree is not None:
            step = route.agree_step
            agree = (lambda step=step: step(nothing)) if step is not None else route.agree
            ways[(name, "agree")] = agree
            ways[(name, "bound+agree")] = lambda agree=agree, run=run: (agree(), run(t))
        ways[(name, "comm")] = lambda name=name: comm.all_reduce(t, algorithm=name)

        def general(name: str = name) -> None:
            comm._fast = gate
            try:
                comm.all_reduce(t, algorithm=name)
            finally:
                comm._fast = router

        ways[(name, "general")] = general
    return ways


def calls_per_turn(
    ways: dict[tuple[str, str], Callable[[], object]], turn: int, sync: Callable[[], None], budget_us: float = 4000.0
) -> dict[str, int]:
    """Per route, its calls per turn: ``turn``, or fewer (at least 5) where its slowest way would take more
    than ``budget_us`` a turn (gloo's calls take milliseconds on a loaded machine); every rank gets the
    same counts (from the slowest rank's estimate), so the ranks keep making the same calls."""
    clock = time.perf_counter_ns
    estimates = []
    for call in ways.values():
        call()
        sync()
        start = clock()
        for _ in range(3):
            call()
        sync()
        estimates.append((clock() - start) / 3 / 1e3)
    slowest_us = torch.tensor(estimates, dtype=torch.float64)
    dist.all_reduce(slowest_us, op=dist.ReduceOp.MAX)
    calls: dict[str, int] = {}
    for (route, _), us in zip(ways, slowest_us.tolist(), strict=True):
        calls[route] = min(calls.get(route, turn), max(5, min(turn, int(budget_us / max(us, 1e-3)))))
    return calls


def time_ways(
    ways: dict[tuple[str, str], Callable[[], object]], turns: int, calls: dict[str, int], sync: Callable[[], None]
) -> dict[tuple[str, str], list[float]]:
    """Per way, its turn means in us: ``turns`` turns of its route's ``calls``, the ways interleaved in each
    turn."""
    means: dict[tuple[str, str], list[float]] = {key: [] for key in ways}
    clock = time.perf_counter_ns
    for _ in range(turns):
        for key, call in ways.items():
            turn = calls[key[0]]
            call()  # settles the ranks after the previous way
            sync()
            start = clock()
            for _ in range(turn):
                call()
            sync()
            means[key].append((clock() - start) / turn / 1e3)
    return means


def slowest(means: dict[tuple[str, str], list[float]], group: Any = None) -> dict[tuple[str, str], list[float]]:
    """Each turn's mean of the slowest rank (every rank must call this)."""
    keys = list(means)
    values = torch.tensor([means[k] for k in keys], dtype=torch.float64)
    dist.all_reduce(values, op=dist.ReduceOp.MAX, group=group)
    return {k: values[i].tolist() for i, k in enumerate(keys)}


def time_outside(
    comm: Any, t: torch.Tensor, turns: int, calls: dict[str, int], sync: Callable[[], None]
) -> dict[str, list[float]]:
    """Per route whose bound call is not a compiled step (gloo, NCCL, symmetric memory): per turn the
    median over its calls of the time a call spends outside its agreement and bound call, in us, through
    the Communicator (``comm``) and called directly (``direct``), alternating turns (a call's own median,
    since a rank descheduled once in a turn would otherwise weigh on that turn's mean).

    Those calls take tens of microseconds or more (milliseconds for gloo on a loaded machine), so the
    difference of two medians cannot resolve a fraction of a microsecond; timing the parts inside each
    call can. The router's entry for the signature is replaced by the same parts wrapped in a timer, the
    direct call runs the same wrappers, so the wrappers' own cost is on both sides and cancels in the
    difference. ``read`` is the direct call after reading what the router reads of the tensor (dtype,
    element count, device, contiguity, autograd): after a call that blocked, those first reads of the
    tensor pay the caches that other processes cooled, whoever makes them."""
    clock = time.perf_counter_ns
    nothing = torch.empty(0, device=t.device)
    out: dict[str, list[float]] = {}
    for key, route in list(comm._routes.eager.items()):
        shape, dtype, device, op, name = key
        if (shape, dtype, device) != (t.shape, t.dtype, t.device) or not isinstance(name, str):
            continue  # another tensor's, or the automatic call's (its algorithm's forced call is timed)
        if type(route.run).__name__ == "Step":
            continue
        inside = [0]

        def timed(part: Callable[..., object], inside: list[int] = inside) -> Callable[..., None]:
            def shim(*args: object) -> None:
                began = clock()
                part(*args)
                inside[0] += clock() - began

            return shim

        step = route.agree_step
        agree = timed((lambda step=step: step(nothing)) if step is not None else route.agree) if route.agree else None
        run = timed(route.run)
        graph = comm._routes.graph[key].run if device.type == "cuda" else None
        index = -1 if device.type == "cpu" else device.index
        comm._fast.add(dtype, op, name, t.numel(), index, agree, run, graph)

        def direct(agree: Callable[[], None] | None = agree, run: Callable[..., None] = run) -> None:
            if agree is not None:
                agree()
            run(t)

        def described(direct: Callable[[], None] = direct) -> None:
            _ = (t.dtype, t.numel(), t.is_cpu, t.is_cuda, t.is_contiguous(), t.requires_grad)
            direct()

        three = {"comm": lambda name=name: comm.all_reduce(t, algorithm=name), "direct": direct, "read": described}
        for way in three:
            out[f"{name} {way}"] = []
        turn = calls.get(name, 5)
        for _ in range(turns):
            for way, call in three.items():
                call()
                sync()
                each = []
                for _ in range(turn):
                    inside[0] = 0
                    began = clock()
                    call()
                    each.append(clock() - began - inside[0])
                sync()
                out[f"{name} {way}"].append(statistics.median(each) / 1e3)
        bound = route.agree_step if route.agree_step is not None else route.agree
        comm._fast.add(dtype, op, name, t.numel(), index, bound, route.run, graph)  # the route as it was
    return out


def table(result: dict[tuple[str, str], list[float]], calls: dict[str, int]) -> list[str]:
    """The Markdown table: per route, its calls per turn, each way's median us per call and the
    Communicator's overheads."""
    med = {k: statistics.median(v) for k, v in result.items()}
    routes = list(dict.fromkeys(route for route, _ in result))
    lines = [
        "| route | calls/turn | " + " | ".join(WAYS) + " | comm - bound | comm - (bound+agree) |",
        "|---|" + "---:|" * (len(WAYS) + 3),
    ]
    for route in routes:
        cells = [f"{med[(route, w)]:.2f}" if (route, w) in med else "-" for w in WAYS]
        comm, bound = med.get((route, "comm")), med.get((route, "bound"))
        both = med.get((route, "bound+agree"), bound)
        over = f"{comm - bound:+.2f}" if comm is not None and bound is not None else "-"
        over_both = f"{comm - both:+.2f}" if comm is not None and both is not None else "-"
        lines.append(f"| {route} | {calls[route]} | " + " | ".join(cells) + f" | {over} | {over_both} |")
    return lines


def _rank(ctx: RankContext, device: str, nbytes: int, turns: int, turn: int) -> list[str]:
    from artune.communicator import Communicator

    if device == "cpu":
        os.sched_setaffinity(0, {ctx.rank % (os.cpu_count() or 1)})
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    with Communicator(timeout=60) as comm:
        t = torch.ones(nbytes // dtype.itemsize, dtype=dtype, device=device)
        ways = ways_for(comm, t)
        sync = torch.cuda.synchronize if device == "cuda" else lambda: None
        calls = calls_per_turn(ways, turn, sync)
        result = slowest(time_ways(ways, turns, calls, sync))
        stats = comm.route_stats
        outside = time_outside(comm, t, turns, calls, sync)
        outside = {k[0]: v for k, v in slowest({(k, ""): v for k, v in outside.items()}).items()}
    head = (
        f"{format_size(nbytes)} {str(dtype)[6:]} SUM on {device}, world size {ctx.world_size}; us per call, "
        f"median over {turns} turns, slowest rank (routes: {stats})"
    )
    lines = [head, "", *table(result, calls)]
    if outside:
        lines += [
            "",
            "Time outside the route's agreement and bound call, us per call (timed inside each call; per turn",
            f"the median of its calls, as many as above, then the median over {turns} turns, slowest rank):",
            "",
            "| route | through the Communicator | called directly | directly, after reading the tensor "
            "| comm - direct | comm - read |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name in dict.fromkeys(k.rsplit(" ", 1)[0] for k in outside):
            comm_us, direct_us, read_us = (
                statistics.median(outside[f"{name} {w}"]) for w in ("comm", "direct", "read")
            )
            lines.append(
                f"| {name} | {comm_us:.2f} | {direct_us:.2f} | {read_us:.2f} "
                f"| {comm_us - direct_us:+.2f} | {comm_us - read_us:+.2f} |"
            )
    return lines if ctx.rank == 0 else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="4KiB", help="message size (default 4KiB)")
    parser.add_argument("--turns", type=int, default=200, help="turns per way (default 200)")
    parser.add_argument("--turn", type=int, default=200, help="back-to-back calls per turn (default 200)")
    parser.add_argument("--device", choices=("cpu", "cuda", "all"), default="all", help="default: all there are")
    options = parser.parse_args(argv)
    nbytes = parse_size(options.size)
    devices = ["cpu"] if options.device != "cuda" else []
    if options.device != "cpu":
        if torch.cuda.is_available():
            devices.append("cuda")
        elif options.device == "cuda":
            print("no CUDA device here: nothing to measure with CUDA tensors")
            return 0
    for device in devices:
        world = 2 if device == "cpu" else min(2, torch.cuda.device_count())
        backend = "gloo" if device == "cpu" else "cpu:gloo,cuda:nccl"
        env = {"OMP_NUM_THREADS": "1"}
        lines = run_ranks(
            _rank, world, device, nbytes, options.turns, options.turn, timeout=900, env=env, backend=backend
        )
        print("\n".join(["# " + lines[0][0], *lines[0][1:]]), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
