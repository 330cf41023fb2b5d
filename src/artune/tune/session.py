"""Running the tuner and the verifier on ranks: spawned here, or in place under ``torchrun``.

Without ``torchrun`` the ranks are spawned on this host with
``artune.launch.run_ranks`` (a gloo group on 127.0.0.1); under ``torchrun``
(``RANK`` and ``WORLD_SIZE`` set) every process runs its rank in place. In
both cases only rank 0 reads and appends the measurement log and draws the
progress bar; it broadcasts what the log holds, so every rank starts from
the same known measurements and runs the same sequence of harness calls.

With ``device="cuda"`` (its GPU status: docs/status.md) the ranks join a
``"cpu:gloo,cuda:nccl"`` group, one GPU each, and measure CUDA tensors with
the request's ``TimingSpec`` (graph replays or events); the log's header
holds the GPU facts, the mode and how the figures were timed.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from artune.errors import ArtuneError
from artune.launch import RankContext
from artune.measure.records import Header, Measurement, MeasurementLog
from artune.measure.timers import TimingSpec
from artune.table.types import Plan
from artune.tune.compare import FasterRule
from artune.tune.config import TuneConfig
from artune.tune.measurer import CachedMeasurer, CommMeasurer
from artune.tune.replay import RunHeader, RunJournal, journal_path
from artune.tune.tuner import WorldResult, tune_world
from artune.tune.verify import Check, verify_plan

log = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass(frozen=True)
class TuneRequest:
    """What every rank needs to tune one world size (picklable)."""

    config: TuneConfig
    log_path: str
    peer_timeout: float | None = None
    progress: bool = True
    log_level: int = logging.WARNING  # rank 0's; the other ranks log warnings only
    device: str = "cpu"
    timing: TimingSpec | None = None  # None: the host clock on CPU, CUDA events on CUDA


@dataclass(frozen=True)
class VerifyRequest:
    """What every rank needs to verify one plan (picklable)."""

    plan: Plan
    budget_s: float
    rule: FasterRule
    peer_timeout: float | None = None
    log_level: int = logging.WARNING


def under_torchrun() -> bool:
    """True when this process is a rank started by ``torchrun`` (``RANK`` and ``WORLD_SIZE`` set)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def torchrun_world_size() -> int:
    """``WORLD_SIZE`` of the ``torchrun`` job."""
    return int(os.environ["WORLD_SIZE"])


def _configure_logging(ctx: RankContext, level: int) -> None:
    """Spawned ranks start with no logging set up: rank 0 logs at the parent's level, the others warn."""
    if under_torchrun():
        return  # the launching program owns logging
    logging.basicConfig(
        level=level if ctx.rank == 0 else logging.WARNING,
        format=f"artune[rank {ctx.rank}]: %(levelname)s: %(name)s: %(message)s",
    )


def gpu_header(timing: TimingSpec) -> dict[str, str]:
    """The GPU facts of this host plus the mode and the timing, for a CUDA measurement log's header."""
    from artune.gpufacts import gpu_facts

    facts = gpu_facts()
    return {**facts.as_dict(), "fingerprint": facts.fingerprint(), "mode": timing.mode, "timing": timing.describe()}


def _open_known(
    ctx: RankContext, path: str, gpu: dict[str, str] | None = None
) -> tuple[MeasurementLog | None, list[Measurement]]:
    """Rank 0 opens the log; every rank gets its measurements (or the same error)."""
    import torch.distributed as dist

    log_file: MeasurementLog | None = None
    payload: tuple[str, list[Measurement]] = ("", [])
    if ctx.rank == 0:
        try:
            log_file = MeasurementLog(path, Header.for_this_machine(ctx.world_size, gpu))
            payload = ("", log_file.read())
        except ArtuneError as err:
            payload = (str(err), [])
    box: list[Any] = [payload]
    dist.broadcast_object_list(box, src=0)
    error, known = box[0]
    if error:
        raise ArtuneError(error)
    return log_file, known


