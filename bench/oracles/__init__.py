"""Oracles: the engines' own released code, run on their own configs, as the truth artune's readers must match.

Each module (``sglang``, ``vllm``) downloads nothing itself: it takes the
folder ``artune.formats.releases.fetch_release`` unpacked, and answers probes
with the engine's code and with artune's reader, side by side. Only tests and
benches import these; the product never runs an engine's code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from artune.table.family import TableSet


@dataclass(frozen=True)
class Probe:
    """One all-reduce call to decide: the engine's answer and artune's must be equal."""

    arch: str
    world_size: int
    mode: str
    multicast: bool
    nbytes: int
    dtype: str = "bfloat16"


def decide_all(tables: TableSet, probes: Sequence[Probe]) -> list[str]:
    """artune's answer per probe from ``tables``: each arch resolved as the set resolves it, then ``decide``
    with what the catalog says can run for that call."""
    from artune import catalog
    from artune.table.decide import decide

    resolved = {arch: tables.resolve(arch) for arch in {p.arch for p in probes}}
    return [
        decide(
            resolved[p.arch],
            p.nbytes,
            p.world_size,
            p.mode,
            catalog.available(p.world_size, p.dtype, p.nbytes, p.multicast),
            multicast=p.multicast,
        ).algorithm
        for p in probes
    ]


def read_decisions(engine: str, root: object, probes: Sequence[Probe]) -> list[str]:
    """artune's answer per probe for the release unpacked at ``root``: the product's reader, then ``decide_all``."""
    from artune.formats import read_engine

    return decide_all(read_engine(engine, str(root)).tables, probes)
