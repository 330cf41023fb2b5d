"""NCCL's tuner plugin: artune writes its format (``write``) and reads none of NCCL's files.

``ENGINE`` is what it gives artune (``artune.formats.engine.EnginePlugin``), as ``export --to nccl-tuner``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from artune.formats.engine import EnginePlugin

if TYPE_CHECKING:
    from artune.formats.export import Export
    from artune.table.types import Table


def _write(tables: Sequence[Table], command: str, arch: str | None, standalone: bool) -> Export:
    from artune.formats.nccl.write import export_nccl

    return export_nccl(tables[0], command)


ENGINE = EnginePlugin(name="nccl-tuner", label="NCCL's tuner plugin", read=None, files=(), write=_write)
