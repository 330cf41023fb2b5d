"""artune's CPU all-reduce against gloo (and DeepSpeed when installed), side by side in one run.

    python bench/bench_allreduce.py [--world-size 2] [--budget 6] [--markdown] [--jsonl FILE]

World size 2 (``--world-size`` for more), float32 SUM, sizes 4 KiB..64 MiB.
One run spawns the ranks (rank r pinned to CPU r mod the CPU count unless
``--no-pin``) and, per size, checks and times
gloo, shm_one_shot and shm_two_shot interleaved (A B C A B C ...) with the
artune harness (``artune.measure.measure``: time budget per size, step time =
slowest rank), and each rank's ``dst.copy_(src)`` bandwidth at that size,
both ranks copying at once, just before and just after (the mean is shown).
When ``import deepspeed`` works, ``deepspeed.comm.inference_all_reduce`` is
one more interleaved candidate; its shared-memory path is verified (op loaded,
/dev/shm segments present, no ``torch.distributed.all_reduce`` call inside it,
else it is marked failed).

Prints an nccl-tests-style table (one row per size and algorithm: size,
count, dtype, redop, median time of the slowest rank with p20-p80, algbw,
busbw, nwrong, speed-up over gloo), then per size the copy bandwidth and the
ratios gloo/shm_one_shot, gloo/best-shm, best-shm busbw / copy GB/s and, with
DeepSpeed, t(best shm)/t(DeepSpeed); then PASS/FAIL for the goals:

- shm_one_shot >= 20x faster than gloo at 4 KiB;
- the best shm algorithm >= 2.5x faster than gloo at 64 MiB;
- best-shm busbw at 64 MiB >= 0.35 x one rank's copy bandwidth;
- with DeepSpeed: best shm time / DeepSpeed's <= 1.5 at 4-64 KiB, <= 1.0 from 1 MiB.

The goals are for world size 2; at other world sizes they are skipped.

The shm round runs compiled (``_native.c``) unless ``ARTUNE_SHM_NATIVE=0``;
the run says which. ``--python-round`` adds the pure-Python round's
shm_one_shot and shm_two_shot (a second channel built with the switch off)
as interleaved candidates ``py_one_shot``/``py_two_shot``: before and after
in one run, both called through ``Algorithm.all_reduce``.

Open MPI (``--mpi``, when ``mpirun`` and ``mpi4py`` are installed) is an
interleaved candidate like DeepSpeed: the ranks are started by ``mpirun``
instead of spawned (pinned as in spawned runs), each joins the gloo group
artune needs as well, and ``openmpi`` (mpi4py ``Allreduce`` in place on the
tensor's memory, vader shared memory,
``OMPI_MCA_btl_vader_single_copy_mechanism=none``) takes its turns between
artune's candidates, timed per call by the same harness. Goals with MPI:
artune's best shm time / Open MPI's <= 0.8 at 4 and 16 KiB.

The machine is a shared VM: quote the ratios of one run, not absolute times.
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from artune.launch import RankContext, free_port, run_ranks
from artune.measure.harness import measure, memcpy_bandwidth
from artune.measure.records import Header, Measurement, MeasurementLog
from artune.sizes import format_size, parse_size

SIZES = tuple(4096 << (2 * i) for i in range(8))  # 4KiB .. 64MiB
SHM = ("shm_one_shot", "shm_two_shot")
ALGORITHMS = ("gloo", *SHM)
DS = "deepspeed"
GOAL_ONE_SHOT_4K = 20.0
GOAL_BEST_64M = 2.5
GOAL_BUSBW_COPY = 0.35
GOAL_DS_SMALL = 1.5  # t(artune) / t(DeepSpeed) at 4-64 KiB
GOAL_DS_LARGE = 1.0  # ... from 1 MiB up
GOAL_MPI_SMALL = 0.8  # t(artune) / t(Open MPI) at 4 and 16 KiB
MPI = "openmpi"
PY = {"py_one_shot": "shm_one_shot", "py_two_shot": "shm_two_shot"}


@dataclass
class RunResult:
    """What rank 0 hands back."""

    measurements: list[Measurement]
    copy_GBps: dict[int, float]
    algorithms_here: tuple[str, ...]
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ DeepSpeed (optional)


class _DeepSpeedShm:
    """``deepspeed.comm.inference_all_reduce`` with a guard that its shm path is really taken."""

    def __init__(self, ctx: RankContext) -> None:
        import deepspeed
        import deepspeed.comm as dscomm

        dscomm.init_distributed(
            dist_backend="gloo",
            auto_mpi_discovery=False,
            rank=ctx.rank,
            world_size=ctx.world_size,
            verbose=False,
        )
        cdb = dscomm.comm.cdb
        problems = []
        if getattr(cdb, "shm_comm_op", None) is None:
            problems.append("the shm op did not load (cdb.shm_comm_op is None)")
        level = getattr(cdb, "shm_vector_kernel_level", None)
        if level is not None and level < 1:
            problems.append(f"shm_vector_kernel_level={level}")
        pattern = (
            f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_"
            f"{os.environ.get('MASTER_ADDR')}_{os.environ.get('MASTER_PORT')}_*"
        )
        segments = glob.glob(pattern)
        if len(segments) < ctx.world_size:
            problems.append(f"{len(segments)} of {ctx.world_size} /dev/shm segments ({pattern})")
        self.problems = problems
        self.note = (
            f"deepspeed {deepspeed.__version__}: shm path "
            + ("verified" if not problems else "NOT verified: " + "; ".join(problems))
            + f"; {len(segments)} segments in /dev/shm (DeepSpeed never unlinks them; this script does)"
        )
        self._inference_all_reduce = dscomm.inference_all_reduce
        self._inside = False
        self.fallback_calls = 0
        real = torch.distributed.all_reduce

        def counting_all_reduce(*args: Any, **kwargs: Any) -> Any:
            if self._inside:
                self.fallback_calls += 1
            return real(*args, **kwargs)

        torch.distributed.all_reduce = counting_all_reduce

    def __call__(self, tensor: torch.Tensor, op: str, params: Mapping[str, object]) -> torch.Tensor:
        if self.problems:
            raise RuntimeError("DeepSpeed shm path not taken: " + "; ".join(self.problems))
        if op != "sum" or params:
            raise RuntimeError(f"DeepSpeed inference_all_reduce does SUM only, no parameters (op={op!r})")
        self._inside = True
        try:
            self._inference_all_reduce(tensor)
        finally:
            self._inside = False
        if self.fallback_calls:
            raise RuntimeError(f"DeepSpeed fell back to torch.distributed.all_reduce {self.fallback_calls} times")
        return tensor


# ------------------------------------------------------------------ Open MPI (optional)


class _OpenMpi:
    """mpi4py ``Allreduce`` in place on the tensor's memory (a numpy view kept per tensor)."""

    def __init__(self) -> None:
        from mpi4py import MPI

        self._mpi = MPI
        self._comm = MPI.COMM_WORLD
        self._views: dict[int, tuple[torch.Tensor, Any]] = {}  # id -> (tensor, its numpy view): the tensor is kept
        self.note = f"{MPI.Get_library_version().splitlines()[0]} via mpi4py, interleaved with artune's candidates"

    def __call__(self, tensor: torch.Tensor, op: str, params: Mapping[str, object]) -> torch.Tensor:
        if op != "sum" or params:
            raise RuntimeError(f"the Open MPI candidate does SUM only, no parameters (op={op!r})")
        held = self._views.get(id(tensor))
        if held is None or held[0] is not tensor:
            if len(self._views) > 64:
                self._views.clear()
            held = self._views[id(tensor)] = (tensor, tensor.numpy())
        self._comm.Allreduce(self._mpi.IN_PLACE, held[1], op=self._mpi.SUM)
        return tensor


