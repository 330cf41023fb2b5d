"""SGLang's ``rocm`` tables: what a release runs on an AMD GPU, read by its own code (``is_hip()`` true).

Per gfx arch, world size and mode: the class ``dispatch_custom_allreduce``
returns on HIP (``artune.formats.sglang.choice``) and what it takes (SGLang's
own ``CustomAllreduce`` interpreted: its ``__init__`` up to its first call
outside the file and its ``should_custom_ar``; AITER's as the stand-in facts
of ``artune.formats.sglang.hip``), then, where it declines a size, the
``QuickAllReduce`` ``GroupCoordinator`` builds beside it
(``_resolve_outplace_all_reduce_method``: ``ca`` before ``qr``), then RCCL.
Every switch is the release's own reading of the environment given
(``settings``); what the evaluator cannot follow is a caveat on the table, as
on CUDA.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from artune import rocm
from artune.formats import fingerprints
from artune.formats.engine import EngineImport
from artune.formats.files import describe
from artune.formats.sglang import hip
from artune.formats.sglang import rules as rules
from artune.formats.sglang.choice import LEGACY
from artune.formats.sglang.dispatch import ArchReading, Files, _constants, _tensor
from artune.formats.sglang.release import evaluated_in
from artune.table.family import TableSet
from artune.table.types import MODES, Band, Caveat, Plan, Platform, Provenance, Table

_QUICK_OFF = "no QuickReduce"


@dataclass(frozen=True)
class Group:
    """What SGLang builds for one group on ROCm: the custom all-reduce class (``""``: none) and the QuickReduce
    level (``None``: none), with each one's answer per size (``"nccl"`` where it declines)."""

    cls: str
    level: str | None
    custom: Callable[[int], str]
    quick: Callable[[int], bool]
    numbers: tuple[Any, ...]


def _group(reading: ArchReading, quick: hip.Quick | None, world_size: int, graph: bool) -> Group:
    reading.state.world_size, reading.at = world_size, world_size
    reading.state.graph = graph
    chosen = reading.chosen()
    numbers: list[Any] = []
    custom: Callable[[int], str] = lambda n: "nccl"  # noqa: E731
    if chosen.cls == hip.AITER:
        admits = hip.aiter_admits(world_size, reading.state.hosts)
        custom = lambda n: "aiter_ar" if admits(n) else "nccl"  # noqa: E731
        numbers.append(hip.AITER_MAX_SIZE)
    elif chosen.cls == LEGACY:
        sized = reading.sized(world_size)
        run = reading.legacy_runner(sized, graph) if sized.status == "on" else None
        if run is not None:
            custom = run
            numbers += [*reading._legacy_constants, sized.comm]
    me = quick.build() if quick is not None else None
    level = quick.level(me) if quick is not None and me is not None else None
    if quick is None or me is None or level is None:
        return Group(chosen.cls, None, custom, lambda n: False, tuple(numbers))
    admit = quick.methods.get("should_quick_allreduce")
    numbers += [me, *quick.interp.class_body(hip.QUICK)[1].get("_QR_MIN_SIZE", {}).values()]
    numbers += list(_constants([admit.node] if admit is not None else []))
    return Group(chosen.cls, level, custom, lambda n: quick.admits(me, _tensor(n)), tuple(numbers))


def _bands(reading: ArchReading, group: Group) -> tuple[Band, ...]:
    def run(nbytes: int) -> str:
        found = group.custom(nbytes)
        if found == "nccl" and group.level is not None and group.quick(nbytes):
            return group.level
        return found

    constants = {v for v in group.numbers if type(v) in (int, float)}
    values = [v for v in group.numbers if type(v) not in (int, float)]
    bands = reading._bands(reading.cuts(constants, *values), run, run)
    return tuple(Band(b.upto, tuple(hip.FALLBACK if c == "nccl" else c for c in b.candidates)) for b in bands)


def _reading(files: Files, gfx: str, settings: Mapping[str, str], hosts: int) -> tuple[ArchReading, hip.Quick | None]:
    machine = hip.GpuGroup(gfx, 2, platform=rocm.KIND)
    env = rules.env_defaults(files.environ, settings)
    reading = ArchReading(files, machine.capability, None, env, settings=settings, gfx=gfx)
    reading.state.hosts = hosts
    quick = None
    if files.quick is not None:
        quick = hip.Quick(files.quick, reading.fakes, reading._met, reading._report)
        reading.more.append(quick.interp)
    return reading, quick


