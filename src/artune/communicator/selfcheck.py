"""Start-up self-check: every algorithm must reduce known data exactly before it may serve a call.

A memory-ordering bug or a broken kernel returns wrong data without an
error; users ask for a check against the reference at start-up. Each rank
builds every rank's input from a formula (small integers, so every summation
order is exact in every dtype), runs each algorithm once per case and compares
with the sum it computed itself: no reference collective is needed. The
failures are gathered, so every rank disables the same algorithms.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import torch
import torch.distributed as dist

from artune.algorithms.base import Algorithm
from artune.errors import PeerTimeout

#: (dtype, op, element count): one small call per path, and one of 2 MiB + 12 bytes of float32 that spans
#: several chunks at the shm algorithms' default chunk size
CASES: tuple[tuple[torch.dtype, str, int], ...] = (
    (torch.float32, "sum", 1031),
    (torch.float32, "sum", (1 << 19) + 3),
    (torch.bfloat16, "sum", 1031),
    (torch.int32, "max", 1031),
)
#: CUDA algorithms also get a bf16 case whose byte size is a multiple of 4 (the symm_mem kernels' alignment)
CUDA_CASES = (*CASES, (torch.bfloat16, "sum", 1032))


def _device(algorithm: Algorithm) -> str:
    """Where the algorithm's cases live: CUDA for one that takes CUDA tensors only, else the CPU."""
    kinds = algorithm.devices
    return "cuda" if kinds is not None and "cpu" not in kinds and "cuda" in kinds else "cpu"


def rank_input(rank: int, numel: int) -> torch.Tensor:
    """Rank ``rank``'s input as int64: small integers in [-8, 8] that differ by rank and position."""
    i = torch.arange(numel, dtype=torch.int64)
    return (i * 7 + rank * 13) % 17 - 8


def expected(world_size: int, numel: int, op: str) -> torch.Tensor:
    """The exact reduction of every rank's ``rank_input``, as int64."""
    inputs = torch.stack([rank_input(r, numel) for r in range(world_size)])
    return inputs.sum(0) if op == "sum" else inputs.amax(0) if op == "max" else inputs.amin(0)


def _problem(algorithm: Algorithm, rank: int, world_size: int) -> str | None:
    """Why ``algorithm`` failed a case on this rank, or ``None``.

    Every case runs even after a wrong one: peers are in the same sequence of
    calls and would wait for this rank otherwise.
    """
    problems = []
    device = _device(algorithm)
    for dtype, op, numel in CUDA_CASES if device == "cuda" else CASES:
        if algorithm.unavailable(dtype, op) is not None:
            continue
        if algorithm.unfit(numel * torch.empty((), dtype=dtype).element_size(), dtype) is not None:
            continue
        x = rank_input(rank, numel).to(dtype).to(device)
        try:
            algorithm.all_reduce(x, op, {})
        except PeerTimeout:
            raise  # a dead peer is not this algorithm's fault: the Communicator cannot start
        except Exception as err:  # its peers fail in the same call (mismatch) or time out
            return f"{dtype} {op} of {numel} elements raised {type(err).__name__}: {err}"
        want = expected(world_size, numel, op).to(dtype).to(device)
        if not torch.equal(x, want):
            problems.append(f"{dtype} {op} of {numel} elements: {int((x != want).sum())} wrong on rank {rank}")
    return "; ".join(problems) or None


def self_check(
    algorithms: Mapping[str, Algorithm], skip: str | Collection[str], group: dist.ProcessGroup | None
) -> dict[str, str]:
    """Run the cases on every algorithm except ``skip`` (the process groups: the reference); collective.

    Algorithms that take CUDA tensors only are checked with CUDA tensors
    (where this has run: docs/status.md).

    Returns ``{name: problem}`` for the algorithms that failed on any rank
    (the same on every rank, the first rank's words for each).
    """
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    skipped = {skip} if isinstance(skip, str) else set(skip)
    mine = {}
    for name, algorithm in algorithms.items():
        if name not in skipped:
            problem = _problem(algorithm, rank, world_size)
            if problem is not None:
                mine[name] = problem
    gathered: list[dict[str, str] | None] = [None] * world_size
    dist.all_gather_object(gathered, mine, group=group)
    failed: dict[str, str] = {}
    for found in gathered:
        for name, problem in (found or {}).items():
            failed.setdefault(name, problem)
    return failed
