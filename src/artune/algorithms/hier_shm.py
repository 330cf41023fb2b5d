"""``hier_shm``: all-reduce across hosts, with shared memory doing the work inside each host.

Per chunk of the message: (1) every rank of a host copies its chunk into its
slot of the host's ``ShmChannel`` and the host's leader (its lowest rank)
reduces the slots in rank order; (2) the leaders all-reduce the host sums
over a gloo group of one rank per host; (3) each leader copies the result
into its slot and the other ranks of its host copy it out. Chunks are
pipelined two deep: while the leaders' all-reduce of chunk k runs on gloo's
threads, the host reduces chunk k+1. A host with one rank has no channel and
skips the shared-memory steps.

Agreement and faults, across hosts as within one:

- The shared-memory rounds compare every local rank's call (element count,
  dtype, op) before data is read. The leaders then all-reduce (max) a small
  record per call: a hash of the call, its negation, a flag for a local
  mismatch and the rank of a dead local peer. So a mismatch or a death on
  any host is known to every leader, which tells its host in the next
  broadcast step (a header marked as failed, the message in the slot).
  Every rank then raises ``CallMismatch`` (the algorithm stays usable) or
  ``PeerTimeout`` naming the rank and its host (the algorithm is broken and
  later calls raise ``CommunicatorClosed``).
- A gloo failure among the leaders (a leader died or timed out) becomes
  ``PeerTimeout`` on the leaders and, through the broadcast step, on their
  hosts. The host channels wait twice the timeout, so the leader's own
  deadline passes first and its message, not a bare timeout, reaches them.

Subgroups (one per host with more than one rank, and the leaders) are made
with ``torch.distributed.new_group``, which every rank of the default group
must call: the algorithm is offered only on a group that spans all ranks.
``close`` destroys them again.
"""

from __future__ import annotations

import contextlib
import json
import math
import struct
import zlib
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar

import torch
import torch.distributed as dist

from artune import machine
from artune.algorithms.base import Algorithm
from artune.algorithms.shm.algorithms import DEFAULT_CHUNK_BYTES, _chunk_elements, _kind, _reduce, shm_unavailable
from artune.algorithms.shm.channel import _HDR, HDR_LEN, ShmChannel, algorithm_code, dtype_code, op_code
from artune.algorithms.torch_dist import SUPPORTED
from artune.errors import CallMismatch, CommunicatorClosed, PeerTimeout, ShmUnavailable

_HALF_KIND = _kind(torch.bfloat16, "sum")
_FAILED_MISMATCH, _FAILED_PEER = -1, -2  # chunk_index of a broadcast header that carries a failure


