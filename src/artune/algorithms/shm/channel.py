"""``ShmChannel``: the synchronised rounds over one shared-memory segment that the shm algorithms use.

A *step* is one call's chunk (or one ``agree``): every rank writes its data
and a header into its slot of buffer ``seq % 2``, posts to every peer, waits
for every peer's post, then checks all headers before reading any data.
Two-shot adds a second, header-less round inside the same step.

Why the synchronisation is correct on any CPU
---------------------------------------------
POSIX semaphore post/wait synchronise memory (POSIX XBD 4.12; glibc's
sem_post is a release, a successful sem_wait/sem_trywait an acquire). A rank
writes its slot and header, then posts; a peer whose acquire of that post
succeeded reads after it. Spinning on ``sem.value`` (a plain load) is only a
hint; the acquire that follows is what orders the reads.

Why one semaphore per (receiver, sender) pair
---------------------------------------------
With a single counting semaphore per receiver, a fast peer P that finished
round n could post round n+1 to receiver R before a slow peer Q posted round
n to R (Q posts to its peers one after the other). R would then count P's
n+1 post as Q's round-n post and read Q's slot without any ordering from Q,
and "who is missing" could no longer be told. With one semaphore per pair,
R's k-th successful acquire on sem(R, P) matches exactly P's k-th post, and
its count is at most 2: P cannot post round n+2 before R posted round n+1,
which R does only after consuming P's round n.

Why two buffers need no trailing barrier
----------------------------------------
Every read a rank makes of buffer ``s % 2`` in step s (slots, headers) is
done before its first post of step s+1. A rank writes buffer ``s % 2`` again
only in step s+2, i.e. after it completed the first wait of step s+1, which
required every peer's first post of step s+1, so every peer has finished
reading step s. Data is read only after the post that follows its writing
(inputs after the first round, two-shot's reduced slices after the second),
so readers never see a half-written step.

Sequence words, and the compiled round
---------------------------------------
A header starts with its step's ``seq``, and byte ``REDUCED_OFF`` of it holds
a second sequence word that two-shot's second round sets (``reduced_round``):
a slot's two words say which step last published its data and its reduced
slice. The compiled round (``_native.c``, chosen per rank by ``native.load``)
runs these same rounds: it stores the words with release ordering and spins
on them with acquire loads (C11 atomics), and it still posts and consumes
every semaphore, so the counts stay matched and ranks of either kind work
together in one group. A Python rank writes the words with plain stores, so
its peers rely on the semaphore's ordering; the compiled reader always takes
the semaphore too before it reads (``_native.c`` spells the argument out).
Its waits spin, dropping the GIL once they last, then hand over to ``_wait_blocking``.
It also posts a hint at ``CPU_OFF``: the CPU its last wait ran on. A compiled
wait that finds its own CPU in the peer's hint yields at once instead of
spinning, since that peer runs only when the core is given up (Python ranks
post no hint).

Failure handling
----------------
Every wait has a deadline (``timeout`` seconds). While blocked, the pending
peers' processes are checked (``os.kill(pid, 0)`` and /proc, which also sees
zombies and reused pids), so a dead peer is reported within about
``LIVENESS_SLICE_S``. Either way ``PeerTimeout`` names the ranks whose post
did not arrive and the channel is marked broken: its rounds can no longer be
matched, so later calls raise ``CommunicatorClosed``. A header mismatch is
seen by every rank (each compares all headers with its own) before any data
is read; all ranks did the same rounds, so the channel stays usable.
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
import zlib
from array import array
from typing import Any

import posix_ipc
import torch
import torch.distributed as dist

from artune.algorithms.base import NUMERIC_DTYPES
from artune.catalog import SPECS
from artune.errors import CallMismatch, CommunicatorClosed, PeerTimeout

from . import native
from .segment import HEADER_BYTES, Layout, PeerInfo, Segment, open_segment, process_start_time

# header: seq, numel, chunk elements, chunk index, dtype code, op code, algorithm code
_HDR = struct.Struct("<qqqiiii")
HDR_LEN = _HDR.size
_SEQ = struct.Struct("<q")
REDUCED_OFF = 64  # byte offset, in a slot's header, of the sequence word of two-shot's second round
assert HDR_LEN <= REDUCED_OFF <= HEADER_BYTES - _SEQ.size
#: byte offset of an int32 after the header: 1 + the CPU of its compiled writer's last wait, 0 if not known
CPU_OFF = HDR_LEN
assert CPU_OFF + 4 <= REDUCED_OFF
_HDR_FIELDS = ("seq", "numel", "chunk", "chunk_index", "dtype", "op", "algorithm")

# the codes are shared with _native.c: append, never reorder
_DTYPES = (*NUMERIC_DTYPES, torch.bool, torch.complex64, torch.complex128)
DTYPE_CODES: dict[torch.dtype, int] = {dt: i + 1 for i, dt in enumerate(_DTYPES)}
OP_CODES: dict[str, int] = {"sum": 1, "max": 2, "min": 3}
ALGORITHM_CODES: dict[str, int] = {name: i + 1 for i, name in enumerate(sorted(SPECS))}

LIVENESS_SLICE_S = 0.05  # blocked waits wake this often to check that pending peers are alive
DEAD_PEER_GRACE_S = 0.25  # after a death, how long live pending peers may still arrive
_STATE_OPEN, _STATE_BROKEN, _STATE_CLOSED = 0, 1, 2
_MAX_CACHED_VIEWS = 256


def _stable_code(text: str) -> int:
    """A code for names outside the tables: the same on every rank, never equal to a table code."""
    return 0x40000000 | (zlib.crc32(text.encode()) & 0x3FFFFFFF)


def dtype_code(dtype: torch.dtype) -> int:
    """The header code of ``dtype``."""
    return DTYPE_CODES.get(dtype) or _stable_code(str(dtype))


def op_code(op: str) -> int:
    """The header code of the reduce op ``op``."""
    return OP_CODES.get(op) or _stable_code(op)


def algorithm_code(name: str) -> int:
    """The header code of the algorithm ``name`` (a catalog name)."""
    return ALGORITHM_CODES.get(name) or _stable_code(name)


def _decode(codes: dict[Any, int], code: int) -> str:
    for key, value in codes.items():
        if value == code:
            return str(key).removeprefix("torch.")
    return f"<code {code:#x}>"


def _default_spin_phases(world_size: int) -> tuple[float, float]:
    """(pure spin, spin with ``sched_yield``) in microseconds before a wait blocks.

    A blocked rank wakes late (docs/results/shm-defaults.md); if that exceeds
    the peer's spin the peer blocks too and every later round pays a wake-up (a convoy), so waits
    spin for a while before they block. But a pure spin is fatal when two
    ranks share a core (oversubscription, or a VM whose second vCPU is busy
    elsewhere): the spinner holds the core its peer needs for a whole time
    slice. So after a short pure spin the wait yields the core between checks
    (``sched_yield`` returns at once when nothing else wants the core).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return (20.0, 2000.0) if world_size <= cores else (2.0, 500.0)