def mpi_unavailable() -> str | None:
    """Why the Open MPI column cannot run here (``None`` when it can)."""
    if shutil.which("mpirun") is None:
        return "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"
    try:
        import mpi4py  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as err:
        return f"import mpi4py failed ({err}; pip install mpi4py)"
    return None


def mpi_rank_main(options: argparse.Namespace) -> None:
    """One rank under mpirun: join a gloo group on the parent's port and run ``bench_rank``."""
    from datetime import timedelta

    from mpi4py import MPI

    rank, world = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(options.port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
    )
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    try:
        result = bench_rank(RankContext(rank, world), options)
    finally:
        torch.distributed.destroy_process_group()
    if result is not None:
        with open(options.result, "wb") as out:
            pickle.dump(result, out)


def run_under_mpirun(options: argparse.Namespace, world: int, env: dict[str, str], timeout: float) -> RunResult:
    """The whole bench with its ranks started by mpirun (Open MPI interleaved); rank 0's result."""
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "result.pickle")
        # bench_rank pins each rank's main thread as in spawned runs; mpirun's binding would also pin gloo's
        # threads onto that core (measured: gloo 8x slower)
        cmd = ["mpirun", "--allow-run-as-root", "-np", str(world), "--bind-to", "none"]
        cmd += [sys.executable, os.path.abspath(__file__), *options.argv, "--mpi-rank", "--result", result]
        cmd += ["--port", str(free_port())]
        env = dict(os.environ, **env, OMPI_MCA_btl_vader_single_copy_mechanism="none")
        try:
            done = subprocess.run(cmd, env=env, stdout=sys.stderr, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"the mpirun bench timed out after {timeout:.0f} s") from None
        if done.returncode or not os.path.exists(result):
            raise SystemExit(f"the mpirun bench failed (exit {done.returncode}); its output is above")
        with open(result, "rb") as f:
            loaded: RunResult = pickle.load(f)
    return loaded