class HierShm(Algorithm):
    """Hierarchical all-reduce over the hosts of ``group`` (collective to build; see the module doc).

    ``hosts[r]`` is group rank r's host identity (``artune.machine.host_id``),
    the same list on every rank. Raises ``ShmUnavailable`` on every rank alike
    when the algorithm cannot be set up.
    """

    name = "hier_shm"
    checks_calls = True
    devices = frozenset({"cpu"})
    tunables: ClassVar[dict[str, tuple[int, ...]]] = {
        "chunk_bytes": (64 << 10, 256 << 10, 1 << 20, 4 << 20),
    }

    def __init__(self, group: Any, hosts: Sequence[str], *, timeout: float, buffer_bytes: int | None = None) -> None:
        world = dist.get_world_size(group)
        if world != dist.get_world_size():
            raise ShmUnavailable(
                "hier_shm needs a group of every rank (its per-host subgroups are made with new_group, which "
                f"every rank must call); this group has {world} of {dist.get_world_size()}"
            )
        if len(hosts) != world:
            raise ValueError(f"hosts: expected {world} entries (one per rank), got {len(hosts)}")
        self.group = group
        self.rank = dist.get_rank(group)
        self.timeout = float(timeout)
        global_ranks = dist.get_process_group_ranks(group) if group is not None else list(range(world))
        order = list(dict.fromkeys(hosts))
        members = {h: [r for r in range(world) if hosts[r] == h] for h in order}
        self._labels = [machine.host_label(h) for h in hosts]
        self.host_ranks = tuple(members[hosts[self.rank]])  # group ranks on this rank's host
        self.local_rank = self.host_ranks.index(self.rank)
        self.is_leader = self.local_rank == 0
        self.leaders = tuple(members[h][0] for h in order)
        # every rank makes every subgroup, in the same order (new_group's rule)
        host_group = None
        self._groups: list[Any] = []  # the subgroups this rank belongs to, destroyed by close()
        self._ch: ShmChannel | None = None
        self._closed = False
        for h in order:
            if len(members[h]) > 1:
                made = dist.new_group([global_ranks[r] for r in members[h]], backend="gloo")
                if h == hosts[self.rank]:
                    host_group = made
                    self._groups.append(made)
        self._leader_group = dist.new_group([global_ranks[r] for r in self.leaders], backend="gloo")
        if self.is_leader:
            self._groups.append(self._leader_group)
        problem = ""
        if host_group is not None:
            try:
                # twice the timeout: a leader's own deadline passes first, and it tells its host why
                self._ch = ShmChannel(host_group, timeout=2 * self.timeout, buffer_bytes=buffer_bytes)
            except ShmUnavailable as err:
                problem = f"host {self._labels[self.rank]}: {err}"
        # every rank must cut messages into the same chunks: the smallest slot of any host bounds them
        mine = (problem, self._ch.capacity if self._ch is not None else None)
        outcomes: list[tuple[str, int | None] | None] = [None] * world
        dist.all_gather_object(outcomes, mine, group=group)
        failed = sorted({o[0] for o in outcomes if o and o[0]})
        if failed:
            self.close()
            raise ShmUnavailable("hier_shm: shared memory failed on a host: " + "; ".join(failed))
        capacity = min((o[1] for o in outcomes if o and o[1]), default=DEFAULT_CHUNK_BYTES)
        self._capacity = capacity
        self._default_chunk = min(capacity, DEFAULT_CHUNK_BYTES)
        self._code = algorithm_code(self.name)
        self._broken = ""

    # ------------------------------------------------------------ Algorithm

    def unavailable(self, dtype: torch.dtype, op: str) -> str | None:
        why = shm_unavailable(dtype, op)
        if why is None and dtype not in SUPPORTED["gloo"]:
            why = f"the gloo all-reduce among host leaders does not take {dtype}"
        return why

    def tunable_space(self) -> dict[str, tuple[object, ...]]:
        values = sorted({v for v in self.tunables["chunk_bytes"] if v <= self._capacity} | {self._capacity})
        return {"chunk_bytes": tuple(values)}

    def all_reduce(self, tensor: torch.Tensor, op: str, params: Mapping[str, object]) -> torch.Tensor:
        if not tensor.is_contiguous():
            raise ValueError("hier_shm needs a contiguous tensor")
        self.bind(tensor.shape, tensor.dtype, op, params)(tensor)
        return tensor

    def bind(
        self, shape: torch.Size, dtype: torch.dtype, op: str, params: Mapping[str, object]
    ) -> Callable[[torch.Tensor], None]:
        why = self.unavailable(dtype, op)
        if why is not None:
            raise ValueError(why)
        chunk_bytes = params.get("chunk_bytes") if params else None
        itemsize = dtype.itemsize
        per_chunk = (
            self._default_chunk // itemsize
            if chunk_bytes is None
            else _chunk_elements(chunk_bytes, self._capacity, itemsize)
        )
        n = math.prod(shape)
        spans = [slice(lo, min(n, lo + per_chunk)) for lo in range(0, n, per_chunk)] or [slice(0, 0)]
        call = _Call(self, n, per_chunk if n > per_chunk else 0, dtype, op, spans)

        def run(x: torch.Tensor) -> None:
            if self._closed or self._broken:
                raise CommunicatorClosed(
                    "hier_shm is "
                    + ("closed" if self._closed else f"broken by an earlier failure ({self._broken})")
                    + "; create a new communicator"
                )
            flat = (x.detach() if x.requires_grad else x).view(-1)
            try:
                call.run(flat)
            except CallMismatch:
                raise  # every rank did the same steps: still usable
            except BaseException as err:
                self._broken = f"{type(err).__name__}: {err}"[:300]
                if self._ch is not None:
                    self._ch.mark_broken(self._broken)
                raise

        return run

    def close(self) -> None:
        """Release this host's channel and the subgroups; idempotent, not collective."""
        if self._closed:
            return
        self._closed = True
        if self._ch is not None:
            self._ch.close()
        groups, self._groups = self._groups, []
        for group in groups:
            with contextlib.suppress(Exception):  # already gone with destroy_process_group() of the world
                dist.destroy_process_group(group)

    # ------------------------------------------------------------ helpers for _Call

    def where(self, rank: int) -> str:
        """``rank N (host H)`` for messages."""
        return f"rank {rank} (host {self._labels[rank]})"

    def peer_failure(self, err: BaseException) -> PeerTimeout:
        """A local channel's ``PeerTimeout`` (host ranks) restated in group ranks and hosts."""
        missing = tuple(self.host_ranks[r] for r in getattr(err, "missing", ()) if r < len(self.host_ranks))
        names = ", ".join(self.where(r) for r in missing) or "a rank of this host"
        return PeerTimeout(f"hier_shm: {names} failed inside its host ({self.local_names()}): {err}", missing=missing)

    def local_names(self) -> str:
        """How the host channel's rank numbers map to group ranks, for its messages."""
        return "its ranks " + ", ".join(f"{i}={r}" for i, r in enumerate(self.host_ranks)) + " in the channel's words"