def _spin_iterations(spin_us: float, sem: posix_ipc.Semaphore | None) -> int:
    """Calibrate ``spin_us`` into iterations of the wait's spin loop (one ``sem.value`` read each)."""
    if spin_us <= 0 or sem is None:
        return 0
    todo = 2000
    n = todo
    start = time.perf_counter()
    while n:  # the same work as the wait's loop, but a peer's early post must not cut it short
        n -= 1
        if sem.value:
            pass
    per_iter = (time.perf_counter() - start) / todo
    return max(1, int(spin_us * 1e-6 / max(per_iter, 1e-8)))


class ShmChannel:
    """Shared memory and semaphores of one process group, for the shm algorithms; collective to build.

    ``timeout`` (seconds) bounds every wait for peers. ``buffer_bytes`` is the
    data capacity of one slot (rounded up to 64 bytes); ``None`` picks
    ``DEFAULT_BUFFER_BYTES`` or less when /dev/shm is small. The segment holds
    2 buffers x W slots of that size (plus a 128-byte header per slot). Raises
    ``ShmUnavailable`` on every rank alike when shared memory cannot be used.
    ``spin_us`` overrides how long a wait spins before it starts yielding the
    core (default 20 us, 2 us when ranks outnumber cores). All arguments must
    be the same on every rank. Not thread-safe: one caller thread per rank.
    """

    def __init__(
        self,
        group: Any = None,
        *,
        timeout: float,
        buffer_bytes: int | None = None,
        spin_us: float | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.group = group
        self.rank: int = dist.get_rank(group)
        self.world_size: int = dist.get_world_size(group)
        self.timeout = float(timeout)
        self._state = _STATE_OPEN
        self._reason = ""
        self._cache: dict[Any, Any] = {}
        self._scratch: torch.Tensor | None = None
        self._base: torch.Tensor | None = None
        self._native: Any = None
        module, path = native.load()
        #: which implementation runs this rank's rounds: "native (...)" or "python (why)"
        self.path: str = path
        segment, peers = open_segment(group, buffer_bytes, module)
        self._segment = segment
        try:
            self._setup(segment, peers, spin_us)
        except BaseException:
            self.close()
            raise

    def _setup(self, segment: Segment, peers: list[PeerInfo], spin_us: float | None) -> None:
        layout: Layout = segment.layout
        rank, world = self.rank, self.world_size
        self.layout = layout
        #: the segment's name; its files were unlinked at construction
        self.name = segment.prefix
        #: data bytes per slot: the largest chunk one step moves
        self.capacity: int = layout.capacity
        self._mm = segment.mm
        self._peers = tuple(p for p in range(world) if p != rank)
        self._send = tuple(segment.sems[(p, rank)] for p in self._peers)
        self._recv = tuple(segment.sems[(rank, p)] for p in self._peers)
        self._hdr_off = tuple(tuple(layout.header_offset(b, r) for r in range(world)) for b in (0, 1))
        self._my_hdr = tuple(self._hdr_off[b][rank] for b in (0, 1))
        self._peer_hdr = tuple(tuple(self._hdr_off[b][p] for p in self._peers) for b in (0, 1))
        # liveness: only for peers whose pid we can see as the same process (same pid namespace)
        self._pids: dict[int, tuple[int, int] | None] = {}
        for p in self._peers:
            info = peers[p]
            seen = process_start_time(info.pid)
            ok = info.start_time is not None and seen == info.start_time
            self._pids[p] = (info.pid, info.start_time) if ok else None  # type: ignore[assignment]
        spin, yield_us = _default_spin_phases(world)
        if spin_us is not None:
            spin = spin_us
        self._spin = _spin_iterations(spin, self._recv[0] if self._recv else None)
        self._yield_s = yield_us * 1e-6
        # one uint8 tensor over the whole mapping; every view derives from it, so close() drops one export
        self._base = torch.frombuffer(self._mm, dtype=torch.uint8)  # type: ignore[arg-type]
        #: the step counter, one for both implementations (the compiled round reads and bumps it in place)
        self._seqbox = array("q", [0])
        if segment.native is not None:
            self._native = segment.native
            self._native.configure(
                self._seqbox,
                spin * 1e-6,
                self._yield_s,
                self._handover,
                self._raise_mismatch,
                self.mark_broken,
                self._check_open,
            )
        elif segment.native_error:
            self.path = f"python (the compiled round could not open the semaphores: {segment.native_error})"
        native.say_once(self.path)

    @property
    def native(self) -> Any:
        """The compiled round's channel (``_native.Channel``), or ``None`` when this rank runs the Python round."""
        return self._native

    # ------------------------------------------------------------------ state

    def _check_open(self) -> None:
        if self._state == _STATE_CLOSED:
            raise CommunicatorClosed("the shared-memory channel is closed; create a new communicator")
        if self._state == _STATE_BROKEN:
            raise CommunicatorClosed(
                f"the shared-memory channel is broken by an earlier failure ({self._reason}); create a new communicator"
            )

    def mark_broken(self, reason: str) -> None:
        """Refuse every later call (after a peer failure or an interrupted step)."""
        if self._state == _STATE_OPEN:
            self._state = _STATE_BROKEN
            self._reason = reason
            if self._native is not None:
                self._native.state = _STATE_BROKEN

    # ------------------------------------------------------------------ views

    def flat_view(self, dtype: torch.dtype, offset: int, numel: int) -> torch.Tensor:
        """A 1-D ``dtype`` tensor over ``numel`` elements of the segment at byte ``offset``."""
        assert self._base is not None
        nbytes = numel * dtype.itemsize
        return self._base[offset : offset + nbytes].view(dtype)

    def slot_views(self, buf: int, dtype: torch.dtype, numel: int) -> list[torch.Tensor]:
        """The first ``numel`` elements of every rank's slot in buffer ``buf``, in rank order."""
        return [self.flat_view(dtype, self.layout.data_offset(buf, r), numel) for r in range(self.world_size)]

    def scratch(self, numel: int) -> torch.Tensor:
        """A private fp32 accumulator of ``numel`` elements (allocated once, at first need)."""
        if self._scratch is None:
            self._scratch = torch.empty(self.capacity // 2, dtype=torch.float32)
        return self._scratch[:numel]

    def cache(self, key: Any, value: Any) -> Any:
        """Cache ``value`` (views over the segment) under ``key``; bounded, dropped by ``close``."""
        if len(self._cache) >= _MAX_CACHED_VIEWS:
            self._cache.clear()
        self._cache[key] = value
        return value

    # ------------------------------------------------------------------ rounds

    def begin_step(self) -> tuple[int, int]:
        """Take the next step's sequence number and buffer index."""
        box = self._seqbox
        seq = box[0]
        box[0] = seq + 1
        return seq, seq & 1

    def header_round(self, buf: int, header: bytes) -> None:
        """Publish ``header`` (after this rank's data), post to every peer, wait for all, check headers.

        Raises ``CallMismatch`` on every rank when any header differs, before
        any data is read.
        """
        mm = self._mm
        off = self._my_hdr[buf]
        mm[off : off + HDR_LEN] = header
        for sem in self._send:
            sem.release()
        self._wait()
        for off in self._peer_hdr[buf]:
            if mm[off : off + HDR_LEN] != header:
                self._raise_mismatch(buf)

    def plain_round(self) -> None:
        """Post to every peer and wait for all (orders the writes before it with peers' reads after)."""
        for sem in self._send:
            sem.release()
        self._wait()

    def reduced_round(self, buf: int, seq: int) -> None:
        """Two-shot's second round: set this slot's reduced-slice word to ``seq``, then ``plain_round``."""
        _SEQ.pack_into(self._mm, self._my_hdr[buf] + REDUCED_OFF, seq)
        self.plain_round()

    def _wait(self) -> None:
        spins = self._spin
        recv = self._recv
        for i, sem in enumerate(recv):
            if sem.value:
                sem.acquire(0)
                continue
            n = spins
            while n:
                n -= 1
                if sem.value:
                    sem.acquire(0)
                    break
            else:
                self._wait_blocking(i)
                return

    def _handover(self, first: int) -> None:
        """The compiled round's wait spun and yielded in vain: block for peers ``first..``."""
        self._wait_blocking(first, spun=True)

    def _wait_blocking(self, first: int, spun: bool = False) -> None:
        """Wait for the posts of peers ``first..`` by blocking in slices, with deadline and liveness checks."""
        recv = self._recv
        pending = list(range(first, len(recv)))
        now = time.monotonic()
        deadline = now + self.timeout
        if self._yield_s and not spun:
            # keep checking, but let a peer that shares our core run (no sleep/wake-up cost)
            until = now + self._yield_s
            while pending and time.monotonic() < until:
                os.sched_yield()
                while pending and recv[pending[0]].value:
                    recv[pending.pop(0)].acquire(0)
        while True:
            still = []
            for i in pending:
                try:
                    recv[i].acquire(0)
                except posix_ipc.BusyError:
                    still.append(i)
            pending = still
            if not pending:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                missing = tuple(self._peers[i] for i in pending)
                self._fail(
                    f"rank(s) {list(missing)} did not arrive within {self.timeout:g}s "
                    f"(rank {self.rank}, step {self._seqbox[0] - 1})",
                    missing,
                )
            try:
                recv[pending[0]].acquire(min(LIVENESS_SLICE_S, left))
                pending.pop(0)
                continue
            except posix_ipc.BusyError:
                pass
            except posix_ipc.SignalError:
                continue  # a pending Python signal handler (e.g. KeyboardInterrupt) runs next
            dead = [self._peers[i] for i in pending if not self._alive(self._peers[i])]
            if dead:
                # give live peers that are merely slower a moment, so ``missing`` is about the failure
                grace = min(time.monotonic() + DEAD_PEER_GRACE_S, deadline)
                alive = [i for i in pending if self._peers[i] not in dead]
                while alive and time.monotonic() < grace:
                    alive = [i for i in alive if not recv[i].value]
                    time.sleep(0.001)
                missing = tuple(sorted({*dead, *(self._peers[i] for i in alive)}))
                self._fail(
                    f"rank(s) {dead} died (their process is gone) while rank {self.rank} waited "
                    f"for rank(s) {list(missing)}",
                    missing,
                )

    def _alive(self, peer: int) -> bool:
        known = self._pids.get(peer)
        if known is None:
            return True  # cannot tell: rely on the deadline
        pid, start = known
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return process_start_time(pid) == start

    def _fail(self, message: str, missing: tuple[int, ...]) -> None:
        self.mark_broken(message)
        raise PeerTimeout(
            f"{message}; the shared-memory channel is now broken, create a new communicator",
            missing=missing,
        )

    def _raise_mismatch(self, buf: int) -> None:
        mm = self._mm
        headers = [_HDR.unpack_from(mm, self._hdr_off[buf][r]) for r in range(self.world_size)]
        differ = [name for k, name in enumerate(_HDR_FIELDS) if len({h[k] for h in headers}) > 1 and name != "seq"]
        if len({h[0] for h in headers}) > 1:
            differ.append("seq (internal: ranks are out of step)")
        parts = []
        for r, (_seq, numel, chunk, index, dt, op, alg) in enumerate(headers):
            parts.append(
                f"rank {r}: numel={numel} dtype={_decode(DTYPE_CODES, dt)} op={_decode(OP_CODES, op)} "
                f"algorithm={_decode(ALGORITHM_CODES, alg)}"
                + (f" chunk={chunk}" if chunk else "")
                + (f" chunk_index={index}" if index else "")
            )
        raise CallMismatch(f"ranks called all-reduce differently (differing: {', '.join(differ)}): " + "; ".join(parts))

    # ------------------------------------------------------------------ public

    def agree(self, numel: int, dtype: torch.dtype, op: str, algorithm_name: str) -> None:
        """A header-only round: raise ``CallMismatch`` on every rank unless all ranks pass the same call.

        Call it before a process-group all-reduce so that mismatched calls are
        caught there too. Raises ``PeerTimeout`` when a peer does not arrive.
        """
        if self._state:
            self._check_open()
        seq, buf = self.begin_step()
        header = _HDR.pack(seq, numel, 0, 0, dtype_code(dtype), op_code(op), algorithm_code(algorithm_name))
        try:
            self.header_round(buf, header)
        except CallMismatch:
            raise
        except BaseException as err:
            self.mark_broken(f"interrupted: {type(err).__name__}")
            raise

    def agreement(self, numel: int, dtype: torch.dtype, op: str, algorithm_name: str) -> Any:
        """``agree`` for one call signature as a compiled header-only round (a ``_native.Step`` of no
        elements, whose header is ``agree``'s), or ``None`` where this rank runs the Python round."""
        if self._native is None:
            return None
        from ._native import ONE_SHOT, step

        codes = (dtype_code(dtype), op_code(op), algorithm_code(algorithm_name))
        return step(self._native, ONE_SHOT, 0, 1, 1, numel, 0, *codes)

    def dead_peers(self) -> tuple[int, ...]:
        """Peers whose process is known to be gone (empty when liveness cannot be checked)."""
        return tuple(p for p in self._peers if not self._alive(p))

    def close(self) -> None:
        """Release the mapping and semaphores; idempotent. Not collective, but peers in a step then time out."""
        self._state = _STATE_CLOSED
        if self._native is not None:
            self._native.state = _STATE_CLOSED  # the segment closes it below
            self._native = None
        self._cache.clear()
        self._scratch = None
        self._base = None
        self._mm = None  # type: ignore[assignment]
        segment = getattr(self, "_segment", None)
        if segment is not None:
            self._segment = None
            with contextlib.suppress(Exception):
                segment.close()

    def __enter__(self) -> ShmChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
