"""vLLM's plans from its own code: each machine's evaluated dispatch as bands, explained where vLLM's rules hold.

``artune.formats.vllm.code`` says what a release runs on one machine in one
mode, size by size, with every path that would take a size in vLLM's order.
This module asks it for every machine a table describes and turns the
answers into plans:

- on one host, each world size from 2 to 16 (and any a table names), with
  NVLink multicast (the plan for any machine) and without it (a second plan
  only where its absence changes more than the multicast paths), both modes;
- across hosts, each way of splitting a world size that runs a path on one
  host (and each ``(world size, nodes)`` FlashInfer's MNNVL tuning names)
  over 2 or more hosts, in one NVLink domain (a rack) and over a network.

Bands are what the code decides; nothing else makes them. To say *why* they
are what they are, the rules of ``artune.formats.vllm.rules`` (vLLM's
dispatch as artune describes it, with its rows "as written" and notes) are
fitted to the evaluation: each fact of that description (is custom
all-reduce's bound inclusive, does its row need symmetric memory, ...) takes
the value under which the description decides as the code does on the most
plans. Where it then decides as the code does, a plan carries the
description's rows as written and its notes, and the reviewers' findings
come from it; where it does not (code no release had, such as a pull
request's), the plan carries the code's bands only, and ``unexplained``
names those plans.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from artune import catalog, rocm
from artune.formats.vllm.code import Decisions, Met, ReleaseCode
from artune.formats.vllm.figures import Figures
from artune.formats.vllm.rack import network_errors, rack_plans
from artune.formats.vllm.rules import FALLBACK, SYMM_NAMES, Dispatch, arch_plans, paths
from artune.formats.vllm.world import GpuGroup
from artune.table.family import process_group
from artune.table.types import MODES, Band, NVLinkDomain, Plan, Provenance

ONE_HOST = tuple(range(2, 17))  # world sizes read on one host: every one up to a 16-GPU node
DEFAULT_ARCH = "0.0"  # the capability of an arch no table names: below every capability a release asks for
#: the facts of ``Dispatch`` fitted to the evaluation, each with the values it may take (the first: the newest)
FITTED: dict[str, tuple[Any, ...]] = {
    "custom_ar_on": (True, False),
    "custom_ar_inclusive": (False, True),
    "custom_ar_needs_symm": (True, False),
    "custom_ar_checks_ws": (True, False),
    "custom_ar_ws_limit": (8, None),
    "symm_inclusive": (True, False),
    "fi_inclusive": (True, False),
    "fi_tuned_on": (True, False),
    "fi_tuned_offset": (0, -1),
    "fi_multinode_cc": (100, 0),
    "custom_ar_mnnvl_cc": (100, 0, None),
    "symm_rendezvous_caught": (True, False),
}
PlanKey = tuple[str, int, str, bool | None, int, NVLinkDomain]  # arch, ws, mode, multicast, hosts, nvlink


def _key(arch: str, plan: Plan) -> PlanKey:
    return (arch, plan.world_size, plan.mode, plan.multicast, plan.hosts, plan.nvlink)


@dataclass
class ArchPlans:
    """One arch's plans as the code decides them, and where the release raises instead of deciding."""

    plans: list[Plan] = field(default_factory=list)
    raises: dict[tuple[int, int, bool], Decisions] = field(default_factory=dict)  # (ws, hosts, rack) -> the raise
    at_start: set[tuple[int, int, bool]] = field(default_factory=set)  # of ``raises``: building the communicator
    #: on one host, each machine and mode where vLLM raises: ``(world size, multicast, mode)`` -> what it raises
    raised: dict[tuple[int, bool, str], Decisions] = field(default_factory=dict)
    unknown: set[str] = field(default_factory=set)  # kernels that ran which artune's catalog has no name for