def bench_rank(ctx: RankContext, options: argparse.Namespace) -> RunResult | None:
    """One rank: measure every size (interleaved candidates) then the copy bandwidth at that size."""
    from artune.communicator import Communicator
    from artune.measure.reducers import FunctionReducer

    if options.pin:
        os.sched_setaffinity(0, {ctx.rank % (os.cpu_count() or 1)})
    notes: list[str] = []
    from artune.algorithms import open_algorithms
    from artune.algorithms.shm import native

    py_algos = None
    with Communicator() as comm:
        reducer: Any = comm
        names = list(ALGORITHMS)
        notes.append(f"shm round: {native.describe()}")
        functions: dict[str, Any] = {}
        if options.python_round:
            saved = os.environ.get(native.ENV_SWITCH)
            os.environ[native.ENV_SWITCH] = "0"
            try:
                py_algos = open_algorithms(None, timeout=60.0)
            finally:
                os.environ.pop(native.ENV_SWITCH) if saved is None else os.environ.update({native.ENV_SWITCH: saved})
            if py_algos.channel is not None:
                notes.append(f"py_* candidates: shm round {py_algos.channel.path}")
                functions.update({py: py_algos.by_name[name].all_reduce for py, name in PY.items()})
                names += list(PY)
        if options.deepspeed:
            try:
                ds = _DeepSpeedShm(ctx)
            except Exception as err:  # the column is optional: say why it is missing
                notes.append(f"deepspeed column skipped: {type(err).__name__}: {err}")
            else:
                notes.append(ds.note)
                functions[DS] = ds
                names.append(DS)
        if options.mpi_rank:
            mpi = _OpenMpi()
            notes.append(mpi.note)
            functions[MPI] = mpi
            names.append(MPI)
        if functions:
            reducer = FunctionReducer(functions, base=comm)
        if getattr(comm, "shm_unavailable_reason", None):
            notes.append(f"shared memory not used: {comm.shm_unavailable_reason}")
        measurements: list[Measurement] = []
        copy_gbps: dict[int, float] = {}
        for index, size in enumerate(options.sizes):
            started = time.monotonic()
            before = memcpy_bandwidth(size, budget_s=options.copy_budget / 2)
            measurements += measure(
                reducer, names, [size], budget_s=options.budget, burst=options.burst, settle=min(2, options.burst)
            )
            copy_gbps[size] = (before + memcpy_bandwidth(size, budget_s=options.copy_budget / 2)) / 2
            if ctx.rank == 0:
                print(
                    f"[{index + 1}/{len(options.sizes)}] {format_size(size)} done in "
                    f"{time.monotonic() - started:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
        algorithms_here = tuple(comm.algorithms)
    if py_algos is not None:
        py_algos.close()
    if ctx.rank != 0:
        return None
    return RunResult(measurements, copy_gbps, algorithms_here, notes)


# ------------------------------------------------------------------ report


def _ratio(a: float, b: float) -> float:
    return a / b if math.isfinite(a) and math.isfinite(b) and b > 0 else math.nan


def _x(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}x"


def _cell(m: Measurement) -> str:
    if not m.ok:
        return m.status
    return f"{m.time_us:.1f} ({m.p20_us:.0f}-{m.p80_us:.0f})"


def rows(result: RunResult) -> tuple[list[str], list[list[str]], dict[int, dict[str, float]]]:
    """The ratio table (header, rows) and the figures the goals need, per size."""
    by = {(m.size_bytes, m.candidate.algorithm): m for m in result.measurements}
    sizes = list(dict.fromkeys(m.size_bytes for m in result.measurements))
    has_ds = any(m.candidate.algorithm == DS for m in result.measurements)
    has_py = any(m.candidate.algorithm in PY for m in result.measurements)
    has_mpi = any(m.candidate.algorithm == MPI for m in result.measurements)
    timed = [*ALGORITHMS, *([DS] if has_ds else []), *(PY if has_py else []), *([MPI] if has_mpi else [])]
    header = ["size", "copy GB/s/rank", "gloo/shm_one_shot", "gloo/best-shm", "best-shm busbw/copy"]
    if has_ds:
        header.append("t(best shm)/t(DS)")
    if has_py:
        header.append("t(best shm)/t(best py round)")
    if has_mpi:
        header += ["Open MPI us", "t(best shm)/t(MPI)"]
    table: list[list[str]] = []
    figures: dict[int, dict[str, float]] = {}
    for size in sizes:
        ms = {a: by.get((size, a)) for a in timed}
        t = {a: (m.time_us if m is not None else math.inf) for a, m in ms.items()}
        best = min(SHM, key=lambda a: t[a])
        best_m = ms[best]
        copy = result.copy_GBps.get(size, math.nan)
        best_busbw = best_m.busbw_GBps if best_m is not None and best_m.ok else math.nan
        fig = {
            "gloo/one_shot": _ratio(t["gloo"], t["shm_one_shot"]),
            "gloo/best": _ratio(t["gloo"], t[best]),
            "busbw/copy": best_busbw / copy if copy and not math.isnan(best_busbw) else math.nan,
            "best/ds": _ratio(t[best], t[DS]) if has_ds else math.nan,
            "best/py": _ratio(t[best], min(t[p] for p in PY)) if has_py else math.nan,
            "best/mpi": _ratio(t[best], t[MPI]) if has_mpi else math.nan,
        }
        figures[size] = fig
        row = [
            format_size(size),
            f"{copy:.2f}",
            _x(fig["gloo/one_shot"]),
            _x(fig["gloo/best"]) + f" ({best.removeprefix('shm_')})",
            "-" if math.isnan(fig["busbw/copy"]) else f"{fig['busbw/copy']:.2f}",
        ]
        if has_ds:
            row.append(_x(fig["best/ds"]))
        if has_py:
            row.append(_x(fig["best/py"]))
        if has_mpi:
            row += [f"{t[MPI]:.1f}", _x(fig["best/mpi"])]
        table.append(row)
    return header, table, figures


def nccl_rows(result: RunResult) -> tuple[list[str], list[list[str]]]:
    """The nccl-tests-style table: one row per size and algorithm, with its speed-up over gloo."""
    by = {(m.size_bytes, m.candidate.algorithm): m for m in result.measurements}
    header = ["size", "count", "dtype", "redop", "algorithm", "time_us med (p20-p80)", "algbw GB/s", "busbw GB/s"]
    header += ["nwrong", "gloo/this"]
    table = []
    for m in result.measurements:
        gloo = by.get((m.size_bytes, "gloo"))
        speedup = _ratio(gloo.time_us, m.time_us) if gloo is not None and gloo.ok and m.ok else math.nan
        row = [format_size(m.size_bytes), str(m.count), m.dtype, m.redop, m.candidate.algorithm, _cell(m)]
        row += [f"{m.algbw_GBps:.3f}", f"{m.busbw_GBps:.3f}"] if m.ok else ["-", "-"]
        row += [str(m.nwrong) if m.nwrong >= 0 else "-", _x(speedup)]
        table.append(row)
    return header, table


def goals(figures: dict[int, dict[str, float]], world: int) -> list[tuple[str, str]]:
    """(PASS|FAIL|SKIP, text) for each speed goal (set for world size 2)."""
    if world != 2:
        return [("SKIP", f"the speed goals are set for world size 2, not {world}")]

    def verdict(size: int, key: str, goal: float, text: str, at_most: bool = False) -> tuple[str, str]:
        if size not in figures:
            return "SKIP", f"{text}: {format_size(size)} not measured"
        value = figures[size][key]
        ok = not math.isnan(value) and (value <= goal if at_most else value >= goal)
        return ("PASS" if ok else "FAIL"), f"{text}: {value:.2f} (goal {'<=' if at_most else '>='} {goal})"

    verdicts = [
        verdict(4096, "gloo/one_shot", GOAL_ONE_SHOT_4K, "shm_one_shot vs gloo at 4KiB, x faster"),
        verdict(64 << 20, "gloo/best", GOAL_BEST_64M, "best shm vs gloo at 64MiB, x faster"),
        verdict(
            64 << 20,
            "busbw/copy",
            GOAL_BUSBW_COPY,
            "best-shm busbw at 64MiB / one rank's copy GB/s",
        ),
    ]
    for size, fig in figures.items():
        goal = GOAL_DS_SMALL if 4096 <= size <= 64 << 10 else GOAL_DS_LARGE if size >= 1 << 20 else None
        if goal is not None and not math.isnan(fig["best/ds"]):
            text = f"best shm time / DeepSpeed's at {format_size(size)}"
            verdicts.append(verdict(size, "best/ds", goal, text, at_most=True))
        if size in (4096, 16384) and not math.isnan(fig.get("best/mpi", math.nan)):
            text = f"best shm time / Open MPI's at {format_size(size)}"
            verdicts.append(verdict(size, "best/mpi", GOAL_MPI_SMALL, text, at_most=True))
    return verdicts


def print_text(header: list[str], table: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for row in table:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))


