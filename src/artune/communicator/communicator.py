"""The Communicator: one object per process group that decides and runs every all-reduce.

Rules it follows (documented here because users rely on them):

- Every rank uses the same table (checked at construction, ``AgreementError``
  otherwise) and the same decision function, so for the same call every rank
  picks the same algorithm without talking.
- Shared-memory algorithms are offered only when every rank is on one host and
  the segment could be created and opened by all; otherwise the process group
  runs every size (``shm_unavailable_reason`` says why). When the ranks share
  a host, that is a large slow-down for small messages, so
  rank 0 logs it once per process at WARNING with the reason and the fix.
  Across hosts, ``hier_shm`` uses shared memory inside each host, and plans
  are those for the number of hosts (``hosts``).
- A signature (shape, dtype, device, op, algorithm, and the parameters a
  call names) is decided and routed the first time it is seen; repeats go
  from C straight to the route, its agreement round and its bound call,
  whatever the device and algorithm (``artune.communicator.fastpath``).
- Per call, ranks compare element count, dtype, op and algorithm before any
  data moves (inside the shared-memory round, or a header-only round before
  a process-group call); a mismatch raises ``CallMismatch`` on every rank.
- A non-contiguous tensor is reduced through a contiguous copy that is copied
  back. A dtype or op an algorithm cannot reduce exactly makes it unavailable;
  when the table's choice is unavailable, the plan's fallback runs, and when
  that is unavailable too, the process group does.
- At start-up every algorithm but the process group reduces data whose sum
  is known exactly; one that gets it wrong on any rank is disabled on every
  rank (``disabled`` says why) and its sizes go to the fallback.
- A dead or silent peer raises ``PeerTimeout`` naming it within ``timeout``
  seconds; the Communicator is then broken and later calls raise
  ``CommunicatorClosed``.
- Modes: a call made while its CUDA stream captures a graph uses the table's
  ``graph`` plan (capturable algorithms only), others the ``mode`` given
  (``eager``). Nothing inside a capture talks to peers: the per-call
  agreement happens the first time a call signature is seen outside a
  capture, which also binds its graph route; a signature first seen inside a
  capture raises ``ArtuneError`` (run the call once before capturing, as the
  engines' warm-up does). CPU and CUDA tensors each have their own table,
  baseline and routes (``artune.communicator.devices``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import torch
import torch.distributed as dist

from artune import machine, settings
from artune._version import __version__
from artune.algorithms import AlgorithmSet, ProcessGroupAlgorithm, open_algorithms
from artune.algorithms.base import REDUCE_OPS, Algorithm
from artune.algorithms.shm.segment import shm_problem
from artune.communicator import devices, fastpath, modes
from artune.communicator.agreement import RankFacts, agree
from artune.communicator.routes import Route, RouteCache, RouteStats, Signature
from artune.communicator.selfcheck import self_check
from artune.errors import ArtuneError, CommunicatorClosed, PeerTimeout
from artune.sizes import format_size
from artune.table.decide import Decision, decide
from artune.table.io import digest
from artune.table.selection import select_table
from artune.table.types import MODES, Mode, Table

log = logging.getLogger(__name__)

_TORCH_OPS = {dist.ReduceOp.SUM: "sum", dist.ReduceOp.MAX: "max", dist.ReduceOp.MIN: "min"}


_shm_warned: set[str] = set()  # reasons already warned about in this process


def shm_env_hint(world_size: int, env_buffer: str | None) -> str:
    """``"; the buffer comes from ARTUNE_SHM_BYTES=..."`` when that setting is what does not fit, else ``""``."""
    if env_buffer and shm_problem(world_size, settings.DEFAULT_SHM_BYTES) is None:
        return (
            f"; the buffer comes from ARTUNE_SHM_BYTES={env_buffer}: unset it (the default "
            f"{format_size(settings.DEFAULT_SHM_BYTES)} fits) or set a smaller size"
        )
    return ""


def _warn_shm_unused(reason: str, baseline: str, world_size: int, env_buffer: str | None) -> None:
    """Warn, once per reason, that ranks sharing a host cannot use shared memory: every call is slower.

    ``env_buffer``: ``ARTUNE_SHM_BYTES`` when it set the buffer; the fix then names it if the
    default buffer would fit.
    """
    if reason in _shm_warned:
        return
    _shm_warned.add(reason)
    log.warning(
        "artune: the ranks share a host but shared memory is not used, so every all-reduce runs on %s "
        "(much slower for small messages): %s%s",
        baseline,
        reason,
        shm_env_hint(world_size, env_buffer),
    )


def _warn_if_oversubscribed(local: list[RankFacts]) -> None:
    """Warn when this host's ranks run more torch threads than the CPUs they may use, together.

    Spinning OpenMP threads starve the peer rank, whose shared-memory rounds
    then wait a time slice each (docs/results/shm-defaults.md). Ranks pinned to
    distinct CPUs with one thread each are fine.
    """
    threads = sum(f.threads for f in local)
    cpus = len(set().union(*(f.cpus for f in local))) or (os.cpu_count() or 1)
    if threads <= cpus:
        return
    if threads > len(local):
        fix = f"call torch.set_num_threads({max(1, cpus // len(local))}) in each rank (or set OMP_NUM_THREADS)"
    else:
        fix = f"run at most {cpus} ranks on this host for full speed (waits yield the CPU, so it still works)"
    log.warning(
        "artune: %d local ranks run %d torch threads on %d CPUs; shared-memory all-reduce slows down: %s",
        len(local),
        threads,
        cpus,
        fix,
    )


class Communicator:
    """Decides and runs all-reduces over a ``torch.distributed`` process group.

    Args:
        group: the process group (default: WORLD). It must be initialised.
        table: a ``Table``, a path to a table file, or ``None`` to select one
            (``ARTUNE_TABLE``, then this machine's measured table, then the
            bundled default).
        timeout: seconds to wait for peers before ``PeerTimeout``
            (default ``ARTUNE_TIMEOUT`` or 60).
        mode: the plan for calls outside a CUDA graph capture: ``"eager"``
            (default) or ``"graph"``; calls made while their CUDA stream
            captures always use ``"graph"``.
        shm: offer shared-memory algorithms when the ranks share a host.
        buffer_bytes: shared-memory buffer per rank and round (default
            ``ARTUNE_SHM_BYTES`` or 4 MiB); larger messages go in chunks.
        check: run the start-up self-check (a few small all-reduces per
            algorithm against sums known exactly); an algorithm that fails
            it is disabled on every rank and the reason logged (``disabled``).
    """

    def __init__(
        self,
        group: dist.ProcessGroup | None = None,
        table: Table | str | Path | None = None,
        timeout: float | None = None,
        *,
        mode: str = "eager",
        shm: bool = True,
        buffer_bytes: int | None = None,
        check: bool = True,
    ) -> None:
        if not dist.is_initialized():
            raise ArtuneError(
                "Communicator(): torch.distributed is not initialised; call "
                "torch.distributed.init_process_group('gloo') first (torchrun sets the environment)"
            )
        if mode not in MODES:
            raise ArtuneError(f"Communicator(): mode {mode!r} is not one of {', '.join(MODES)}")
        env = settings.from_env()
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.mode = Mode(mode)
        self.timeout = float(timeout if timeout is not None else env.timeout_s)
        self.table = select_table(table, env)
        #: the table per device type (CPU and CUDA tensors each have their own; ``table`` serves the rest)
        self.tables = devices.device_tables(self.table, group, env)
        env_buffer = os.environ.get("ARTUNE_SHM_BYTES") if buffer_bytes is None else None
        buffer_bytes = int(buffer_bytes if buffer_bytes is not None else env.shm_bytes)
        everyone = self._agree(buffer_bytes)
        #: how many hosts the ranks span: plans are chosen by (world size, hosts)
        self.hosts = len({f.host for f in everyone})
        self._open(everyone, shm, buffer_bytes)
        try:
            #: algorithms that failed the start-up self-check, with why (the same on every rank)
            self.disabled: dict[str, str] = self._self_check() if check else {}
        except BaseException:
            self._algorithms.close()
            raise
        reason = self._algorithms.shm_unavailable_reason
        self.shm_unavailable_reason: str | None = reason if shm else "disabled (shm=False)"
        self._available: dict[tuple[torch.dtype, str, str, str], frozenset[str]] = {}
        self._routes = RouteCache()
        #: repeated calls with a compiled route run from C; its busy flag guards against overlapping calls
        #: from threads (they would desynchronise ranks), whichever path they take
        self._fast: fastpath.Router = fastpath.make_router()
        self._broken = ""
        self._closed = False
        self._tell(everyone, shm, env_buffer)

    def _agree(self, buffer_bytes: int) -> list[RankFacts]:
        """Every rank's facts; ``AgreementError`` on every rank when the tables or settings differ."""
        facts = RankFacts(
            version=__version__,
            table_digest="+".join(digest(t) for t in self.tables.values()),
            table_name=" + ".join(t.name for t in self.tables.values()),
            forced=self.table.forced,
            mode=self.mode.value,
            buffer_bytes=buffer_bytes,
            host=machine.host_id(),
            threads=torch.get_num_threads(),
            cpus=tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else (),
        )
        return agree(facts, self.group)

    def _open(self, everyone: list[RankFacts], shm: bool, buffer_bytes: int) -> None:
        """Open the algorithms this group can run: shared memory on one host, ``hier_shm`` across hosts."""
        same_host = self.hosts == 1
        self._algorithms: AlgorithmSet = open_algorithms(
            self.group,
            timeout=self.timeout,
            buffer_bytes=buffer_bytes,
            use_shm=shm and same_host,
            same_host=same_host,
            hosts=[f.host for f in everyone] if shm and not same_host else None,
        )
        groups = [n for n, a in self._algorithms.by_name.items() if isinstance(a, ProcessGroupAlgorithm)]
        if not groups:  # a NCCL-only group whose ranks share a GPU
            why = self._algorithms.unavailable.get("nccl", "no backend")
            self._algorithms.close()
            raise ArtuneError(f"Communicator(): the process group cannot reduce here (nccl: {why})")
        self._baseline = groups[0]
        self._baselines = devices.baselines(self._algorithms.by_name)
        #: catalog algorithms not open here, with why (symmetric memory, engine kernels)
        self.unavailable: dict[str, str] = dict(self._algorithms.unavailable)

    def _self_check(self) -> dict[str, str]:
        """The algorithms that fail the start-up self-check, with why; the process groups are its reference."""
        reference = set(self._baselines.values()) | {self._baseline}
        return self_check(self._algorithms.by_name, reference, self.group)

    def _tell(self, everyone: list[RankFacts], shm: bool, env_buffer: str | None) -> None:
        """Log, once per host or on rank 0, what makes calls slow or an algorithm absent, and what runs."""
        host = everyone[self.rank].host
        if self.shm_unavailable_reason is None and self.rank == min(
            r for r, f in enumerate(everyone) if f.host == host
        ):
            _warn_if_oversubscribed([f for f in everyone if f.host == host])
        reason = self._algorithms.shm_unavailable_reason
        if shm and reason is not None and self.hosts == 1 and self.world_size > 1 and self.rank == 0:
            _warn_shm_unused(reason, self._baseline, self.world_size, env_buffer)
        if self.rank == 0:
            for name, problem in self.disabled.items():
                log.warning("artune: %s failed the start-up self-check and is disabled: %s", name, problem)
            log.info(
                "artune Communicator: world_size=%d, table %s, algorithms %s%s",
                self.world_size,
                self.table.name,
                ", ".join(self.algorithms),
                f"; shared memory not used: {self.shm_unavailable_reason}" if self.shm_unavailable_reason else "",
            )

    # ------------------------------------------------------------ queries

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The algorithm names runnable on this group (those that passed the self-check)."""
        return tuple(n for n in self._algorithms.by_name if n not in self.disabled)

    @property
    def baseline(self) -> str:
        """The process group's own algorithm (``gloo`` on CPU): always available, the reference."""
        return self._baseline

    @property
    def multicast(self) -> bool | None:
        """Whether NVLink multicast works on every rank (CUDA tensors' decisions take the table's plans for
        that machine); ``None`` where the CUDA algorithms were not opened (where this has run: docs/status.md)."""
        return self._algorithms.multicast

    def baseline_for(self, device: torch.device | str) -> str:
        """The process-group algorithm for tensors on ``device`` (``nccl`` for CUDA on a NCCL group)."""
        return self._baselines.get(torch.device(device).type, self._baseline)

    def table_for(self, device: torch.device | str) -> Table:
        """The table that decides for tensors on ``device``."""
        return self.tables.get(torch.device(device).type, self.table)

    def tunables(self, name: str) -> dict[str, tuple[object, ...]]:
        """The declared parameters of algorithm ``name`` and their candidate values."""
        return self._runnable(name).tunable_space()

    def available(
        self, dtype: torch.dtype, op: str = "sum", device: torch.device | str = "cpu", mode: str = "eager"
    ) -> frozenset[str]:
        """Names of the algorithms that can reduce ``dtype`` tensors on ``device`` with ``op`` exactly here
        (in ``mode="graph"``, for CUDA tensors, only those a CUDA graph can capture)."""
        kind = torch.device(device).type
        key = (dtype, op, kind, mode)
        found = self._available.get(key)
        if found is None:
            found = frozenset(
                name
                for name, alg in self._algorithms.by_name.items()
                if name not in self.disabled
                and (alg.devices is None or kind in alg.devices)
                and alg.unavailable(dtype, op) is None
                and (mode != "graph" or kind != "cuda" or alg.capturable)
            )
            self._available[key] = found
        return found

    def decide(self, tensor: torch.Tensor, op: str | dist.ReduceOp = "sum") -> Decision:
        """The decision ``all_reduce`` would make for ``tensor`` now (``graph`` while capturing), without running it."""
        return self._decide(tensor, _op_name(op), modes.call_mode(modes.capturing(tensor), self.mode))

    def _decide(self, tensor: torch.Tensor, op: str, mode: str) -> Decision:
        """The table's decision among the usable algorithms; a choice the message does not fit
        (alignment, buffer size: ``Algorithm.unfit``) gives way to the next, and the reason says so."""
        usable = self._usable(tensor, op, mode)
        nbytes = tensor.numel() * tensor.element_size()
        table = self.table_for(tensor.device)
        multicast = self.multicast if tensor.device.type == "cuda" else None  # an engine's plans differ by it
        fits = set(usable)
        skipped: list[str] = []
        while True:
            decision = decide(table, nbytes, self.world_size, mode, frozenset(fits), self.hosts, multicast)
            if decision.algorithm not in fits:
                break
            why = self._algorithms.by_name[decision.algorithm].unfit(nbytes, tensor.dtype)
            if why is None:
                break
            skipped.append(f"{decision.algorithm} skipped: {why}")
            fits.discard(decision.algorithm)
        if skipped:
            decision = dataclasses.replace(
                decision, reason=f"{decision.reason} ({'; '.join(skipped)})", steps=(*decision.steps, *skipped)
            )
        return decision

    # ------------------------------------------------------------ the call

    def all_reduce(
        self,
        tensor: torch.Tensor,
        op: str | dist.ReduceOp = "sum",
        algorithm: str | None = None,
        params: Mapping[str, object] | None = None,
    ) -> torch.Tensor:
        """Reduce ``tensor`` in place across the group and return it.

        ``algorithm`` forces one (it must be available for this dtype and op);
        ``params`` replace the table's parameters for it. Calls must not
        overlap: one from a second thread while another runs raises ``ArtuneError``.
        """
        # the hot path: a call whose route was bound before runs from C (agreement, then the bound call)
        if params is None or (algorithm is not None and not params):
            route_key: object = algorithm
        else:
            route_key = self._routes.key(algorithm, params)
        if route_key is not False:
            try:
                if self._fast(tensor, op, route_key):
                    return tensor
            except PeerTimeout as err:
                self._break(err)
                raise
        return self._general_path(tensor, op, route_key, algorithm, params)

    def _general_path(
        self,
        tensor: torch.Tensor,
        op: str | dist.ReduceOp,
        route_key: object,
        algorithm: str | None,
        params: Mapping[str, object] | None,
    ) -> torch.Tensor:
        """A call the compiled router did not run: look its route up (on first sight, decide and bind it),
        compare the call across ranks when the route says so, and run it on contiguous data."""
        if self._closed or self._broken:
            raise CommunicatorClosed(self._broken or "all_reduce(): the Communicator is closed")
        if not self._fast.enter():
            raise ArtuneError(
                "all_reduce(): another thread is inside an all_reduce on this Communicator; calls on one "
                "Communicator must not overlap, since every rank must make them in the same order. "
                "Use one Communicator per thread, each on its own process group"
            )
        try:
            captured = modes.capturing(tensor)
            key = (tensor.shape, tensor.dtype, tensor.device, op, route_key)
            routes = self._routes
            route = (routes.graph if captured else routes.eager).get(key)  # one dict lookup once seen
            if route is not None:
                routes.hits += 1
            elif captured:
                raise _first_seen_in_capture(tensor, op)
            elif route_key is False:  # parameters that cannot be a key: decided afresh each time
                routes.misses += 1
                route = self._route(tensor, op, algorithm, params, self.mode)
            else:
                route = self._first_sight(key, tensor, op, algorithm, params)
            run, agree = route.run, route.agree
            data = tensor.detach() if tensor.requires_grad else tensor  # like torch.distributed: outside autograd
            work = data if data.is_contiguous() else data.contiguous()
            try:
                if agree is not None and not captured:  # inside a capture nothing may talk to peers
                    agree()
                run(work)
            except PeerTimeout as err:
                self._break(err)
                raise
            if work is not data:
                data.copy_(work)
            return tensor
        finally:
            self._fast.leave()

    @property
    def route_stats(self) -> RouteStats:
        """How calls found their route so far: run from C (``fast``), found by the general path (``hits``),
        decided and bound (``misses``); see ``artune.communicator.routes``."""
        return self._routes.stats(self._fast.hits)

    def _break(self, err: PeerTimeout) -> None:
        """A peer failed: every later call raises ``CommunicatorClosed`` naming the failure."""
        self._broken = f"all_reduce(): the Communicator is broken by an earlier failure ({err}); create a new one"
        self._fast.clear()

    def _first_sight(
        self,
        key: Signature,
        tensor: torch.Tensor,
        op: object,
        algorithm: str | None,
        params: Mapping[str, object] | None,
    ) -> Route:
        """Bind the routes of a new call signature: its eager one, and its graph one for later captures.

        A graph route that cannot exist (a forced algorithm that cannot be
        captured) is stored as one that raises, so the capture gets the reason.
        """
        route = self._route(tensor, op, algorithm, params, self.mode)  # type: ignore[arg-type]
        try:
            graph = self._route(tensor, op, algorithm, params, Mode.GRAPH)  # type: ignore[arg-type]
            graph = graph._replace(agree=None, agree_step=None)  # no agreement inside a capture
        except ArtuneError as err:
            graph = Route(functools.partial(_raise, err), None, "")
        self._routes.add(key, route, graph)
        device = tensor.device
        compiled = device.type == "cpu" or (device.type == "cuda" and device.index is not None)
        if compiled:  # by the call's route key; CPU work is never captured, so a CPU route has no graph run
            compiled = self._fast.add(
                tensor.dtype,
                op,
                key[-1],
                tensor.numel(),
                -1 if device.type == "cpu" else device.index,
                route.agree_step if route.agree_step is not None else route.agree,
                route.run,
                None if device.type == "cpu" else graph.run,
            )
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "artune route: %d x %s on %s, op %s, key %r -> %s%s (routes: %s)",
                tensor.numel(),
                tensor.dtype,
                tensor.device,
                op,
                key[-1],
                route.algorithm,
                ", compiled" if compiled else "",
                self.route_stats,
            )
        return route

    def _route(
        self,
        tensor: torch.Tensor,
        op: str | dist.ReduceOp,
        algorithm: str | None,
        params: Mapping[str, object] | None,
        mode: str = Mode.EAGER,
    ) -> Route:
        """The chosen algorithm bound to this call's shape, dtype, op and parameters, and the agreement
        round to run first (when the algorithm does not compare calls itself)."""
        op_name = _op_name(op)
        usable = self._usable(tensor, op_name, mode)
        nbytes = tensor.numel() * tensor.element_size()
        if algorithm is None:
            decision = self._decide(tensor, op_name, mode)
            name = decision.algorithm if decision.algorithm in usable else self.baseline_for(tensor.device)
            chosen_params: Mapping[str, object] = decision.params if params is None else params
        else:
            if algorithm not in usable:
                why = (
                    f" (it failed the start-up self-check: {self.disabled[algorithm]})"
                    if algorithm in self.disabled
                    else ""
                )
                if algorithm in self._algorithms.by_name and mode == "graph" and tensor.is_cuda:
                    why = " (it cannot be captured in a CUDA graph)"
                raise ArtuneError(
                    f"all_reduce(): algorithm {algorithm!r} cannot reduce {tensor.dtype} on {tensor.device} "
                    f"with {op_name!r} here{why}; "
                    f"available: {', '.join(sorted(usable))}"
                )
            unfit = self._algorithms.by_name[algorithm].unfit(nbytes, tensor.dtype)
            if unfit is not None:
                raise ArtuneError(f"all_reduce(): algorithm {algorithm!r} cannot take this message: {unfit}")
            name, chosen_params = algorithm, params or {}
        runner = self._algorithms.by_name[name]
        channel = self._algorithms.channel
        agree = agree_step = None
        call = (tensor.numel(), tensor.dtype, op_name, runner.name)
        if channel is not None and not runner.checks_calls:
            agree = functools.partial(channel.agree, *call)
            agree_step = channel.agreement(*call)
        elif isinstance(runner, ProcessGroupAlgorithm) and tensor.device.type == "cpu":
            # no channel (ranks on several hosts): compare calls over the group, or gloo aborts on a mismatch
            agree = functools.partial(runner.agree, *call)
        return Route(runner.bind(tensor.shape, tensor.dtype, op_name, chosen_params), agree, name, agree_step)

    def _usable(self, tensor: torch.Tensor, op: str, mode: str = "eager") -> frozenset[str]:
        usable = self.available(tensor.dtype, op, tensor.device, mode)
        if not usable:
            if tensor.is_cuda and "nccl" in self.unavailable:
                why = self.unavailable["nccl"]
                raise ArtuneError(f"all_reduce(): no algorithm here can reduce CUDA tensors: {why}")
            raise ArtuneError(
                f"all_reduce(): no algorithm here can reduce {tensor.dtype} on {tensor.device} with {op!r}"
                f"{' in a CUDA graph' if mode == 'graph' and tensor.is_cuda else ''} "
                f"(the process group {self.baseline_for(tensor.device)} cannot either); use another dtype or device"
            )
        return usable

    def _runnable(self, name: str) -> Algorithm:
        try:
            return self._algorithms.by_name[name]
        except KeyError:
            raise ArtuneError(
                f"unknown or unavailable algorithm {name!r}; here: {', '.join(self.algorithms)}"
            ) from None

    # ------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Release shared memory and semaphores; idempotent. The process group stays yours.

        Raises ``ArtuneError`` while another thread is inside ``all_reduce``: its
        round still reads the shared memory that closing would unmap.
        """
        if self._closed:
            return
        if not self._fast.enter():
            raise ArtuneError(
                "close(): another thread is inside an all_reduce on this Communicator, and closing would "
                "unmap the memory it reads; let that call finish (join the thread) first"
            )
        try:
            self._closed = True
            self._fast.clear()  # bound calls hold views over the shared memory
            log.debug("artune Communicator closed; routes: %s", self.route_stats)
            self._routes.clear()
            self._algorithms.close()
        finally:
            self._fast.leave()

    def __enter__(self) -> Communicator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


def _raise(err: BaseException, tensor: torch.Tensor) -> None:
    raise err


def _first_seen_in_capture(tensor: torch.Tensor, op: object) -> ArtuneError:
    return ArtuneError(
        f"all_reduce(): a call ({tensor.numel()} x {tensor.dtype} on {tensor.device}, op {op!r}) was "
        "first seen inside a CUDA graph capture, where ranks cannot agree on it; run it once "
        "before capturing (a warm-up call), so every rank agrees and its graph route is bound"
    )


def _op_name(op: str | dist.ReduceOp) -> str:
    name = _TORCH_OPS.get(op, op) if not isinstance(op, str) else op.lower()  # type: ignore[call-overload]
    if name not in REDUCE_OPS:
        raise ArtuneError(f"all_reduce(): op {op!r} is not supported; use one of {', '.join(REDUCE_OPS)}")
    return name
