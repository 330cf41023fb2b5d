"""One POSIX shared-memory segment plus the named semaphores of a group, set up collectively.

Rank 0 draws an unpredictable name and sends it to every rank before it
creates anything: the segment and W*(W-1) semaphores (mode 0o600). Every
rank opens them, and once every rank reports (an all-gather, which doubles
as the barrier) all names are unlinked at once. Any rank that sees the set-up
fail unlinks them too, so a rank killed in the middle leaves nothing behind
as long as one rank survives. From then on nothing of ours is visible in
/dev/shm: the memory lives only in the ranks' mappings and goes away with the
last of them, whatever way they exit (SIGKILL included).

Every decision is agreed over the process group, so either every rank gets a
``Segment`` or every rank raises ``ShmUnavailable`` with the same message.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import secrets
from dataclasses import dataclass
from typing import Any

import posix_ipc
import torch.distributed as dist

from artune import machine
from artune.errors import ShmUnavailable
from artune.sizes import human_size

SHM_DIR = "/dev/shm"
NAME_PREFIX = "artune_"  # every name we create starts with this (files: /dev/shm/artune_*, sem.artune_*)
HEADER_BYTES = 128  # one header per slot, padded so data starts on a 128-byte boundary
DATA_ALIGN = 4096
MIN_BUFFER_BYTES = 64
DEFAULT_BUFFER_BYTES = 4 << 20
MIN_AUTO_BUFFER_BYTES = 64 << 10


def _round_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


@dataclass(frozen=True)
class Layout:
    """Byte offsets inside the segment: 2 buffers of W slots, each slot a header then ``capacity`` data bytes."""

    world_size: int
    capacity: int  # data bytes per slot

    @property
    def slot_stride(self) -> int:
        return _round_up(HEADER_BYTES + self.capacity, DATA_ALIGN)

    @property
    def buffer_stride(self) -> int:
        return self.world_size * self.slot_stride

    @property
    def total_bytes(self) -> int:
        return 2 * self.buffer_stride

    def header_offset(self, buf: int, rank: int) -> int:
        return buf * self.buffer_stride + rank * self.slot_stride

    def data_offset(self, buf: int, rank: int) -> int:
        return self.header_offset(buf, rank) + HEADER_BYTES


def host_id() -> str:
    """This rank's host identity (``artune.machine.host_id``, which tests may override with ``ARTUNE_HOST``)."""
    return machine.host_id()


