"""Oracles: the engines' own released code, run on their own configs, as the truth artune's readers must match.

Each module (``sglang``, ``vllm``) downloads nothing itself: it takes the
folder ``artune.formats.releases.fetch_release`` unpacked, and answers probes
with the engine's code and with artune's reader, side by side. These are the
only modules that execute an engine's code: ``artune verify-engine``, the
tests and the benches use them; ``check``, ``explain`` and ``review`` never do
(``tests/test_layers.py`` holds that: nothing but the command line imports
this package).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from artune.table.check import Finding
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
    hosts: int = 1  # the hosts the ranks span
    nvlink: str = "host"  # across hosts: "rack" (one NVLink domain) or "host" (joined over a network)

    @property
    def topology(self) -> str:
        """``"1 host"``, ``"4 hosts rack"`` or ``"2 hosts network"``: how ``engine_releases`` counts probes."""
        if self.hosts == 1:
            return "1 host"
        return f"{self.hosts} hosts {'rack' if self.nvlink == 'rack' else 'network'}"


#: the rack probes: (world size, hosts, NVLink domain) with the world size split evenly over the hosts
RACK_TOPOLOGIES: tuple[tuple[int, int, str], ...] = tuple(
    (ws, hosts, nvlink)
    for ws in (2, 8, 16, 32, 72)
    for hosts, nvlink in ((2, "rack"), (4, "rack"), (18, "rack"), (2, "host"))
    if ws % hosts == 0
)
#: what the engine answers where its own code raises at start-up (and artune's reader reports it)
RAISES = "raises"


def decide_all(tables: TableSet, probes: Sequence[Probe], raising: Sequence[Finding] = ()) -> list[str]:
    """artune's answer per probe from ``tables``: each arch resolved as the set resolves it, then ``decide``
    with what the catalog says can run for that call; ``RAISES`` where one of ``raising`` (the reader's
    findings that the engine raises at start-up across hosts, code N103) names the probe's arch and world
    size for hosts joined over a network."""
    from artune import catalog
    from artune.table.decide import decide

    resolved = {arch: tables.resolve(arch) for arch in {p.arch for p in probes}}
    # N103 names the world sizes it raises at: "... at world sizes 2, 4, 6, 8: ..."
    raises = {
        (f.arch, int(ws))
        for f in raising
        if f.code == "N103" and (found := re.search(r"at world sizes? ([\d, ]+):", f.message))
        for ws in found.group(1).split(", ")
    }
    return [
        RAISES
        if p.hosts > 1 and p.nvlink == "host" and (p.arch, p.world_size) in raises
        else decide(
            resolved[p.arch],
            p.nbytes,
            p.world_size,
            p.mode,
            catalog.available(p.world_size, p.dtype, p.nbytes, p.multicast, p.hosts),
            hosts=p.hosts,
            multicast=p.multicast,
            nvlink=p.nvlink if p.hosts > 1 else None,
        ).algorithm
        for p in probes
    ]


def read_decisions(engine: str, root: object, probes: Sequence[Probe]) -> list[str]:
    """artune's answer per probe for the release unpacked at ``root``: the product's reader, then ``decide_all``."""
    from artune.formats import read_engine

    imported = read_engine(engine, str(root))
    return decide_all(imported.tables, probes, imported.findings)
