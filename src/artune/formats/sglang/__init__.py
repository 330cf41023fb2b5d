"""SGLang: its custom all-reduce v2 configs and dispatch read from a checkout or a release, written back.

``ENGINE`` is what SGLang gives artune (``artune.formats.engine.EnginePlugin``);
its members import the reading code when first called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from artune import rocm
from artune.formats.engine import EngineImport, EnginePlugin, Oracle
from artune.formats.sglang.read import FILES

if TYPE_CHECKING:
    from artune.formats.export import Export
    from artune.table.types import Table


def _read(path: str) -> EngineImport:
    from artune.formats.sglang.read import read_sglang

    return read_sglang(path)


def _read_under(path: str, switches: Mapping[str, str], dtype: str, arch: str) -> EngineImport:
    """On an AMD arch its ROCm tables alone; SGLang's reading does not change with the messages' dtype."""
    from artune.formats.sglang.read import read_sglang, rocm_tables

    return rocm_tables(path, switches) if rocm.is_gfx(arch) else read_sglang(path, switches)


def _write(tables: Sequence[Table], command: str, arch: str | None, standalone: bool) -> Export:
    from artune.formats.sglang.write import export_sglang

    return export_sglang(tables[0], command, arch, standalone)


def _oracle() -> Oracle:
    from artune.oracles.sglang import ORACLE

    return ORACLE


ENGINE = EnginePlugin(
    name="sglang",
    label="SGLang",
    read=_read,
    files=FILES,
    write=_write,
    read_under=_read_under,
    oracle=_oracle,
    code_prefix="S",
)
