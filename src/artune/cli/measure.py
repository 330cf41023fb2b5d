"""``artune bench``: measure every all-reduce algorithm here and print an nccl-tests-style table.

Without ``torchrun`` it spawns ``--world-size`` local ranks itself (gloo
process group on 127.0.0.1); under ``torchrun`` (``RANK`` and
``WORLD_SIZE`` set) every rank runs the measurement on the existing group
and rank 0 prints. Progress goes to stderr, the table to stdout, and with
``--jsonl FILE`` the measurements are appended to a measurement log
(created with its header, or resumed when the header matches this machine).

Exit status: 0 when every algorithm ran and was correct at every size, 1 when
one failed (timeout, error, unavailable, wrong results; listed under the
table), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass
from typing import Any

from artune.catalog import DTYPES, SPECS
from artune.errors import ArtuneError
from artune.measure.records import Header, Measurement, MeasurementLog
from artune.sizes import parse_size

DEFAULT_SIZES = tuple(4096 << (2 * i) for i in range(8))  # 4KiB, 16KiB, ..., 64MiB
REDOPS = ("sum", "max", "min")


@dataclass(frozen=True)
class BenchOptions:
    """What every rank needs to run ``artune bench`` (picklable)."""

    algorithms: tuple[str, ...] | None
    sizes: tuple[int, ...]
    dtype: str
    op: str
    budget_s: float
    check: bool
    sweep: bool
    pin: bool
    peer_timeout: float | None


@dataclass(frozen=True)
class BenchResult:
    """What rank 0 hands back: the measurements and what was runnable."""

    measurements: list[Measurement]
    algorithms: tuple[str, ...]
    note: str


def register(commands: Any) -> None:
    """Add the ``bench`` sub-command to the parser."""
    bench = commands.add_parser(
        "bench",
        help="time every all-reduce algorithm here; print an nccl-tests-style table",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench.add_argument(
        "--world-size",
        type=int,
        default=None,
        metavar="N",
        help="ranks to spawn (required unless run under torchrun)",
    )
    bench.add_argument(
        "--algorithms",
        default=None,
        metavar="A,B",
        help="comma list of algorithm names (default: every one runnable here)",
    )
    bench.add_argument(
        "--sizes",
        default=None,
        metavar="S,S",
        help="comma list of message sizes, e.g. 4KiB,64KiB,1MiB (default: 4KiB..64MiB, x4 steps)",
    )
    bench.add_argument("--dtype", choices=DTYPES, default="float32")
    bench.add_argument("--op", choices=REDOPS, default="sum", help="the reduction (nccl-tests' redop)")
    bench.add_argument(
        "--budget",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="seconds of timed calls per size, shared by all algorithms (default 1)",
    )
    bench.add_argument("--jsonl", default=None, metavar="FILE", help="append the measurements to this log")
    bench.add_argument("--sweep", action="store_true", help="also sweep each algorithm's tunable parameters")
    bench.add_argument("--no-check", action="store_true", help="skip the correctness check")
    bench.add_argument("--pin", action="store_true", help="pin rank r to CPU r (mod the CPU count)")
    bench.add_argument(
        "--peer-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds a rank waits for its peers (default ARTUNE_TIMEOUT or 60)",
    )
    bench.set_defaults(run=run_bench)


# ------------------------------------------------------------------ options


def _parse_options(args: argparse.Namespace) -> BenchOptions:
    if args.algorithms is not None:
        names = tuple(dict.fromkeys(n.strip() for n in args.algorithms.split(",") if n.strip()))
        unknown = [n for n in names if n not in SPECS]
        if not names or unknown:
            raise ArtuneError(
                f"--algorithms {args.algorithms!r}: unknown name(s) {unknown}; known: {', '.join(sorted(SPECS))}"
            )
    else:
        names = None
    if args.sizes is not None:
        sizes = tuple(parse_size(s.strip(), "--sizes") for s in args.sizes.split(",") if s.strip())
        if not sizes:
            raise ArtuneError(f"--sizes {args.sizes!r}: give at least one size, e.g. 4KiB,1MiB")
    else:
        sizes = DEFAULT_SIZES
    if not (args.budget > 0 and math.isfinite(args.budget)):
        raise ArtuneError(f"--budget {args.budget}: must be a positive number of seconds")
    return BenchOptions(
        algorithms=names,
        sizes=sizes,
        dtype=args.dtype,
        op=args.op,
        budget_s=args.budget,
        check=not args.no_check,
        sweep=args.sweep,
        pin=args.pin,
        peer_timeout=args.peer_timeout,
    )


def _under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


# ------------------------------------------------------------------ inside each rank


def bench_rank(ctx: Any, options: BenchOptions) -> BenchResult | None:
    """One rank of ``artune bench`` (module-level for ``run_ranks``); rank 0 returns the result."""
    from artune.communicator import Communicator
    from artune.measure.harness import candidates_for, measure, parse_dtype

    if options.pin:
        cpus = os.cpu_count() or 1
        os.sched_setaffinity(0, {ctx.rank % cpus})
    with Communicator(timeout=options.peer_timeout) as comm:
        cands = candidates_for(comm, options.algorithms, sweep=options.sweep)
        progress, stop = _progress(ctx.rank == 0)
        try:
            found = measure(
                comm,
                cands,
                options.sizes,
                dtype=parse_dtype(options.dtype),
                op=options.op,
                budget_s=options.budget_s,
                check=options.check,
                progress=progress,
            )
        finally:
            stop()
        note = getattr(comm, "shm_unavailable_reason", None) or ""
        algorithms = tuple(comm.algorithms)
    if ctx.rank != 0:
        return None
    return BenchResult(found, algorithms, f"shared memory not used: {note}" if note else "")


def _progress(show: bool) -> tuple[Any, Any]:
    """A rich progress bar on stderr (rank 0 only): ``(callback, stop)``."""
    if not show:
        return None, lambda: None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("artune bench"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task("", total=None)
    bar.start()

    def update(done: int, total: int, text: str) -> None:
        bar.update(task, completed=done, total=total, description=text)

    return update, bar.stop


# ------------------------------------------------------------------ the command


def run_bench(args: argparse.Namespace) -> int:
    """``artune bench``: measure, print the table, append to ``--jsonl``."""
    options = _parse_options(args)
    if _under_torchrun():
        return _run_under_torchrun(args, options)
    if args.world_size is None or args.world_size < 1:
        raise ArtuneError("--world-size N is required (N >= 1) unless run under torchrun")
    from artune.launch import run_ranks

    world = args.world_size
    log = _open_log(args.jsonl, world)
    per_size = 4 * options.budget_s + 30.0
    before = _loads()
    results = run_ranks(bench_rank, world, options, timeout=120.0 + per_size * len(options.sizes))
    return _report(results[0], options, world, log, _busy(before, world))


def _run_under_torchrun(args: argparse.Namespace, options: BenchOptions) -> int:
    import torch.distributed as dist

    from artune.launch import RankContext

    world = int(os.environ["WORLD_SIZE"])
    if args.world_size is not None and args.world_size != world:
        raise ArtuneError(f"--world-size {args.world_size} but torchrun started WORLD_SIZE={world}; drop one")
    before = _loads()
    owned = not dist.is_initialized()
    if owned:
        dist.init_process_group("gloo")
    try:
        rank = dist.get_rank()
        log = _open_log(args.jsonl, world) if rank == 0 else None
        result = bench_rank(RankContext(rank, world), options)
    finally:
        if owned:
            dist.destroy_process_group()
    if result is None:
        return 0
    return _report(result, options, world, log, _busy(before, world))


def _loads() -> tuple[float, list[int]]:
    """The 1-minute load average and the CPU time counters, before the ranks start."""
    from artune.machine import cpu_times

    return os.getloadavg()[0], cpu_times()


def _busy(before: tuple[float, list[int]], world: int) -> str:
    """Why the figures cannot be judged, when other work competed with the ranks (``""`` when quiet)."""
    from artune.cli.tune import busy_warning
    from artune.machine import cpu_times, steal_share

    steal = steal_share(before[1], cpu_times())
    busy = busy_warning(before[0], os.getloadavg()[0], world, steal=steal)
    return f"{busy}; compare algorithms on an idle machine" if busy else ""


def _open_log(path: str | None, world: int) -> MeasurementLog | None:
    if not path:
        return None
    return MeasurementLog(path, Header.for_this_machine(world))


def _report(result: BenchResult, options: BenchOptions, world: int, log: MeasurementLog | None, busy: str = "") -> int:
    sys.stdout.write(nccl_tests_text(result.measurements, world, options, busy))
    failed = [m for m in result.measurements if not m.ok]
    for line in ([f"shared memory not used: {result.note}"] if result.note else []) + [
        f"{m.candidate.key} at {m.size_bytes} B: {m.status}: {m.error}" for m in failed
    ]:
        print(f"# {line}")
    if log is not None:
        log.extend(result.measurements)
        print(f"# {len(result.measurements)} measurements appended to {log.path}", file=sys.stderr)
    return 1 if failed else 0


#: nccl-tests' names of the data types (its ``type`` column)
NCCL_TYPES = {"float32": "float", "float16": "half", "bfloat16": "bfloat16", "float64": "double"}


def nccl_tests_text(
    measurements: list[Measurement], world: int, options: BenchOptions | None = None, busy: str = ""
) -> str:
    """The measurements as nccl-tests' ``all_reduce_perf`` prints them: ``#`` header lines, one row per size in
    bytes with its count, type and redop, then per algorithm (where nccl-tests has out-of-place and in-place)
    time in us, algbw and busbw in GB/s and ``#wrong``, and a closing ``# Avg bus bandwidth`` line (the mean of
    each algorithm's busbw over the sizes, as nccl-tests averages)."""
    keys = list(dict.fromkeys(m.candidate.key for m in measurements))
    sizes = list(dict.fromkeys(m.size_bytes for m in measurements))
    by = {(m.size_bytes, m.candidate.key): m for m in measurements}
    budget = f", {options.budget_s:g} s of timed calls per size" if options else ""
    lines = [
        f"# artune bench: all_reduce, world size {world}, time = median call of the slowest rank{budget}, "
        f"validation: {int(options.check) if options else 1}",
        "#",
    ]
    if busy:
        lines += [f"# WARNING: {busy}", "#"]
    lines += [
        "#" + " " * 43 + "".join(f"{key[:31]:^32}" for key in keys),
        "#       size         count      type   redop" + "     time   algbw   busbw #wrong" * len(keys),
        "#        (B)    (elements)                  " + "     (us)  (GB/s)  (GB/s)       " * len(keys),
    ]
    for size in sizes:
        first = by[size, next(k for k in keys if (size, k) in by)]
        row = f"{size:12d}  {first.count:12d}  {NCCL_TYPES.get(first.dtype, first.dtype):>8}  {first.redop:>6}"
        for key in keys:
            m = by.get((size, key))
            if m is None:
                row += f"  {'-':>7}  {'-':>6}  {'-':>6}  {'-':>5}"
            elif m.ok:
                row += f"  {_time(m.time_us):>7}  {m.algbw_GBps:6.2f}  {m.busbw_GBps:6.2f}  {m.nwrong:5d}"
            else:
                row += f"  {m.status[:7]:>7}  {'-':>6}  {'-':>6}  {m.nwrong if m.nwrong >= 0 else '-':>5}"
        lines.append(row)
    wrong = sum(max(m.nwrong, 0) for m in measurements)
    averages = []
    for key in keys:
        ok = [m.busbw_GBps for m in measurements if m.candidate.key == key and m.ok]
        averages.append(f"{key} {sum(ok) / len(ok):.3f}" if ok else f"{key} -")
    lines += [
        f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
        f"# Avg bus bandwidth    : {'  '.join(averages)}",
        "#",
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _time(us: float) -> str:
    """A time as nccl-tests writes it: two decimals while they fit in its column."""
    return f"{us:.2f}" if us < 1e4 else f"{us:.1f}" if us < 1e5 else f"{us:.0f}"
