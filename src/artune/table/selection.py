"""Which table a Communicator uses, and why: the first of

1. the ``table=`` argument (a ``Table`` or a path),
2. the ``ARTUNE_TABLE`` environment variable,
3. this machine's measured table in the cache (``artune tune`` installs it),
4. the bundled default for the platform.

User overrides (``ARTUNE_ALGORITHM``, ``ARTUNE_BOUNDS``) are applied on top
of whichever was chosen: they always win.
"""

from __future__ import annotations

from pathlib import Path

from artune import machine
from artune.settings import Settings
from artune.table.bundled import default_table
from artune.table.cache import cached_table_path, load_cached_table
from artune.table.io import load_table
from artune.table.model import Table
from artune.table.overrides import apply_overrides, parse_overrides


def select_table(table: Table | str | Path | None, settings: Settings) -> Table:
    """The table to use, its ``origin`` saying where it came from, with overrides applied."""
    if isinstance(table, Table):
        chosen = table.with_changes(origin=f"{table.name} (table= argument)")
    elif table is not None:
        chosen = _labelled(load_table(table), "table= argument")
    elif settings.table is not None:
        chosen = _labelled(load_table(settings.table), "ARTUNE_TABLE")
    else:
        cached = load_cached_table(settings.cache_dir, machine.fingerprint())
        if cached is not None:
            chosen = _labelled(cached, "this machine's measured table")
        else:
            missing = cached_table_path(settings.cache_dir, machine.fingerprint())
            base = default_table(machine.cpu_platform())
            chosen = base.with_changes(
                origin=f"{base.name} (bundled default: no measured table at {missing}; run 'artune tune')"
            )
    overrides = parse_overrides(settings.algorithm, settings.bounds, "ARTUNE_ALGORITHM/ARTUNE_BOUNDS")
    return apply_overrides(chosen, overrides)


def _labelled(table: Table, how: str) -> Table:
    return table.with_changes(origin=f"{table.name} ({how})")