def tune_rank(ctx: RankContext, request: TuneRequest) -> WorldResult | None:
    """One rank of ``artune tune`` for one world size (module level, for ``run_ranks``); rank 0 returns."""
    from artune.communicator import Communicator
    from artune.table.bundled import cpu_default
    from artune.tune.progress import RichProgress

    _configure_logging(ctx, request.log_level)
    timing = request.timing or TimingSpec("wall" if request.device == "cpu" else "events")
    gpu = gpu_header(timing) if request.device == "cuda" else None
    show = ctx.rank == 0 and request.progress
    what = f"ws={ctx.world_size}" + ("" if timing.mode == "eager" and request.device == "cpu" else f" {timing.mode}")
    with Communicator(table=cpu_default(), timeout=request.peer_timeout) as comm:
        # ranks across hosts measure other algorithms and crossovers: their own log, their own plan
        path = request.log_path
        if comm.hosts > 1:
            path = str(Path(path).with_name(Path(path).stem + f"-hosts{comm.hosts}.jsonl"))
        log_file, known = _open_known(ctx, path, gpu)
        bar = RichProgress(request.config.budget_s, f"artune tune {what}") if show else None
        with bar if bar is not None else contextlib.nullcontext():
            inner = CommMeasurer(comm, request.config.dtype, device=request.device, timing=timing)
            journal = None
            if log_file is not None:  # rank 0 keeps what a replay needs besides the log
                journal = RunJournal(journal_path(path))
                journal.begin(RunHeader.of(inner, request.config, len(known)))
            bench = CachedMeasurer(
                inner,
                known,
                record=log_file.append if log_file is not None else None,
                progress=bar,
                journal=journal.call if journal is not None else None,
            )
            result = tune_world(bench, request.config)
    return result if ctx.rank == 0 else None


def verify_rank(ctx: RankContext, request: VerifyRequest) -> list[Check] | None:
    """One rank of ``artune verify`` for one plan; rank 0 returns the checks."""
    from artune.communicator import Communicator
    from artune.table.bundled import cpu_default

    _configure_logging(ctx, request.log_level)
    with Communicator(table=cpu_default(), timeout=request.peer_timeout) as comm:
        bench = CachedMeasurer(CommMeasurer(comm))
        checks = verify_plan(bench, request.plan, bench.algorithms, request.rule, request.budget_s)
    return checks if ctx.rank == 0 else None


def run_collective(
    fn: Callable[[RankContext, Any], R | None],
    world_size: int,
    request: Any,
    timeout: float,
    backend: str = "gloo",
) -> R | None:
    """``fn(ctx, request)`` on every rank; rank 0's result (``None`` on other ``torchrun`` ranks)."""
    if under_torchrun():
        import torch.distributed as dist

        if world_size != torchrun_world_size():
            raise ArtuneError(
                f"world size {world_size} but torchrun started WORLD_SIZE={torchrun_world_size()}; "
                "drop --world-size or match it"
            )
        if not dist.is_initialized():
            if "nccl" in backend:
                import torch

                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            dist.init_process_group(backend)
        return fn(RankContext(dist.get_rank(), world_size), request)
    from artune.launch import run_ranks

    return run_ranks(fn, world_size, request, timeout=timeout, backend=backend)[0]


def tune_world_sizes(
    world_sizes: Sequence[int],
    out_dir: Path,
    config: TuneConfig,
    peer_timeout: float | None = None,
    progress: bool = True,
    log_level: int = logging.WARNING,
    device: str = "cpu",
    timings: Sequence[TimingSpec | None] = (None,),
) -> list[WorldResult] | None:
    """Tune each world size, and on CUDA each timing (mode), in turn; ``None`` off rank 0.

    Logs ``measurements-ws<N>.jsonl`` (``-graph`` before ``.jsonl`` for graph mode) in ``out_dir``.
    """
    results: list[WorldResult] = []
    backend = "cpu:gloo,cuda:nccl" if device == "cuda" else "gloo"
    for world_size in world_sizes:
        for timing in timings:
            mode = timing.mode if timing is not None else "eager"
            path = str(log_path(out_dir, world_size, mode))
            request = TuneRequest(config, path, peer_timeout, progress, log_level, device, timing)
            found = run_collective(tune_rank, world_size, request, 180.0 + 6 * config.budget_s, backend)
            if found is None:
                return None
            results.append(found)
    return results


def log_path(out_dir: Path, world_size: int, mode: str = "eager") -> Path:
    """The measurement log of ``world_size`` (and ``mode``, when not eager) in ``out_dir``."""
    suffix = "" if mode == "eager" else f"-{mode}"
    return Path(out_dir) / f"measurements-ws{world_size}{suffix}.jsonl"