class _Call:
    """One bound call signature: the steps of every chunk, for this rank's role."""

    def __init__(self, alg: HierShm, numel: int, chunk: int, dtype: torch.dtype, op: str, spans: list[slice]) -> None:
        self.alg = alg
        self.spans = spans
        self.kind = _kind(dtype, op)
        self.dtype = dtype
        self.op = op
        self.dcode, self.ocode = dtype_code(dtype), op_code(op)
        self.numel, self.chunk = numel, chunk
        signature = struct.pack("<qqii", numel, chunk, self.dcode, self.ocode)
        self.signature = zlib.crc32(signature) + 1
        self.torch_op = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[op]
        self.wait_s = timedelta(seconds=alg.timeout)
        self.views: dict[int, tuple[tuple[torch.Tensor, ...], ...]] = {}

    def describe(self) -> str:
        return f"numel={self.numel} dtype={str(self.dtype).removeprefix('torch.')} op={self.op}"

    # ------------------------------------------------------------ the schedule

    def run(self, flat: torch.Tensor) -> None:
        alg, spans = self.alg, self.spans
        pending: list[tuple[int, Any]] = []
        failure: tuple[int, str, tuple[int, ...]] | None = None  # (kind, message, missing) to tell the host
        for k, span in enumerate(spans):
            local_error = self._reduce(flat[span], k)
            if alg.is_leader:
                if k == 0:
                    failure = self._leaders_agree(local_error)  # raises a local error after telling the leaders
                elif local_error is not None:
                    raise local_error  # the other leaders' deadline then names this host's leader
                if failure is None:
                    pending.append((k, self._start(flat[span])))
            elif local_error is not None:
                raise local_error
            if k >= 1:
                failure = self._finish(flat, k - 1, pending, failure)
        failure = self._finish(flat, len(spans) - 1, pending, failure)

    def _finish(
        self, flat: torch.Tensor, k: int, pending: list[tuple[int, Any]], failure: tuple | None
    ) -> tuple | None:
        """Wait for chunk ``k``'s leaders' all-reduce (leader), then broadcast it in the host."""
        if self.alg.is_leader and failure is None:
            index, work = pending.pop(0)
            assert index == k
            failure = self._wait(work)
        self._broadcast(flat[self.spans[k]], k, failure)
        return failure

    # ------------------------------------------------------------ the steps

    def _header(self, seq: int, index: int, chunk: int | None = None) -> bytes:
        return _HDR.pack(seq, self.numel, self.chunk if chunk is None else chunk, index, self.dcode, self.ocode,
                         self.alg._code)  # fmt: skip

    def _slots(self, m: int) -> tuple[tuple[torch.Tensor, ...], ...]:
        found = self.views.get(m)
        if found is None:
            ch = self.alg._ch
            assert ch is not None
            found = self.views[m] = tuple(tuple(ch.slot_views(b, self.dtype, m)) for b in (0, 1))
        return found

    def _reduce(self, x: torch.Tensor, index: int) -> BaseException | None:
        """Step 1: the host's sum into the leader's ``x``. A leader returns a local failure (to tell the other
        leaders before raising it); other ranks get it back the same way and raise it."""
        alg, ch = self.alg, self.alg._ch
        if ch is None:
            return None
        m = x.numel()
        seq, buf = ch.begin_step()
        slots = self._slots(m)[buf]
        if not alg.is_leader:
            slots[alg.local_rank].copy_(x)
        try:
            ch.header_round(buf, self._header(seq, index))
        except CallMismatch as err:
            return CallMismatch(f"hier_shm inside host {alg._labels[alg.rank]} ({alg.local_names()}): {err}")
        except PeerTimeout as err:
            return alg.peer_failure(err)
        if alg.is_leader and m:
            acc = ch.scratch(m) if self.kind == _HALF_KIND else None
            _reduce(self.kind, (x, *slots[1:]), x, acc)
        return None

    def _leaders_agree(self, local_error: BaseException | None) -> tuple | None:
        """Leaders compare calls and local failures (one small max all-reduce); raise this host's own failure."""
        alg = self.alg
        dead = max(getattr(local_error, "missing", ()) or (-1,)) if isinstance(local_error, PeerTimeout) else -1
        mismatch = 1 if isinstance(local_error, CallMismatch) else 0
        record = torch.tensor([self.signature, -self.signature, mismatch, dead + 1], dtype=torch.int64)
        failure = self._wait(dist.all_reduce(record, dist.ReduceOp.MAX, group=alg._leader_group, async_op=True))
        if local_error is not None:
            raise local_error  # this host's ranks raised it too, in the same round
        if failure is not None:
            return failure
        if int(record[2]) or int(record[0]) != -int(record[1]):
            return (
                _FAILED_MISMATCH,
                "ranks called all-reduce differently across hosts (hier_shm: the host leaders' calls differ; "
                f"this host {alg._labels[alg.rank]} called {self.describe()})",
                (),
            )
        if int(record[3]):
            rank = int(record[3]) - 1
            return _FAILED_PEER, f"hier_shm: {alg.where(rank)} died or did not arrive inside its host", (rank,)
        return None

    def _start(self, x: torch.Tensor) -> Any:
        return dist.all_reduce(x, self.torch_op, group=self.alg._leader_group, async_op=True)

    def _wait(self, work: Any) -> tuple | None:
        """Wait for a leaders' all-reduce; a failure as (kind, message, missing)."""
        try:
            work.wait(self.wait_s)
        except RuntimeError as err:
            alg = self.alg
            others = tuple(r for r in alg.leaders if r != alg.rank)
            names = ", ".join(alg.where(r) for r in others)
            text = str(err).splitlines()[0][:200]
            return _FAILED_PEER, f"hier_shm: the all-reduce among host leaders failed; one of {names}: {text}", others
        return None

    def _broadcast(self, x: torch.Tensor, index: int, failure: tuple | None) -> None:
        """Step 3: the leader's ``x`` to its host, or the failure every rank of the host then raises."""
        alg, ch = self.alg, self.alg._ch
        if ch is not None:
            m = x.numel()
            seq, buf = ch.begin_step()
            slots = self._slots(m)[buf]
            header = self._header(seq, index)
            if alg.is_leader:
                if failure is None:
                    slots[0].copy_(x)
                else:
                    kind, message, missing = failure
                    payload = json.dumps({"message": message, "missing": list(missing)}).encode()
                    payload = payload[: ch.capacity]
                    ch.flat_view(torch.uint8, ch.layout.data_offset(buf, 0), len(payload)).copy_(
                        torch.frombuffer(bytearray(payload), dtype=torch.uint8)
                    )
                    header = self._header(seq, kind, chunk=len(payload))
            try:
                ch.header_round(buf, header)
            except CallMismatch:
                if failure is None:
                    failure = self._read_failure(ch, buf)
                if failure is None:
                    raise
            if not alg.is_leader and failure is None and m:
                x.copy_(slots[0])
        if failure is not None:
            kind, message, missing = failure
            if kind == _FAILED_MISMATCH:
                raise CallMismatch(message)
            raise PeerTimeout(message + "; create a new communicator", missing=tuple(missing))

    def _read_failure(self, ch: ShmChannel, buf: int) -> tuple | None:
        raw = bytes(ch.flat_view(torch.uint8, ch.layout.header_offset(buf, 0), HDR_LEN).numpy())
        _seq, _numel, length, index, *_ = _HDR.unpack(raw)
        if index not in (_FAILED_MISMATCH, _FAILED_PEER):
            return None
        data = bytes(ch.flat_view(torch.uint8, ch.layout.data_offset(buf, 0), length).numpy())
        found = json.loads(data.decode())
        return index, found["message"], tuple(found["missing"])
