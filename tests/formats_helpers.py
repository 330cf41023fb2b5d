"""Shared by the formats tests: compare two tables' decisions where it matters."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from artune.catalog import SPECS
from artune.table.decide import decide
from artune.table.types import MODES, Table

CALLS = (("bfloat16", True), ("bfloat16", False), ("float32", True), ("float32", False))


def available(world_size: int, nbytes: int, dtype: str, multicast: bool) -> frozenset[str]:
    """What can run for this call by the catalog's static conditions, as ``artune explain`` computes it."""
    return frozenset(
        name for name, spec in SPECS.items() if spec.conditions.unmet(world_size, dtype, nbytes, multicast) is None
    )


def probe_sizes(*tables: Table, seed: int = 0, count: int = 60) -> list[int]:
    """Every bound, bound +- 1, and random sizes up to 1 GiB."""
    rng = random.Random(seed)
    sizes = {0, 1, 4, 16}
    for table in tables:
        for plan in table.plans:
            for band in plan.bands:
                if band.upto is not None:
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
    static: bool = True,
) -> list[tuple[int, str, int, object, object]]:
    """(ws, mode, size, a's choice, b's choice) wherever the two decide differently.

    ``static``: what can run is the catalog's static conditions for each call
    (dtype, multicast, alignment); otherwise every algorithm is available.
    """
    sizes = probe_sizes(a, b)
    planned = {p.world_size for t in (a, b) for p in t.plans}
    wss = sorted(world_sizes if world_sizes is not None else planned | {max(planned) + 1, 3})
    out = []
    for ws in wss:
        for mode in MODES:
            for dtype, multicast in CALLS:
                for n in sizes:
                    here = available(ws, n, dtype, multicast) if static else None
                    da = decide(a, n, ws, mode, here)
                    db = decide(b, n, ws, mode, here)
                    left = (rename(da.algorithm), dict(da.params) if params else None)
                    right = (db.algorithm, dict(db.params) if params else None)
                    if left != right:
                        out.append((ws, mode, n, left, right))
    return out
