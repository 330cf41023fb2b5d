"""Running the tuner and the verifier on ranks: spawned here, or in place under ``torchrun``.

Without ``torchrun`` the ranks are spawned on this host with
``artune.launch.run_ranks`` (a gloo group on 127.0.0.1); under ``torchrun``
(``RANK`` and ``WORLD_SIZE`` set) every process runs its rank in place. In
both cases only rank 0 reads and appends the measurement log and draws the
progress bar; it broadcasts what the log holds, so every rank starts from
the same known measurements and runs the same sequence of harness calls.
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
from artune.table.model import Plan
from artune.tune.bench import CachedBench, CommBench
from artune.tune.config import TuneConfig
from artune.tune.noise import NoiseRule
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


@dataclass(frozen=True)
class VerifyRequest:
    """What every rank needs to verify one plan (picklable)."""

    plan: Plan
    budget_s: float
    rule: NoiseRule
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


def _open_known(ctx: RankContext, path: str) -> tuple[MeasurementLog | None, list[Measurement]]:
    """Rank 0 opens the log; every rank gets its measurements (or the same error)."""
    import torch.distributed as dist

    log_file: MeasurementLog | None = None
    payload: tuple[str, list[Measurement]] = ("", [])
    if ctx.rank == 0:
        try:
            log_file = MeasurementLog(path, Header.for_this_machine(ctx.world_size))
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
    log_file, known = _open_known(ctx, request.log_path)
    show = ctx.rank == 0 and request.progress
    bar = RichProgress(request.config.budget_s, f"artune tune ws={ctx.world_size}") if show else None
    with (
        Communicator(table=cpu_default(), timeout=request.peer_timeout) as comm,
        bar if bar is not None else contextlib.nullcontext(),
    ):
        bench = CachedBench(
            CommBench(comm, request.config.dtype),
            known,
            record=log_file.append if log_file is not None else None,
            progress=bar,
        )
        result = tune_world(bench, request.config)
    return result if ctx.rank == 0 else None


def verify_rank(ctx: RankContext, request: VerifyRequest) -> list[Check] | None:
    """One rank of ``artune verify`` for one plan; rank 0 returns the checks."""
    from artune.communicator import Communicator
    from artune.table.bundled import cpu_default

    _configure_logging(ctx, request.log_level)
    with Communicator(table=cpu_default(), timeout=request.peer_timeout) as comm:
        bench = CachedBench(CommBench(comm))
        checks = verify_plan(bench.measure, request.plan, bench.algorithms, request.rule, request.budget_s)
    return checks if ctx.rank == 0 else None


def run_collective(
    fn: Callable[[RankContext, Any], R | None], world_size: int, request: Any, timeout: float
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
            dist.init_process_group("gloo")
        return fn(RankContext(dist.get_rank(), world_size), request)
    from artune.launch import run_ranks

    return run_ranks(fn, world_size, request, timeout=timeout)[0]


def tune_world_sizes(
    world_sizes: Sequence[int],
    out_dir: Path,
    config: TuneConfig,
    peer_timeout: float | None = None,
    progress: bool = True,
    log_level: int = logging.WARNING,
) -> list[WorldResult] | None:
    """Tune each world size in turn (logs ``measurements-ws<N>.jsonl`` in ``out_dir``); ``None`` off rank 0."""
    results: list[WorldResult] = []
    for world_size in world_sizes:
        request = TuneRequest(config, str(log_path(out_dir, world_size)), peer_timeout, progress, log_level)
        found = run_collective(tune_rank, world_size, request, timeout=180.0 + 6 * config.budget_s)
        if found is None:
            return None
        results.append(found)
    return results


def log_path(out_dir: Path, world_size: int) -> Path:
    """The measurement log of ``world_size`` in ``out_dir``."""
    return Path(out_dir) / f"measurements-ws{world_size}.jsonl"
