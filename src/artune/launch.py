"""Run a function on W local ranks joined by a gloo process group, with a deadline.

This is how ``artune tune`` and ``artune bench`` start their ranks when not
under ``torchrun``, and how the tests run multi-process code: every rank's
result comes back, a failing rank's traceback is re-raised in the parent with
its rank, and ranks still running at the deadline are killed. A caller that is
interrupted interrupts its ranks, and a rank whose caller ended, however it
ended, ends too: nothing is left running.
"""

from __future__ import annotations

import _thread
import multiprocessing as mp
import os
import pickle
import queue
import select
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from artune.errors import RankFailed


@dataclass(frozen=True)
class RankContext:
    """What a rank function gets besides its own arguments."""

    rank: int
    world_size: int


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for the rendezvous store)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: what ``run_ranks`` holds while it starts its ranks (see ``_signals_held``)
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: seconds a rank whose launcher ended has to run its own cleanup before it exits regardless
ORPHAN_GRACE_S = 5.0


def _end_with_launcher(pid: int) -> None:
    """End this rank when the process that launched it ends, however it ends (SIGKILL, the OOM killer): a
    daemon thread waits on the launcher's pidfd (Linux), then interrupts the rank's main thread so that its
    cleanup runs (a communicator closed, its shared memory unlinked), and exits after ``ORPHAN_GRACE_S``
    regardless. Nothing else would end it: a forked rank's parent is the fork server, which lives as long as
    any process it forked, and a rank blocked on its peer or on results no one reads waits forever."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux (spawned ranks), or the launcher is gone already
        return

    def watch() -> None:
        ended = select.poll()  # (poll, not select: no limit on the descriptor's number)
        ended.register(fd, select.POLLIN)
        ended.poll()
        _thread.interrupt_main()
        time.sleep(ORPHAN_GRACE_S)
        os._exit(1)

    threading.Thread(target=watch, name="artune-launcher-watch", daemon=True).start()


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _rank_main(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    port: int,
    args: tuple[Any, ...],
    results: Any,
    init_timeout: float,
    env: dict[str, str],
    backend: str = "gloo",
    launcher: int = 0,
) -> None:
    # run_ranks ends its ranks with SIGTERM: from the handler on it interrupts the rank as Ctrl-C would, so that
    # fn's cleanup runs. Before that its default ends the rank quietly, and until fn's set-up begins (the
    # environment and torch) a rank has made nothing to clean up and ends without a word: the one try below
    # covers every statement from the handler on, so no interruption escapes it as a traceback
    starting = True
    try:
        signal.signal(signal.SIGTERM, _interrupted)
        if launcher:
            _end_with_launcher(launcher)
        os.environ.clear()  # the parent's environment as it was at the call, as a spawned rank would have it
        os.environ.update(env)
        os.environ.update(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(world_size),
            LOCAL_WORLD_SIZE=str(world_size),
        )
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        starting = False
        if "artune" in backend:  # artune's own torch backend (registered here even when not installed)
            from artune.backend import register

            register()
        if "nccl" in backend and torch.cuda.device_count():  # one GPU per rank, before NCCL's communicator
            torch.cuda.set_device(rank % torch.cuda.device_count())
        dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=timedelta(seconds=init_timeout))
        if backend == "gloo":  # (a barrier on a NCCL group would set NCCL up, which fn may not want)
            # every rank's connections made before any rank can finish fn and close its own: a rank that
            # returns at once would otherwise close a pair its peer is still connecting ("closed by peer")
            dist.barrier()
        try:
            value = fn(RankContext(rank, world_size), *args)
        finally:
            dist.destroy_process_group()
        payload = ("ok", rank, pickle.dumps(value))
    except BaseException as err:  # every failure must reach the parent
        if starting and isinstance(err, KeyboardInterrupt):
            return  # interrupted while setting up: the launcher is unwinding and reads no result
        payload = ("error", rank, f"{type(err).__name__}: {err}\n{traceback.format_exc()}")
    results.put(payload)


def _context() -> Any:
    """Where it exists (Linux), ranks fork from a server process that imported torch once, instead of each
    spawned rank importing it again (seconds per rank on a small machine); otherwise spawn. Either way a rank
    has none of the caller's module state and gets the caller's environment of the moment."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed"])
    return ctx