_TEXT_COLUMNS = ("size", "dtype", "redop", "algorithm")


def print_markdown(header: list[str], table: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" if h in _TEXT_COLUMNS else "---:" for h in header) + "|")
    for row in table:
        print("| " + " | ".join(row) + " |")


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=6.0, help="seconds of timed calls per size (default 6)")
    parser.add_argument(
        "--copy-budget",
        type=float,
        default=0.5,
        help="seconds of copies per size, half before and half after the all-reduces (default 0.5)",
    )
    parser.add_argument(
        "--burst",
        type=int,
        default=20,
        help="back-to-back timed calls per candidate turn, after 2 untimed ones (default 20): the anchors timed "
        "back-to-back calls; turns still interleave the candidates against drift",
    )
    parser.add_argument(
        "--world-size", type=int, default=2, help="ranks on this host (default 2; more than the CPUs oversubscribes)"
    )
    parser.add_argument("--sizes", default=None, help="comma list (default 4KiB,16KiB,...,64MiB)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--jsonl", default=None, metavar="FILE", help="append the measurements to this log")
    parser.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin rank r to CPU r")
    parser.add_argument("--no-deepspeed", dest="deepspeed", action="store_false", help="skip the DeepSpeed column")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal fails")
    parser.add_argument(
        "--python-round",
        action="store_true",
        help="add the pure-Python shm round (py_one_shot, py_two_shot) as interleaved candidates",
    )
    parser.add_argument(
        "--mpi", action="store_true", help="add Open MPI as an interleaved candidate (the ranks start under mpirun)"
    )
    parser.add_argument("--mpi-rank", action="store_true", help=argparse.SUPPRESS)  # a rank under mpirun
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    options.argv = list(sys.argv[1:] if argv is None else argv)
    options.sizes = tuple(parse_size(s) for s in options.sizes.split(",")) if options.sizes else SIZES
    if options.mpi_rank:
        mpi_rank_main(options)
        return 0
    if options.mpi and (why := mpi_unavailable()):
        options.mpi = False
        print(f"# Open MPI column skipped: {why}", file=sys.stderr)
    if options.deepspeed:
        try:
            import deepspeed  # noqa: F401
        except Exception as err:
            options.deepspeed = False
            print(f"# deepspeed column skipped: import deepspeed failed ({err})", file=sys.stderr)
    world = options.world_size
    if world < 2:
        parser.error("--world-size must be at least 2")
    log = MeasurementLog(options.jsonl, Header.for_this_machine(world)) if options.jsonl else None
    env = {"LOCAL_SIZE": str(world), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if options.deepspeed:
        env.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"), "ds_torch_ext"))
    started = time.monotonic()
    per_size = 3 * options.budget + 4 * options.copy_budget + 60
    ds_segments = f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_*"
    existing = set(glob.glob(ds_segments))
    timeout = 180 + per_size * len(options.sizes)
    try:
        if options.mpi:
            result = run_under_mpirun(options, world, env, timeout)
        else:
            result = run_ranks(bench_rank, world, options, timeout=timeout, env=env)[0]
    finally:
        for path in set(glob.glob(ds_segments)) - existing:  # DeepSpeed never unlinks its segments
            os.unlink(path)
    elapsed = time.monotonic() - started
    nccl_header, nccl_table = nccl_rows(result)
    header, table, figures = rows(result)
    title = (
        f"all_reduce float32 sum, world_size={world}, one thread per rank, pin={options.pin}, "
        f"{options.budget:g} s per size, torch {torch.__version__}; time = median of the slowest rank"
    )
    if options.markdown:
        print(f"_{title}_\n")
        print_markdown(nccl_header, nccl_table)
        print()
        print_markdown(header, table)
        print()
    else:
        print(f"# {title}")
        print_text(nccl_header, nccl_table)
        print()
        print_text(header, table)
    for note in result.notes:
        print(f"# {note}")
    for m in result.measurements:
        if not m.ok:
            print(f"# {m.candidate.key} at {format_size(m.size_bytes)}: {m.status}: {m.error}")
    verdicts = goals(figures, world)
    for verdict, text in verdicts:
        print(f"- {verdict}: {text}" if options.markdown else f"{verdict}  {text}")
    print(f"# {elapsed:.0f} s", file=sys.stderr)
    if log is not None:
        log.extend(result.measurements)
    return 1 if options.strict and any(v == "FAIL" for v, _ in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
