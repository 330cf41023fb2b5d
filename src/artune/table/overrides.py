"""User overrides: force an algorithm, or move a band's bound. They always win over the table.

An override is applied to a table once and gives a new table; every decision
made from it says so in its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from artune.catalog import SPECS
from artune.errors import OverrideError, SizeError
from artune.sizes import format_size, parse_size
from artune.table.types import Band, Plan, Table


@dataclass(frozen=True)
class Overrides:
    """``algorithm``: force it for every size; ``bounds``: (algorithm, new inclusive upper bound)."""

    algorithm: str | None = None
    bounds: tuple[tuple[str, int], ...] = ()
    source: str = "argument"  # where they came from, for messages

    def __bool__(self) -> bool:
        return bool(self.algorithm or self.bounds)


def parse_overrides(algorithm: str | None, bounds: str | None, source: str = "argument") -> Overrides:
    """Build overrides from text: ``bounds`` is ``"name=SIZE[,name=SIZE...]"``."""
    if algorithm is not None and algorithm not in SPECS:
        raise OverrideError(
            f"{source}: cannot force unknown algorithm {algorithm!r}; known: {', '.join(sorted(SPECS))}"
        )
    moved: list[tuple[str, int]] = []
    for item in filter(None, (part.strip() for part in (bounds or "").split(","))):
        name, eq, size = item.partition("=")
        if not eq or not name.strip():
            raise OverrideError(f"{source}: bound override {item!r} must look like 'shm_one_shot=256KiB'")
        try:
            moved.append((name.strip(), parse_size(size.strip(), f"{source}: {name.strip()}")))
        except SizeError as err:
            raise OverrideError(str(err)) from None
    return Overrides(algorithm, tuple(moved), source)


def apply_overrides(table: Table, overrides: Overrides) -> Table:
    """The table with the overrides applied (the table itself when there are none)."""
    if not overrides:
        return table
    notes: list[str] = []
    plans = table.plans
    for name, upto in overrides.bounds:
        new_plans = tuple(_move_bound(plan, name, upto, overrides.source) for plan in plans)
        if new_plans == plans and not any(name in p.algorithms for p in plans):
            raise OverrideError(
                f"{overrides.source}: bound override names {name!r} but no plan of {table.name} uses it; "
                f"algorithms there: {', '.join(sorted({a for p in plans for a in p.algorithms}))}"
            )
        plans = new_plans
        notes.append(f"{overrides.source}: {name} bands end at {format_size(upto)}")
    forced = ""
    if overrides.algorithm:
        forced = overrides.algorithm
        notes.append(f"{overrides.source}: {forced} forced for every size")
    return table.with_changes(plans=plans, forced=forced, overrides=(*table.overrides, *notes))


def _move_bound(plan: Plan, name: str, upto: int, source: str) -> Plan:
    """Move the upper bound of the first band naming ``name``; later bands it covers are dropped."""
    index = next((i for i, b in enumerate(plan.bands) if name in b.candidates), None)
    if index is None:
        return plan
    lower = plan.lower(index)
    if upto < lower:
        raise OverrideError(
            f"{source}: {name}={format_size(upto)} is below where its band starts in plan "
            f"ws={plan.world_size} mode={plan.mode} ({format_size(lower)}); move the earlier band first"
        )
    bands = [*plan.bands[:index], Band(upto, plan.bands[index].candidates)]
    bands += [b for b in plan.bands[index + 1 :] if b.upto is None or b.upto > upto]
    # the plan's topology (hosts, machine, NVLink domain) stays; the engine's rows as written no longer apply
    return replace(plan, bands=tuple(bands), written=(), notes=())