def process_start_time(pid: int) -> int | None:
    """The start time (clock ticks since boot) of ``pid`` from /proc, or ``None`` when it is gone or a zombie.

    Comparing it with the value recorded at construction also catches a reused pid.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])  # field 22 of stat, counted from 1


def sem_name(prefix: str, receiver: int, sender: int) -> str:
    """The semaphore ``sender`` posts to tell ``receiver`` a round is ready."""
    return f"{prefix}_{receiver}_{sender}"


def _unlink_all(prefix: str, world_size: int) -> None:
    """Unlink the segment and every semaphore; any rank may do it, missing names are fine."""
    with contextlib.suppress(posix_ipc.ExistentialError):
        posix_ipc.unlink_shared_memory(prefix)
    for receiver in range(world_size):
        for sender in range(world_size):
            if receiver != sender:
                with contextlib.suppress(posix_ipc.ExistentialError):
                    posix_ipc.unlink_semaphore(sem_name(prefix, receiver, sender))


def _shm_free_bytes() -> int | None:
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _too_small_message(needed: int, free: int, capacity: int) -> str:
    return (
        f"shared memory needs {needed} bytes ({human_size(needed)}) in {SHM_DIR} but only {free} bytes "
        f"({human_size(free)}) are free; enlarge {SHM_DIR} (e.g. `docker run --shm-size=1g`, or "
        f"`mount -o remount,size=1G {SHM_DIR}`) or ask for a smaller buffer "
        f"(buffer_bytes/chunk, now {capacity} bytes per slot)"
    )


def _choose_layout(world_size: int, buffer_bytes: int | None) -> Layout:
    """The layout for the requested capacity; ``None`` picks the default, halved until it fits.

    Runs on rank 0 only; raises ``ShmUnavailable`` when nothing fits.
    """
    free = _shm_free_bytes()
    if buffer_bytes is not None:
        if buffer_bytes < MIN_BUFFER_BYTES:
            raise ShmUnavailable(f"buffer_bytes={buffer_bytes} is too small; use at least {MIN_BUFFER_BYTES}")
        layout = Layout(world_size, _round_up(buffer_bytes, 64))
        if free is not None and layout.total_bytes > free:
            raise ShmUnavailable(_too_small_message(layout.total_bytes, free, layout.capacity))
        return layout
    layout = Layout(world_size, DEFAULT_BUFFER_BYTES)
    # unasked, leave half of /dev/shm to others rather than fail
    while free is not None and layout.total_bytes > free // 2 and layout.capacity > MIN_AUTO_BUFFER_BYTES:
        layout = Layout(world_size, layout.capacity // 2)
    if free is not None and layout.total_bytes > free:
        raise ShmUnavailable(_too_small_message(layout.total_bytes, free, layout.capacity))
    return layout


def _create(prefix: str, layout: Layout) -> None:
    """Create the segment (space reserved now) and the semaphores; on failure unlink what was made."""
    try:
        shm = posix_ipc.SharedMemory(prefix, posix_ipc.O_CREX, mode=0o600, size=0)
        try:
            # reserve the pages now: a too-small tmpfs fails here with ENOSPC, not with SIGBUS later
            os.posix_fallocate(shm.fd, 0, layout.total_bytes)
        finally:
            shm.close_fd()
        for receiver in range(layout.world_size):
            for sender in range(layout.world_size):
                if receiver != sender:
                    sem = posix_ipc.Semaphore(
                        sem_name(prefix, receiver, sender), posix_ipc.O_CREX, mode=0o600, initial_value=0
                    )
                    sem.close()
    except OSError as err:
        _unlink_all(prefix, layout.world_size)
        if err.errno == errno.ENOSPC:
            free = _shm_free_bytes() or 0
            raise ShmUnavailable(_too_small_message(layout.total_bytes, free, layout.capacity)) from None
        raise ShmUnavailable(f"cannot create shared memory in {SHM_DIR}: {err}") from None
    except posix_ipc.Error as err:
        _unlink_all(prefix, layout.world_size)
        raise ShmUnavailable(f"cannot create shared memory {prefix!r}: {err}") from None


class Segment:
    """The mapped segment and this rank's semaphores; built collectively by ``open_segment``."""

    def __init__(self, prefix: str, layout: Layout, rank: int, native: Any = None) -> None:
        self.prefix = prefix
        self.layout = layout
        self.rank = rank
        self.mm: mmap.mmap | None = None
        #: the compiled round's view of this segment (``_native.Channel``), or ``None``
        self.native: Any = None
        #: why ``native`` is ``None`` although the compiled module was given ("" otherwise)
        self.native_error = ""
        #: sems[(receiver, sender)] for the pairs this rank uses (receiver == rank or sender == rank)
        self.sems: dict[tuple[int, int], posix_ipc.Semaphore] = {}
        try:
            shm = posix_ipc.SharedMemory(prefix)
            try:
                size = os.fstat(shm.fd).st_size
                if size != layout.total_bytes:
                    raise ShmUnavailable(f"segment {prefix} has {size} bytes, expected {layout.total_bytes}")
                flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
                self.mm = mmap.mmap(shm.fd, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                shm.close_fd()
            for peer in range(layout.world_size):
                if peer != rank:
                    for pair in ((rank, peer), (peer, rank)):
                        self.sems[pair] = posix_ipc.Semaphore(sem_name(prefix, *pair))
            if native is not None:
                # opened here, while the names exist (open_segment unlinks them once every rank is in)
                peers = [p for p in range(layout.world_size) if p != rank]
                try:
                    self.native = native.Channel(
                        self.mm,
                        layout.world_size,
                        rank,
                        layout.slot_stride,
                        layout.buffer_stride,
                        HEADER_BYTES,
                        peers,
                        [sem_name(prefix, p, rank) for p in peers],
                        [sem_name(prefix, rank, p) for p in peers],
                    )
                except OSError as err:  # the Python round still works: take it
                    self.native_error = str(err)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Unmap and close the semaphores; idempotent. Tensor views over ``mm`` must be dropped first."""
        native, self.native = self.native, None
        if native is not None:
            native.close()  # drops its hold on ``mm`` and its semaphore handles
        sems, self.sems = self.sems, {}
        for sem in sems.values():
            with contextlib.suppress(posix_ipc.Error):
                sem.close()
        mm, self.mm = self.mm, None
        if mm is not None:
            # BufferError: a view is still alive somewhere (e.g. a traceback frame); the mapping then
            # goes when that view does
            with contextlib.suppress(BufferError):
                mm.close()


@dataclass(frozen=True)
class PeerInfo:
    """What ranks exchange at construction."""

    host: str
    pid: int
    start_time: int | None


def _gather(obj: Any, group: Any, world_size: int) -> list[Any]:
    out: list[Any] = [None] * world_size
    dist.all_gather_object(out, obj, group=group)
    return out


def _create_on_rank0(prefix: str, world_size: int, buffer_bytes: int | None) -> tuple[str, Layout | None]:
    """Rank 0 creates the segment: ``("", layout)``, or the error message for every rank and no layout."""
    try:
        layout = _choose_layout(world_size, buffer_bytes)
        _create(prefix, layout)
        return "", layout
    except ShmUnavailable as err:
        return str(err), None
    except Exception as err:  # whatever it is, the other ranks must hear of it rather than hang
        return f"cannot create shared memory: {type(err).__name__}: {err}", None


def open_segment(group: Any, buffer_bytes: int | None, native: Any = None) -> tuple[Segment, list[PeerInfo]]:
    """Collectively create, open and unlink the segment; return it and every rank's ``PeerInfo``.

    ``native``: the compiled module, when this rank runs the compiled round.

    Raises ``ShmUnavailable`` on every rank with the same message when any
    rank cannot take part (other host, /dev/shm too small, open failure).
    """
    rank = dist.get_rank(group)
    world_size = dist.get_world_size(group)
    me = PeerInfo(host_id(), os.getpid(), process_start_time(os.getpid()))
    # rank 0's name is known to every rank before anything exists under it
    gathered = _gather((me, "/" + NAME_PREFIX + secrets.token_hex(12)), group, world_size)
    peers: list[PeerInfo] = [info for info, _ in gathered]
    prefix: str = gathered[0][1]
    hosts = sorted({p.host for p in peers})
    if len(hosts) > 1:
        by_host = {h: [r for r, p in enumerate(peers) if p.host == h] for h in hosts}
        raise ShmUnavailable(f"ranks are not all on one host (shared memory needs that): {by_host}")

    created = _create_on_rank0(prefix, world_size, buffer_bytes) if rank == 0 else ("", None)
    try:
        error, layout_or_none = _gather(created, group, world_size)[0]
    except BaseException:
        _unlink_all(prefix, world_size)  # rank 0 may have created it before the exchange failed
        raise
    if error or layout_or_none is None:
        raise ShmUnavailable(error)
    layout = layout_or_none

    segment: Segment | None = None
    try:
        try:
            segment = Segment(prefix, layout, rank, native)
            opened: str | None = None
        except Exception as err:  # reported to every rank below
            opened = f"{type(err).__name__}: {err}"
        outcomes: list[str | None] = _gather(opened, group, world_size)  # every rank has opened: barrier
    except BaseException:
        if segment is not None:
            segment.close()
        raise
    finally:
        _unlink_all(prefix, world_size)  # every rank tries; nothing stays in /dev/shm
    failed = {r: o for r, o in enumerate(outcomes) if o is not None}
    if failed:
        if segment is not None:
            segment.close()
        raise ShmUnavailable(f"shared memory {prefix} could not be opened on rank(s) {failed}")
    assert segment is not None
    return segment, peers


def shm_problem(world_size: int, buffer_bytes: int | None) -> str | None:
    """Why a segment for ``world_size`` ranks would not fit in /dev/shm now (``None``: it fits).

    Creates nothing; the message is the one the ranks would get, so ``artune
    explain`` can show what a Communicator here would say.
    """
    try:
        _choose_layout(world_size, buffer_bytes)
    except ShmUnavailable as err:
        return str(err)
    return None
