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
    #: the engine's environment variables set for this call (``(name, value)`` pairs); () for every default
    env: tuple[tuple[str, str], ...] = ()

    @property
    def topology(self) -> str:
        """``"1 host"``, ``"4 hosts rack"`` or ``"2 hosts network"``: how ``verify-engine`` counts probes."""
        return topology_name(self.hosts, self.nvlink)


def topology_name(hosts: int, nvlink: str = "host") -> str:
    """``"1 host"``, ``"4 hosts rack"`` or ``"2 hosts network"``."""
    if hosts == 1:
        return "1 host"
    return f"{hosts} hosts {'rack' if nvlink == 'rack' else 'network'}"


def _splits(world_size: int) -> list[int]:
    """The host counts above one a group of ``world_size`` ranks is split over, each host with as many: every
    one up to 16 ranks (what ``check`` describes, N101), and for the racks of 32 and 72 GPUs two hosts and those
    with 1, 2, 4 or 8 GPUs each (an NVL72 rack is 18 hosts of 4)."""
    hosts = [h for h in range(2, world_size + 1) if world_size % h == 0]
    return hosts if world_size <= 16 else [h for h in hosts if h == 2 or world_size // h in (1, 2, 4, 8)]


#: every (world size, hosts, NVLink domain) the probes cover: one host, world sizes 2-16; across hosts, every
#: split above of 2, 4, 6, 8, 12, 16, 32 and 72 ranks, in one NVLink domain ("rack") and over a network ("host")
TOPOLOGIES: tuple[tuple[int, int, str], ...] = tuple((ws, 1, "host") for ws in range(2, 17)) + tuple(
    (ws, hosts, nvlink) for ws in (2, 4, 6, 8, 12, 16, 32, 72) for hosts in _splits(ws) for nvlink in ("rack", "host")
)
#: the probes across hosts (TOPOLOGIES without one host)
RACK_TOPOLOGIES: tuple[tuple[int, int, str], ...] = tuple(t for t in TOPOLOGIES if t[1] > 1)
#: what the engine answers where its own code raises at start-up (and artune's reader reports it)
RAISES = "raises"
#: where an engine's ROCm probes run: one host at world sizes 2-16, and across hosts over a network up to 16 ranks
#: (AMD GPUs have no NVLink domain)
ROCM_TOPOLOGIES: tuple[tuple[int, int, str], ...] = tuple(
    t for t in TOPOLOGIES if t[1] == 1 or (t[2] == "host" and t[0] <= 16)
)
#: the bytes of one row of a hidden state (8 bf16 elements): probes are whole rows, as every model's messages are
ROW = 16
#: the modes every oracle probes in
MODES = ("graph", "eager")


def rocm_probes(
    envs: Sequence[tuple[tuple[str, str], ...]], archs: Sequence[str], bounds: set[int], grid: Sequence[int]
) -> list[Probe]:
    """ROCm probes: under each of ``envs``, each arch, each of ``ROCM_TOPOLOGIES``, both modes, no multicast (AMD
    GPUs have none), bf16 (as serving reduces), at the whole rows of ``grid`` and around each of ``bounds``."""
    sizes = {n // ROW * ROW for n in grid}
    for bound in bounds:
        below = bound // ROW * ROW
        sizes |= {below - ROW, below, below + ROW}
    return [
        Probe(arch, ws, mode, False, n, hosts=hosts, nvlink=nvlink, env=env)
        for env in envs
        for arch in archs
        for ws, hosts, nvlink in ROCM_TOPOLOGIES
        for mode in MODES
        for n in sorted(s for s in sizes if s > 0)
    ]


def decide_all(tables: TableSet, probes: Sequence[Probe], raising: Sequence[Finding] = ()) -> list[str]:
    """artune's answer per probe from ``tables``: each arch resolved as the set resolves it, then ``decide``
    with what the catalog says can run for that call; ``RAISES`` where one of ``raising`` (the reader's
    findings that the engine raises at start-up: across hosts joined over a network, code N103; on one host
    of an AMD arch, V110; on one host where its own code raises, E203) names the probe's arch and world size
    there."""
    from artune import catalog, rocm
    from artune.table.check import raises_at
    from artune.table.decide import decide

    resolved = {arch: tables.resolve(arch) for arch in {p.arch for p in probes}}
    # N103: the world sizes where the release raises at start-up across hosts joined over a network
    raises = {(f.arch, ws) for f in raising if f.code == "N103" for ws in f.world_sizes}
    # V110: the world sizes where the release raises at start-up on one host of an AMD arch
    raises_here = {(f.arch, ws) for f in raising if f.code == "V110" for ws in f.world_sizes}
    # E203: the engine's own code raises on one host of a CUDA arch (an arch no table names reads "default")
    raised = [f for f in raising if f.code == "E203"]

    def raises_on_one_host(p: Probe) -> bool:
        if p.hosts > 1 or not raised or rocm.is_gfx(p.arch):
            return False
        arch = p.arch if p.arch in tables.tables else "default"
        return raises_at(raised, arch, p.world_size, p.multicast, p.mode) is not None

    return [
        RAISES
        if (p.hosts > 1 and p.nvlink == "host" and (p.arch, p.world_size) in raises)
        or (p.hosts == 1 and (p.arch, p.world_size) in raises_here)
        or raises_on_one_host(p)
        else decide(
            resolved[p.arch],
            p.nbytes,
            p.world_size,
            p.mode,
            # a table read by the engine's code for the probe's dtype already holds what that code decides for it
            catalog.available(
                p.world_size, None if resolved[p.arch].dtype == p.dtype else p.dtype, p.nbytes, p.multicast, p.hosts
            ),
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