class Evaluation:
    """Every plan of one release, read by its code, arch by arch (each once)."""

    def __init__(self, release: ReleaseCode, figures: Figures) -> None:
        self.release = release
        self.figures = figures
        self._archs: dict[str, ArchPlans] = {}

    def arch(self, arch: str) -> ArchPlans:
        if arch not in self._archs:
            self._archs[arch] = self._read(arch)
            self.release.keep()
        return self._archs[arch]

    def _bands(
        self, machine: GpuGroup, mode: str, reading: ArchPlans, fallback: str = FALLBACK
    ) -> tuple[Band, ...] | None:
        """``machine``'s bands in ``mode`` (``None`` where vLLM raises there, noted in ``reading``)."""
        outcome = self.release.outcome(machine, mode)
        if outcome.raises:
            where = (machine.world_size, machine.hosts, machine.rack)
            reading.raises.setdefault(where, outcome)
            if outcome.at_start:
                reading.at_start.add(where)
            if machine.hosts == 1:
                reading.raised[(machine.world_size, machine.multicast, mode)] = outcome
            return None
        return _bands(outcome, reading.unknown, fallback)

    def _read(self, arch: str) -> ArchPlans:
        reading = ArchPlans()
        tables = self.figures
        named = {
            ws
            for rows in (tables.custom_ar or {}, tables.symm_mem, tables.fi_fusion or {})
            for ws in rows.get(arch, {})
        }
        with_path: set[int] = set()
        for ws in sorted(set(ONE_HOST) | named):
            if self._topology(arch, ws, 1, False, reading):
                with_path.add(ws)
        pairs = {(ws, h) for ws in with_path for h in range(2, ws + 1) if ws % h == 0}
        pairs |= {(ws, nodes) for a, ws, nodes in tables.fi_mnnvl or {} if a == arch and nodes > 1}
        for ws, hosts in sorted(pairs):
            if platform(arch) != rocm.KIND:  # AMD GPUs of several hosts share no peer memory (no NVLink rack)
                self._topology(arch, ws, hosts, True, reading)
            self._topology(arch, ws, hosts, False, reading)
        return reading

    def _topology(self, arch: str, ws: int, hosts: int, rack: bool, reading: ArchPlans) -> bool:
        """Add the plans of one topology to ``reading``; whether any path runs there."""
        nvlink = NVLinkDomain.RACK if hosts > 1 and rack else NVLinkDomain.HOST
        cap = capability(arch)
        kind = platform(arch)
        fallback = process_group(kind)
        found = False
        bare: list[Plan] = []  # after the plans for any machine, as the rules list them
        for mode in MODES:
            if kind == rocm.KIND:  # no multicast on AMD GPUs: one plan for every machine
                on = off = self._bands(GpuGroup(cap, ws, False, hosts, rack, kind), mode, reading, fallback)
            else:
                on = self._bands(GpuGroup(cap, ws, True, hosts, rack), mode, reading)
                off = self._bands(GpuGroup(cap, ws, False, hosts, rack), mode, reading)
            if on is None or off is None:
                continue
            if on or off:
                found = True
                reading.plans.append(Plan(ws, mode, on, fallback, hosts=hosts, nvlink=nvlink))
            if _without_multicast(on, fallback) != off:
                bare.append(Plan(ws, mode, off, fallback, hosts=hosts, nvlink=nvlink, multicast=False))
        reading.plans += bare
        return found

    def met(self, arch: str) -> list[Met]:
        """What the evaluator could not follow while reading ``arch`` (or any arch, on loading the modules)."""
        cap = capability(arch)
        return [m for m in self.release.met.values() if any(x is None or x.arch == cap for x in m.machines)]


def capability(arch: str) -> str:
    """The capability a machine of ``arch`` has: its own, or for the table of arches no table names, one below
    every capability a release asks for."""
    return DEFAULT_ARCH if arch == "default" else arch


def platform(arch: str) -> str:
    """The platform a table for ``arch`` is for: ROCm for a gfx arch, CUDA for any other."""
    return rocm.KIND if rocm.is_gfx(arch) else "cuda"


def _merged(pieces: list[tuple[int | None, list[str]]], fallback: str = FALLBACK) -> tuple[Band, ...]:
    """Bands of ``(upto, paths)`` pieces: each piece's paths, the process group (the fallback) last or alone,
    adjacent equal bands merged and the fallback's above the last band left to the plan's fallback."""
    bands: list[Band] = []
    for upto, names in pieces:
        while names and names[-1] == fallback:
            names.pop()
        candidates = tuple(dict.fromkeys(names)) or (fallback,)
        if bands and bands[-1].candidates == candidates:
            bands[-1] = Band(upto, candidates)
        else:
            bands.append(Band(upto, candidates))
    while bands and bands[-1].candidates == (fallback,):
        bands.pop()
    return tuple(bands)


def _bands(outcome: Decisions, unknown: set[str], fallback: str = FALLBACK) -> tuple[Band, ...]:
    """The bands of ``outcome``'s pieces (kernels the catalog has no name for noted in ``unknown``); the
    process group's all-reduce (pynccl: ``nccl``) named ``fallback`` (RCCL is what it loads on ROCm)."""
    ends = [start - 1 for start, _paths in outcome.pieces[1:]] + [None]
    unknown.update(n for _start, chain in outcome.pieces for n in chain if n not in catalog.SPECS)
    return _merged(
        [
            (upto, [fallback if n == FALLBACK else n for n in chain if n in catalog.SPECS])
            for (_s, chain), upto in zip(outcome.pieces, ends, strict=True)
        ],
        fallback,
    )


def _without_multicast(bands: tuple[Band, ...], fallback: str = FALLBACK) -> tuple[Band, ...]:
    """What ``bands`` decide on a machine without multicast: the paths that need it left out."""
    return _merged(
        [(b.upto, [n for n in b.candidates if not catalog.SPECS[n].conditions.multicast]) for b in bands], fallback
    )


