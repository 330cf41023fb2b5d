"""Which table a Communicator uses, and why: the first of

1. the ``table=`` argument (a ``Table`` or a path),
2. the ``ARTUNE_TABLE`` environment variable,
3. this machine's measured table in the cache (``artune tune`` installs it),
4. the bundled default for the platform,

composed with the ones after it (``compose``): a table covers the topologies
and modes it has plans for, and every other ``(world size, hosts, mode)`` is
answered by the next table down, the bundled default last. So measuring one
host never takes ``hier_shm`` away from ranks across hosts, and a measured
plan always wins over a bundled one for the same key.

User overrides (``ARTUNE_ALGORITHM``, ``ARTUNE_BOUNDS``) are applied on top
of whichever was chosen: they always win.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from artune import machine
from artune.settings import Settings
from artune.table.bundled import default_table
from artune.table.cache import cached_table_path, load_cached_table
from artune.table.io import load_table
from artune.table.overrides import apply_overrides, parse_overrides
from artune.table.types import Plan, Table


def select_table(table: Table | str | Path | None, settings: Settings) -> Table:
    """The table to use, its ``origin`` saying where it came from, composed with the ones below it
    and with overrides applied."""
    layers: list[tuple[str, Table]] = []
    if isinstance(table, Table):
        layers.append(("the table= argument", table.with_changes(origin=f"{table.name} (table= argument)")))
    elif table is not None:
        layers.append(("the table= argument", _labelled(load_table(table), "table= argument")))
    if settings.table is not None:
        layers.append(("ARTUNE_TABLE", _labelled(load_table(settings.table), "ARTUNE_TABLE")))
    cached = load_cached_table(settings.cache_dir, machine.fingerprint())
    if cached is not None:
        layers.append(("this machine's measured table", _labelled(cached, "this machine's measured table")))
    base = default_table(machine.cpu_platform())
    how = "bundled default"
    if cached is None:
        missing = cached_table_path(settings.cache_dir, machine.fingerprint())
        how += f": no measured table at {missing}; run 'artune tune'"
    layers.append((f"the bundled default ({base.name})", _labelled(base, how)))
    overrides = parse_overrides(settings.algorithm, settings.bounds, "ARTUNE_ALGORITHM/ARTUNE_BOUNDS")
    return apply_overrides(compose(layers), overrides)


def compose(layers: Sequence[tuple[str, Table]]) -> Table:
    """The first table, with the plans of each later one for every ``(world size, hosts, mode)`` it lacks.

    ``layers`` are ``(role, table)`` in the selection order, the role naming
    the table in messages ("this machine's measured table"). Only tables that
    decide by artune's rules and are for the same platform compose (an arch
    of ``"any"`` fits every arch of its kind); an engine's table decides as
    the engine does, on its own. Each plan taken from a later table says so in
    its ``origin``, so every decision it makes names the table that answered
    and why.
    """
    (role, first), *rest = layers
    if first.rules != "artune":
        return first
    plans = list(first.plans)
    keys = {_key(p) for p in plans}
    for lower_role, lower in rest:
        if lower.rules != "artune" or not _fits(lower, first):
            continue
        added: set[tuple[int, int, str]] = set()
        for plan in lower.plans:
            if _key(plan) in keys:
                continue
            added.add(_key(plan))  # a layer's plans for one key come together: every machine's (Plan.multicast)
            provenance = plan.provenance or lower.provenance
            origin = f"answered by {lower_role}, since {role} has no {plan.topology} mode={plan.mode} plan"
            plans.append(replace(plan, provenance=provenance, origin=origin))
        keys |= added
    if len(plans) == len(first.plans):
        return first
    return first.with_changes(plans=tuple(plans))


def _key(plan: Plan) -> tuple[int, int, str]:
    return plan.world_size, plan.hosts, plan.mode


def _fits(lower: Table, upper: Table) -> bool:
    same_kind = lower.platform.kind == upper.platform.kind
    return same_kind and lower.platform.arch in (upper.platform.arch, "any")


def _labelled(table: Table, how: str) -> Table:
    return table.with_changes(origin=f"{table.name} ({how})")
