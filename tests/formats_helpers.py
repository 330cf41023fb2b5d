"""Shared by the formats tests: compare two tables' decisions where it matters."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from artune.table.model import MODES, Table

AVAILABILITY: tuple[frozenset[str] | None, ...] = (
    None,
    frozenset({"custom_ar", "symm_mem_two_shot", "1shot_push", "1shot_pull", "2shot_pull", "2shot_push", "nccl"}),
    frozenset({"symm_mem_multimem", "symm_mem_two_shot", "2shot_pull", "2shot_pull_mc", "nccl"}),
    frozenset({"nccl", "gloo"}),
)


def probe_sizes(*tables: Table, seed: int = 0, count: int = 60) -> list[int]:
    """Every bound, bound +- 1, and random sizes up to 1 GiB."""
    rng = random.Random(seed)
    sizes = {0, 1, 16}
    for table in tables:
        for plan in table.plans:
            for band in plan.bands:
                sizes |= {band.upto - 1, band.upto, band.upto + 1, band.upto + 16}
    sizes |= {rng.randrange(0, 1 << 30) for _ in range(count)}
    sizes |= {rng.randrange(0, 1 << 30) & ~15 for _ in range(count)}
    return sorted(s for s in sizes if s >= 0)


def decision_mismatches(
    a: Table,
    b: Table,
    rename: Callable[[str], str] = lambda name: name,
    world_sizes: Iterable[int] | None = None,
    params: bool = True,
) -> list[tuple[int, str, int, object, object]]:
    """(ws, mode, size, a's choice, b's choice) wherever the two decide differently."""
    sizes = probe_sizes(a, b)
    planned = {p.world_size for t in (a, b) for p in t.plans}
    wss = sorted(world_sizes if world_sizes is not None else planned | {max(planned) + 1, 3})
    out = []
    for ws in wss:
        for mode in MODES:
            for available in AVAILABILITY:
                for n in sizes:
                    da = a.decide(n, ws, mode, available)
                    db = b.decide(n, ws, mode, available)
                    left = (rename(da.algorithm), dict(da.params) if params else None)
                    right = (db.algorithm, dict(db.params) if params else None)
                    if left != right:
                        out.append((ws, mode, n, left, right))
    return out