# ------------------------------------------------------------------ the rules, fitted


def model_plans(d: Dispatch, archs: Iterable[str]) -> dict[PlanKey, Plan]:
    """What the rules ``d`` plan for ``archs``, by plan key (across hosts in one NVLink domain included)."""
    out: dict[PlanKey, Plan] = {}
    blank = Provenance("published")
    for arch in archs:
        for plan in (*arch_plans(d, arch), *rack_plans(d, arch, blank)):
            out[_key(arch, plan)] = plan
    return out


def _errors(d: Dispatch, arch: str) -> set[tuple[int, int, bool]]:
    """Where the rules say vLLM raises: on one host (a table out of step), across a network (a rendezvous)."""
    sizes = set(ONE_HOST) | set(d.custom_ar.get(arch, {})) | set(d.symm_mem.get(arch, {}))
    out = {(ws, 1, False) for ws in sizes if paths(d, arch, ws).errors}
    return out | {(ws, 0, False) for ws in network_errors(d, arch)}  # hosts 0: any split over a network


def _evaluated(evaluation: Evaluation, archs: Iterable[str]) -> tuple[dict[PlanKey, Plan], set[tuple[Any, ...]]]:
    plans: dict[PlanKey, Plan] = {}
    errors: set[tuple[Any, ...]] = set()
    for arch in archs:
        reading = evaluation.arch(arch)
        for plan in reading.plans:
            plans[_key(arch, plan)] = plan
        for ws, hosts, rack in reading.raises:
            where = (ws, 1, False) if hosts == 1 else (ws, 0, False) if not rack else None
            if where is not None and (hosts == 1 or (ws, hosts, rack) in reading.at_start):
                errors.add((arch, *where))
    return plans, errors


def mismatches(d: Dispatch, archs: list[str], plans: dict[PlanKey, Plan], errors: set[tuple[Any, ...]]) -> set[Any]:
    """The plan keys (and raise places) where the rules ``d`` decide otherwise than the code."""
    modelled = model_plans(d, archs)
    out: set[Any] = {k for k in plans.keys() | modelled.keys() if _bands_of(plans.get(k)) != _bands_of(modelled.get(k))}
    model_errors = {(arch, *e) for arch in archs for e in _errors(d, arch)}
    return out | (model_errors ^ errors)


def _bands_of(plan: Plan | None) -> tuple[Band, ...]:
    return plan.bands if plan is not None else ()


def fit(seed: Dispatch, evaluation: Evaluation, archs: list[str]) -> tuple[Dispatch, set[Any]]:
    """``seed`` with each fact of ``FITTED`` set to the value under which it decides as the evaluated code on
    the most plans (two rounds, one fact at a time), and the plans where it still does not."""
    plans, errors = _evaluated(evaluation, archs)
    best = seed
    wrong = mismatches(best, archs, plans, errors)
    for _round in range(2):
        if not wrong:
            break
        for name, values in FITTED.items():
            for value in values:
                if value == getattr(best, name):
                    continue
                trial = replace(best, **{name: value})
                missed = mismatches(trial, archs, plans, errors)
                if len(missed) < len(wrong):
                    best, wrong = trial, missed
    return best, wrong


def order(evaluation: Evaluation, archs: list[str]) -> tuple[str, ...] | None:
    """The order in which the evaluated code asks the paths the rules name (FlashInfer, custom all-reduce,
    symmetric memory), from the bands where several take a size; ``None`` where no band shows two."""
    rank = {"flashinfer_ar": "flashinfer_ar", "custom_ar": "custom_ar", **{n: "symm_mem" for n in SYMM_NAMES}}
    before: set[tuple[str, str]] = set()
    for arch in archs:
        for plan in evaluation.arch(arch).plans:
            for band in plan.bands:
                seen = [rank[n] for n in band.candidates if n in rank]
                before |= {(a, b) for i, a in enumerate(seen) for b in seen[i + 1 :] if a != b}
    names = ["flashinfer_ar", "custom_ar", "symm_mem"]
    if not before:
        return None
    ordered: list[str] = []
    while names:  # each next: one no other remaining path comes before
        free = [n for n in names if not any((m, n) in before for m in names if m != n)] or names
        ordered.append(free[0])
        names.remove(free[0])
    return tuple(ordered)


def explained(plan: Plan, modelled: Plan | None) -> Plan:
    """``plan`` (the code's bands) with the rules' rows as written and notes where the rules decide the same."""
    if modelled is None or modelled.bands != plan.bands:
        return plan
    return replace(plan, written=modelled.written, notes=modelled.notes, provenance=modelled.provenance)


__all__ = ["ONE_HOST", "ArchPlans", "Evaluation", "explained", "fit", "model_plans", "order"]