@dataclass
class _Read:
    """One arch read under one setting: the plans, what the reading could not follow, what it evaluated."""

    plans: list[Plan]
    caveats: list[Caveat]
    evaluated: list[fingerprints.Evaluated]


def _read(files: Files, gfx: str, settings: Mapping[str, str]) -> _Read:
    """One plan per world size, mode and number of hosts (across hosts nothing SGLang builds starts, and RCCL
    runs), with the readings' caveats and the functions they ran."""
    plans: list[Plan] = []
    caveats: list[Caveat] = []
    interps: list[Any] = []
    for hosts in (1, 2):  # across hosts any split: the code asks only "all on one node?"
        reading, quick = _reading(files, gfx, settings, hosts)
        for ws in reading.world_sizes():
            for mode in MODES:
                group = _group(reading, quick, ws, mode == "graph")
                bands = _bands(reading, group)
                what = {hip.AITER: "AITER's CustomAllreduce", LEGACY: f"SGLang's own {LEGACY}"}.get(group.cls, "none")
                level = group.level or _QUICK_OFF
                notes = (
                    f"dispatch_custom_allreduce on HIP builds {what}; QuickAllReduce: {level} (taken where the custom "
                    "all-reduce declines a size, as GroupCoordinator orders them)"
                )
                provenance = Provenance("published", tool="sglang", notes=notes)
                counts = [1] if hosts == 1 else [h for h in range(2, ws + 1) if ws % h == 0]
                plans += [Plan(ws, mode, bands, hip.FALLBACK, provenance=provenance, hosts=h) for h in counts]
        caveats += reading.caveats.caveats(reading.world_sizes())
        interps += [i for i in (reading.choice.interp if reading.choice else None, quick and quick.interp) if i]
    return _Read(plans, list(dict.fromkeys(caveats)), evaluated_in(interps))


def table(files: Files, gfx: str, settings: Mapping[str, str]) -> Table:
    """What the release ``files`` hold runs on ROCm on arch ``gfx`` under ``settings``; its caveats: what the
    reading could not follow, and each function it ran that no verified release has (``fingerprints``)."""
    under = ", ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "no variable set"
    sources = [f for f in (files.dispatcher, files.quick) if f is not None]
    found = _read(files, gfx, settings)
    notes = f"what SGLang runs on ROCm {rocm.describe(gfx)} under {under} ({describe(sources)}), interpreted"
    return Table(
        Platform(rocm.KIND, gfx),
        Provenance("published", tool="sglang", notes=notes),
        tuple(found.plans),
        rules="sglang",
        origin=f"sglang:{files.communicator.label}",
        caveats=(*found.caveats, *fingerprints.unfamiliar("sglang", found.evaluated)),
    )


def evaluated(files: Files, settings: Mapping[str, str]) -> list[fingerprints.Evaluated]:
    """The functions the ``rocm`` readings of every arch in ``hip.ARCHS`` under ``settings`` ran and relied on."""
    found = {(e.function, e.fingerprint): e for gfx in hip.ARCHS for e in _read(files, gfx, settings).evaluated}
    return sorted(found.values(), key=lambda e: e.function)


def rocm_set(files: Files, settings: Mapping[str, str]) -> EngineImport:
    """The ``rocm`` tables of a release: each gfx arch asked (or the capability torch reports for one) read
    when first asked."""
    made: dict[str, Table] = {}

    def engine_arch(arch: str) -> Table | None:
        gfx = rocm.gfx_arch(arch)
        if gfx is None:
            return None
        if gfx not in made:
            made[gfx] = table(files, gfx, settings)
        return made[gfx]

    origin = f"sglang:{files.communicator.label}"
    tables = TableSet(origin, rocm.KIND, MappingProxyType({}), None, rules="sglang", engine_arch=engine_arch)
    sources = tuple(f for f in (files.dispatcher, files.quick) if f is not None)
    return EngineImport("sglang", tables, (), sources)


__all__ = ["evaluated", "rocm_set", "table"]