def run_ranks(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
    backend: str = "gloo",
) -> list[Any]:
    """Run ``fn(RankContext, *args)`` on ``world_size`` new local processes; return their results by rank.

    ``backend``: the process group's (``"cpu:gloo,cuda:nccl"`` puts rank r on
    GPU r mod the GPU count first; ``"artune"`` or ``"cpu:artune,cuda:nccl"``
    is artune's own torch backend).

    ``fn`` must be importable (a module-level function). Raises ``RankFailed``
    naming the rank(s) when any rank raises, exits without a result, or is
    still running after ``timeout`` seconds (then every rank is killed).
    """
    ctx = _context()
    results = ctx.Queue()
    port = free_port()
    environment = {**os.environ, **(env or {})}
    procs = [
        ctx.Process(
            target=_rank_main,
            args=(fn, rank, world_size, port, args, results, min(timeout, 60.0), environment, backend, os.getpid()),
            daemon=True,
        )
        for rank in range(world_size)
    ]
    deadline = time.monotonic() + timeout
    outcome: dict[int, tuple[str, Any]] = {}
    try:
        with _signals_held():
            for proc in procs:
                proc.start()
        _collect(procs, results, outcome, deadline)
    except BaseException:  # the caller interrupted (Ctrl-C, SIGTERM): so are its ranks, whose cleanup runs
        for proc in procs:
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGTERM)
        raise
    finally:
        for proc in (p for p in procs if p.pid is not None):  # a start that raised leaves the rest unstarted
            proc.join(timeout=max(0.0, min(5.0, deadline - time.monotonic())))
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5.0)
        results.close()
    missing = [r for r in range(world_size) if r not in outcome]
    errors = [f"--- rank {r} ---\n{v}" for r, (s, v) in sorted(outcome.items()) if s == "error"]
    if missing:
        errors.append(f"ranks {missing} still running after {timeout:.0f}s; killed")
    if errors:
        raise RankFailed("\n".join(errors))
    return [pickle.loads(outcome[r][1]) for r in range(world_size)]


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until every rank has started, then arrive as they would have: a launcher that
    unwinds while the fork server is still building a rank removes the results queue under it (the half-built
    rank dies with a traceback), and the ranks already started would not be interrupted and joined. Only the
    main thread handles signals; elsewhere this holds nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    handlers = {sig: signal.signal(sig, lambda signum, _frame: held.append(signum)) for sig in HELD_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
        if held:
            signal.raise_signal(held[0])  # the handler restored above runs now (it may raise)


def _collect(procs: list[Any], results: Any, outcome: dict[int, tuple[str, Any]], deadline: float) -> None:
    """Fill ``outcome`` by rank from ``results`` until every rank has answered, one died without a result
    (it and the rest that answered in a short grace are recorded), or ``deadline`` passes."""
    world_size = len(procs)
    while len(outcome) < world_size:
        try:
            status, rank, value = results.get(timeout=0.2)
            outcome[rank] = (status, value)
            continue
        except queue.Empty:
            pass
        dead = [r for r, p in enumerate(procs) if r not in outcome and p.exitcode is not None]
        if dead and _drain(results, outcome, world_size, grace=1.0):
            continue
        dead = [r for r, p in enumerate(procs) if r not in outcome and p.exitcode is not None]
        if dead:
            for r in dead:
                outcome[r] = ("error", f"rank {r} exited with code {procs[r].exitcode} and no result")
            _drain(results, outcome, world_size, grace=5.0)
            return
        if time.monotonic() > deadline:
            return


def _drain(results: Any, outcome: dict[int, tuple[str, Any]], world_size: int, grace: float) -> bool:
    """Collect results that were queued before a process exited; True when any arrived."""
    got = False
    end = time.monotonic() + grace
    while len(outcome) < world_size and time.monotonic() < end:
        try:
            status, rank, value = results.get(timeout=0.1)
        except queue.Empty:
            continue
        outcome[rank] = (status, value)
        got = True
    return got
