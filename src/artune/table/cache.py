"""The per-machine table cache: where ``artune tune`` installs a measured table
and where the Communicator looks for one by default.

Layout: ``CACHE_DIR/tables/<fingerprint>.toml`` (``CACHE_DIR`` from
``ARTUNE_CACHE_DIR``, default ``~/.cache/artune``).
"""

from __future__ import annotations

from pathlib import Path

from artune.table.io import dump_table, load_table
from artune.table.types import Table


def cached_table_path(cache_dir: Path, fingerprint: str) -> Path:
    """Where the measured table of the machine with ``fingerprint`` lives."""
    return Path(cache_dir) / "tables" / f"{fingerprint}.toml"


def install_table(table: Table, cache_dir: Path, fingerprint: str) -> Path:
    """Write ``table`` as this machine's measured table; returns the path."""
    path = cached_table_path(cache_dir, fingerprint)
    dump_table(table, path)
    return path


def load_cached_table(cache_dir: Path, fingerprint: str) -> Table | None:
    """This machine's cached table, or ``None`` when there is none (a broken file raises TableError)."""
    path = cached_table_path(cache_dir, fingerprint)
    return load_table(path) if path.exists() else None
