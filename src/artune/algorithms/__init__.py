"""Runnable all-reduce algorithms and the one entry the Communicator calls: ``open_algorithms``.

``open_algorithms(group, timeout=...)`` is collective (every rank of
``group`` calls it with the same arguments). It returns an ``AlgorithmSet``:
the process-group algorithm (named after the backend: ``"gloo"``, ...) and,
when shared memory can be used, ``"shm_one_shot"`` and ``"shm_two_shot"``
over one ``ShmChannel``. When it cannot, ``shm_unavailable_reason`` says why
(the same text on every rank) and only the process-group algorithm is there.
Given ``hosts`` that name several hosts, the set is the process-group
algorithm and ``"hier_shm"`` (shared memory inside each host, the process
group among one leader per host) instead.

On a group whose CUDA backend is NCCL (``init_process_group("cpu:gloo,cuda:nccl")``
or ``"nccl"``), ``"nccl"`` reduces CUDA tensors and ``open_algorithms`` also opens
the torch symmetric-memory algorithms (``artune.algorithms.cuda``, imported
only then); each one it leaves out is in ``unavailable`` with the reason.
Engine kernels (vLLM, SGLang) are opened there too where the engine is installed
(``artune.algorithms.engines``), or reported with the reason.

Before a process-group all-reduce, the Communicator should call
``algorithms.channel.agree(numel, dtype, op, name)`` (when ``channel`` is not
``None``) so that mismatched calls raise ``CallMismatch`` there too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from artune.algorithms.base import REDUCE_OPS, Algorithm
from artune.algorithms.hier_shm import HierShm
from artune.algorithms.shm import ShmChannel, ShmOneShot, ShmTwoShot
from artune.algorithms.torch_dist import ProcessGroupAlgorithm, backend_parts
from artune.errors import ShmUnavailable

__all__ = [
    "REDUCE_OPS",
    "Algorithm",
    "AlgorithmSet",
    "HierShm",
    "ProcessGroupAlgorithm",
    "ShmChannel",
    "ShmOneShot",
    "ShmTwoShot",
    "open_algorithms",
]


@dataclass
class AlgorithmSet:
    """The algorithms open on one process group."""

    #: runnable algorithms by catalog name
    by_name: dict[str, Algorithm]
    #: the shared-memory channel, or ``None`` when shm is off or unavailable
    channel: ShmChannel | None = None
    #: why the shm algorithms are missing (identical on every rank), ``None`` when they are present
    shm_unavailable_reason: str | None = None
    #: algorithms known to the catalog that are not open here, with why (identical on every rank)
    unavailable: dict[str, str] = field(default_factory=dict)
    #: NVLink multicast on every rank (CUDA algorithms opened); None where they were not
    multicast: bool | None = None
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        """Close every algorithm and the channel; idempotent."""
        if self._closed:
            return
        self._closed = True
        for algorithm in self.by_name.values():
            with contextlib.suppress(Exception):
                algorithm.close()
        if self.channel is not None:
            self.channel.close()


def open_algorithms(
    group: Any = None,
    *,
    timeout: float,
    buffer_bytes: int | None = None,
    use_shm: bool = True,
    same_host: bool = True,
    cuda: bool | None = None,
    cuda_buffer_bytes: int | None = None,
    hosts: Sequence[str] | None = None,
) -> AlgorithmSet:
    """Open the algorithms on ``group`` (collective; same arguments on every rank).

    ``timeout``: seconds any one wait for peers may take (shm rounds and the
    process-group call). ``buffer_bytes``: data bytes per shm slot, i.e. the
    largest ``chunk_bytes``; ``None`` = ``DEFAULT_BUFFER_BYTES`` or less if
    /dev/shm is small. ``use_shm=False`` skips shared memory entirely.
    Shared-memory trouble never raises here: it is reported in
    ``shm_unavailable_reason``. ``cuda``: open the CUDA algorithms (default:
    when the group's CUDA backend is NCCL); ``cuda_buffer_bytes``: their
    symmetric buffer (default 64 MiB); ``same_host``: every rank on one host. ``hosts`` (each rank's host
    identity, the same list on every rank), when it names more than one host,
    offers ``hier_shm`` instead of the single-host shm algorithms (``use_shm``
    is then ignored); it needs a gloo group that spans every rank.
    """
    across = hosts is not None and len(set(hosts)) > 1
    channel, reason = _channel(group, timeout, buffer_bytes, use_shm, across)
    parts = backend_parts(group)
    by_name = _process_groups(group, parts, timeout, channel.dead_peers if channel is not None else None)
    if channel is not None:
        for algorithm in (ShmOneShot(channel), ShmTwoShot(channel)):
            by_name[algorithm.name] = algorithm
    if across:
        assert hosts is not None
        reason = _open_hier(by_name, group, hosts, timeout, buffer_bytes, reason)
    unavailable: dict[str, str] = {}
    multicast: bool | None = None
    if cuda if cuda is not None else parts.get("cuda") == "nccl":
        from artune.algorithms.cuda import open_cuda_algorithms
        from artune.algorithms.engines import open_engine_algorithms

        found, unavailable, multicast = open_cuda_algorithms(group, same_host=same_host, buffer_bytes=cuda_buffer_bytes)
        if "nccl" in unavailable:  # ranks share a GPU: NCCL would fail at its first call
            by_name.pop("nccl", None)
        by_name.update(found)
        engines, why = open_engine_algorithms(group, timeout=timeout)
        by_name.update(engines)
        unavailable.update(why)
    return AlgorithmSet(by_name, channel, reason, unavailable, multicast)


def _channel(
    group: Any, timeout: float, buffer_bytes: int | None, use_shm: bool, across: bool
) -> tuple[ShmChannel | None, str | None]:
    """The single-host shared-memory channel, or ``None`` and why not."""
    if across:
        return None, "ranks are on different hosts (hier_shm uses shared memory inside each)"
    if not use_shm:
        return None, "shared memory disabled (use_shm=False)"
    try:
        return ShmChannel(group, timeout=timeout, buffer_bytes=buffer_bytes), None
    except ShmUnavailable as err:
        return None, str(err)


def _process_groups(
    group: Any, parts: dict[str, str], timeout: float, dead: Callable[[], tuple[int, ...]] | None
) -> dict[str, Algorithm]:
    """The process group's own algorithm: one per backend, each for its devices, on a mixed group
    (``"cpu:gloo,cuda:nccl"``)."""
    by_name: dict[str, Algorithm] = {}
    if len(set(parts.values())) > 1:
        for device, backend in parts.items():
            algorithm = ProcessGroupAlgorithm(
                group, timeout=timeout, dead_peers=dead, name=backend, devices=frozenset({device})
            )
            by_name.setdefault(backend, algorithm)
    else:
        process_group = ProcessGroupAlgorithm(group, timeout=timeout, dead_peers=dead)
        by_name[process_group.name] = process_group
    return by_name


def _open_hier(
    by_name: dict[str, Algorithm],
    group: Any,
    hosts: Sequence[str],
    timeout: float,
    buffer_bytes: int | None,
    reason: str | None,
) -> str | None:
    """Add ``hier_shm`` to ``by_name`` when the CPU process group is gloo; the reason text either way."""
    if "gloo" not in by_name:
        return f"{reason}; hier_shm needs a gloo group for CPU tensors, not {', '.join(by_name)}"
    try:
        by_name["hier_shm"] = HierShm(group, hosts, timeout=timeout, buffer_bytes=buffer_bytes)
    except ShmUnavailable as err:
        return f"{reason}; hier_shm unavailable: {err}"
    return reason
