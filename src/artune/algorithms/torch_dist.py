"""``ProcessGroupAlgorithm``: ``torch.distributed.all_reduce`` on a process group, named after its backend.

Deadline: the collective is issued with ``async_op=True`` and waited for with
``work.wait(timeout)``. Gloo honours that timeout (checked with torch 2.13: a
peer that never calls makes ``wait`` raise "Operation timed out!" after the
timeout), and a peer that dies closes its TCP pairs so gloo fails at once
("Connection closed by peer"). Both become ``PeerTimeout``; the process group
is then in an unknown state, so later calls raise ``CommunicatorClosed``.
For backends whose ``wait`` ignores the timeout, the process group's own
timeout (``init_process_group(timeout=...)``) is what bounds the call.

CUDA tensors on NCCL are reduced with a plain stream-ordered call: a ``wait``
with a timeout would block the host until the kernel ends, which a CUDA
graph capture forbids; NCCL's own watchdog (the process group's timeout)
bounds those calls (where this has run: docs/status.md).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from artune.algorithms.base import NUMERIC_DTYPES, REDUCE_OPS, Algorithm
from artune.errors import CallMismatch, CommunicatorClosed, PeerTimeout

_TORCH_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}

# What each backend reduces with sum/max/min (gloo checked on torch 2.13: int16 raises "Invalid
# scalar type"; bool "works" as or/and, complex only for sum - both left out as unlikely to be meant).
_COMMON = frozenset(NUMERIC_DTYPES) - {torch.int16}
SUPPORTED: dict[str, frozenset[torch.dtype]] = {"gloo": _COMMON, "nccl": _COMMON, "mpi": _COMMON}

# error texts that mean "a peer is gone or late" rather than "bad call"
_PEER_FAILURE_TEXTS = ("timed out", "timeout", "connection closed", "connection reset", "broken pipe")


# the device types each backend reduces (gloo also takes CUDA tensors, staging them through the host)
_DEVICES: dict[str, frozenset[str]] = {"gloo": frozenset({"cpu", "cuda"}), "nccl": frozenset({"cuda"})}


def _inner_backend(group: Any) -> str | None:
    """The backend that serves the all-reduces a group makes on itself, for artune's own torch backend.

    An ``artune`` group runs CPU all-reduces through its Communicator, whose own process-group calls go
    to an inner gloo group (``artune_inner_backend``); CUDA tensors never reach that Communicator.
    """
    inner = getattr(group if group is not None else dist.group.WORLD, "artune_inner_backend", None)
    return str(inner) if inner else None


def backend_devices(group: Any = None) -> frozenset[str] | None:
    """The device types ``group`` reduces: one per backend of a ``"cpu:gloo,cuda:nccl"`` group,
    the known ones of a single backend, ``None`` when unknown (any is tried)."""
    if _inner_backend(group):
        return frozenset({"cpu"})
    backend = str(dist.get_backend(group))
    if ":" in backend:
        return frozenset(part.split(":", 1)[0] for part in backend.split(","))
    return _DEVICES.get(backend)


def backend_parts(group: Any = None) -> dict[str, str]:
    """Device type -> backend of ``group``: ``{"cpu": "gloo", "cuda": "nccl"}`` for ``"cpu:gloo,cuda:nccl"``,
    the known devices of a single backend otherwise (``{"cpu": "gloo", "cuda": "gloo"}`` for gloo)."""
    inner = _inner_backend(group)
    if inner:
        return {"cpu": inner}
    backend = str(dist.get_backend(group))
    if ":" in backend:
        return dict(part.split(":", 1) for part in backend.split(",") if ":" in part)  # type: ignore[misc]
    return dict.fromkeys(_DEVICES.get(backend, ()), backend)


def backend_name(group: Any = None) -> str:
    """The backend of ``group`` for CPU tensors: ``"gloo"``, ``"nccl"``, ``"mpi"``, ...

    A group made with several backends reports e.g. ``"cpu:gloo,cuda:nccl"``; the CPU one is meant.
    For an ``artune`` group, the inner backend that serves its Communicator's calls.
    """
    inner = _inner_backend(group)
    if inner:
        return inner
    backend = str(dist.get_backend(group))
    if ":" in backend:
        by_device = dict(part.split(":", 1) for part in backend.split(",") if ":" in part)
        backend = by_device.get("cpu", backend)
    return backend


class ProcessGroupAlgorithm(Algorithm):
    """``torch.distributed.all_reduce`` on ``group``; ``name`` is the backend (``"gloo"``, ``"nccl"``, ...).

    ``timeout`` (seconds, ``None`` = the process group's own) bounds each call.
    ``dead_peers``, when given, names the ranks known to be dead for the
    ``PeerTimeout`` message (the shm channel's liveness check can provide it).
    """

    def __init__(
        self,
        group: Any = None,
        *,
        timeout: float | None = None,
        dead_peers: Callable[[], tuple[int, ...]] | None = None,
        name: str | None = None,
        devices: frozenset[str] | None = None,
    ) -> None:
        self.group = group
        self.name = name or backend_name(group)
        self.devices = devices if devices is not None else backend_devices(group)
        self.capturable = self.name == "nccl"
        self._timeout = timedelta(seconds=timeout) if timeout else None
        self._dead_peers = dead_peers
        self._supported = SUPPORTED.get(self.name, _COMMON)
        self._broken: str | None = None
        self._closed = False

    def unavailable(self, dtype: torch.dtype, op: str) -> str | None:
        if op not in REDUCE_OPS:
            return f"op {op!r} is not supported (supported: {', '.join(REDUCE_OPS)})"
        if dtype not in self._supported:
            return f"the {self.name} backend does not all-reduce {dtype}"
        return None

    def all_reduce(self, tensor: torch.Tensor, op: str, params: Mapping[str, object]) -> torch.Tensor:
        if self._closed or self._broken:
            raise CommunicatorClosed(
                f"the {self.name} process-group algorithm is "
                + ("closed" if self._closed else f"broken by an earlier failure ({self._broken})")
                + "; create a new communicator"
            )
        if self.capturable and tensor.is_cuda:
            dist.all_reduce(tensor, op=_TORCH_OPS[op], group=self.group)
            return tensor
        self._wait(dist.all_reduce(tensor, op=_TORCH_OPS[op], group=self.group, async_op=True))
        return tensor

    def agree(self, numel: int, dtype: torch.dtype, op: str, algorithm: str) -> None:
        """Raise ``CallMismatch`` on every rank unless all ranks make the same call (CPU groups).

        Where no shared-memory channel compares calls (ranks on several hosts),
        a mismatched element count would reach the backend itself, and gloo
        aborts the process on a size mismatch. So one small MAX all-reduce of
        the call's signature and its negation goes first: they are each
        other's negation on every rank only when all signatures are equal.
        """
        signature = zlib.crc32(f"{numel}:{dtype}:{op}:{algorithm}".encode()) + 1
        record = torch.tensor([signature, -signature], dtype=torch.int64)
        self.all_reduce(record, "max", {})
        if int(record[0]) != -int(record[1]):
            raise CallMismatch(
                f"ranks called all-reduce differently (this rank: numel={numel} dtype={dtype} op={op} "
                f"algorithm={algorithm}); every rank must pass the same element count, dtype and op"
            )

    def _wait(self, work: Any) -> None:
        """Wait for ``work`` within the deadline; a peer failure becomes ``PeerTimeout`` and breaks this."""
        try:
            if self._timeout is None:
                work.wait()
            else:
                work.wait(self._timeout)
        except RuntimeError as err:
            text = str(err)
            if not any(t in text.lower() for t in _PEER_FAILURE_TEXTS):
                raise
            dead: tuple[int, ...] = ()
            if self._dead_peers is not None:
                try:
                    dead = self._dead_peers()
                except Exception:  # liveness is best effort here
                    dead = ()
            self._broken = text.splitlines()[0][:200]
            who = f"rank(s) {list(dead)} died" if dead else f"the {self.name} backend does not say which rank"
            raise PeerTimeout(
                f"{self.name} all-reduce failed waiting for peers ({who}): {self._broken}; create a new communicator",
                missing=dead,
            ) from err

    def close(self) -> None:
        """Nothing to release (the process group belongs to the caller); later calls are refused."""
        self._closed = True
