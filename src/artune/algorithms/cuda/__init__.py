"""Algorithms for CUDA tensors: NCCL (the process group) and torch symmetric memory.

Where this has run: docs/status.md.

``open_cuda_algorithms`` is collective and is imported only when the group's
backend reduces CUDA tensors. It decides, identically on every rank, which
of ``symm_mem_one_shot``, ``symm_mem_two_shot`` and ``symm_mem_multimem``
can run here, allocates and rendezvous one symmetric buffer for them, and
returns the reason for every one it leaves out (``rules``), and whether
NVLink multicast works on every rank (what an engine's table plans by).
Nothing fails at
call time: a dtype, op or size the kernels cannot take is refused by
``unavailable`` / ``unfit`` and the Communicator's fallback runs instead.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from artune.algorithms.base import Algorithm
from artune.algorithms.cuda import rules

__all__ = ["open_cuda_algorithms", "rules"]

#: default symmetric buffer: the largest message the symm_mem algorithms take (vLLM: 8-128 MiB by arch and world size)
DEFAULT_BUFFER_BYTES = 64 << 20


def _gather(value: object, group: Any) -> list[object]:
    out: list[object] = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, value, group=group)
    return out


def _first_reasons(per_rank: list[object], names: list[str]) -> dict[str, str | None]:
    """Per name, the first rank's reason (prefixed with the rank when not every rank gave it)."""
    merged: dict[str, str | None] = {}
    for name in names:
        found = [(r, d.get(name)) for r, d in enumerate(per_rank) if isinstance(d, dict) and d.get(name)]
        if not found:
            merged[name] = None
        elif len(found) == len(per_rank):
            merged[name] = str(found[0][1])
        else:
            merged[name] = f"rank {found[0][0]}: {found[0][1]}"
    return merged


def _device_uuid() -> str:
    """This rank's GPU by its UUID (unique across hosts); "" where torch does not tell it."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return str(getattr(props, "uuid", "") or "")


def shared_gpu(uuids: list[str]) -> str | None:
    """Why the ranks cannot reduce CUDA tensors when two of them hold the same GPU, or ``None``."""
    seen: dict[str, int] = {}
    for rank, uuid in enumerate(uuids):
        if uuid and uuid in seen:
            return (
                f"ranks {seen[uuid]} and {rank} share one GPU (GPU-{uuid}): NCCL refuses a duplicate GPU and "
                "symmetric memory needs a GPU per rank; give each rank its own GPU "
                "(torch.cuda.set_device(local_rank) before init_process_group)"
            )
        seen.setdefault(uuid, rank)
    return None


def open_cuda_algorithms(
    group: Any, *, same_host: bool, buffer_bytes: int | None = None
) -> tuple[dict[str, Algorithm], dict[str, str], bool]:
    """The symmetric-memory algorithms that can run on ``group`` here, why each missing one cannot, and
    whether every rank's symmetric buffer got a multicast address (False where none could be set up).

    Where two ranks hold one GPU, nothing can reduce CUDA tensors: the reasons then name ``nccl`` too.
    Collective: every rank calls it (also one without CUDA, which reports why).
    """
    names = list(rules.OPS)
    nbytes = int(buffer_bytes or DEFAULT_BUFFER_BYTES)
    if torch.cuda.is_available():
        facts = rules.SymmMemFacts.probe(dist.get_world_size(group), same_host)
        local = {name: rules.open_unavailable(name, facts) for name in names}
        uuid = _device_uuid()
    else:
        local, uuid = dict.fromkeys(names, "no CUDA device on this rank"), ""
    gathered = _gather((local, uuid), group)
    shared = shared_gpu([str(u) for _, u in gathered])  # type: ignore[misc]
    if shared is not None:
        return {}, {**dict.fromkeys(names, shared), "nccl": shared}, False
    reasons = _first_reasons([d for d, _ in gathered], names)  # type: ignore[misc]
    wanted = [name for name in names if reasons[name] is None]
    if not wanted:
        return {}, {n: r for n, r in reasons.items() if r}, False

    from artune.algorithms.cuda.symm_mem import SymmMemAlgorithm, SymmMemBuffer

    buffer: SymmMemBuffer | None = None
    problem = ""
    try:
        buffer = SymmMemBuffer(group, nbytes)
    except Exception as err:  # out of memory, a backend that refuses: reported, never raised
        problem = f"allocating the {nbytes}-byte symmetric buffer failed: {type(err).__name__}: {err}"
    problems = [p for p in _gather(problem, group) if p]
    if not problems and buffer is not None:
        try:
            buffer.rendezvous()
        except Exception as err:
            problem = f"symmetric-memory rendezvous failed: {type(err).__name__}: {err}"
        problems = [p for p in _gather(problem, group) if p]
    if problems or buffer is None:
        if buffer is not None:
            buffer.close()
        why = str(problems[0])[:300]
        return {}, {**{n: r for n, r in reasons.items() if r}, **dict.fromkeys(wanted, why)}, False
    everywhere = all(bool(m) for m in _gather(buffer.multicast, group))
    found: dict[str, Algorithm] = {}
    for name in wanted:
        reason = rules.multicast_unavailable(name, everywhere)
        if reason is None:
            found[name] = SymmMemAlgorithm(name, buffer)
        else:
            reasons[name] = reason
    if not found:
        buffer.close()
    return found, {n: r for n, r in reasons.items() if r}, everywhere
