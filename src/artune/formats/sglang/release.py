"""SGLang as a release runs it: tables from the interpreted communicators.

``artune.formats.sglang.dispatch`` answers, for one GPU and group, which
communicator SGLang builds (v2 or its legacy ``CustomAllreduce``) and what it
runs at every size. This module asks it for the probed GPUs
(``artune.formats.sglang.rules.PROBES``), on one host and across hosts (in one
NVLink clique, or joined over a network), keeps one table per distinct answer
(an arch whose configs equal another's is served by that one's table, as
SGLang's own dispatch serves it: ``engine_arch``); ``artune.formats.sglang.checks``
writes the findings a reviewer acts on from it.

Every table carries what the reading cannot vouch for (``Table.caveats``):
what the evaluator could not follow, and the dispatch functions whose
fingerprint no verified release has (``artune.formats.fingerprints``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from artune.formats import fingerprints
from artune.formats.files import SourceFile, describe
from artune.formats.sglang import rules as rules
from artune.formats.sglang.choice import DISPATCH, LEGACY, LEGACY_KERNEL
from artune.formats.sglang.dispatch import CLASS, ArchReading, Files, Outcome, Sized
from artune.sizes import format_size
from artune.table.check import Finding
from artune.table.family import TableSet
from artune.table.types import MODES, Caveat, NVLinkDomain, Plan, Platform, Provenance, Table, freeze_params

FALLBACK = "nccl"
#: why a plan across hosts in one NVLink clique runs what it runs (0.5.17 on), and why graph mode takes eager's
RACK_NOTE = (
    "across hosts in one NVLink clique: can_use_custom_all_reduce_v2 admits a multi-node group "
    "(is_one_nvlink_clique, and a VMM-backed allocator: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which "
    "SGLang does not set; without it v2 declines and nccl runs)"
)
RACK_GRAPH_NOTE = (
    f"; {CLASS} turns graph mode off across nodes (_is_graph_mode_supported = ... and not is_multinode), so "
    "graph-captured calls take the eager plans"
)
NETWORK_NOTE = "across hosts joined over a network"
LEGACY_NOTE = (
    f"SGLang's legacy {LEGACY}, which {DISPATCH} picks for this group: {LEGACY_KERNEL} (sgl_kernel's custom "
    "all-reduce, one or two stages picked in C++) where its should_custom_ar admits the size, interpreted"
)
_LOCATION = re.compile(r"^(.*?:\d+): ")
#: functions the reading relies on without running them: the launchers (they run what the dispatch picked),
#: capture() (it allows graph mode) and _init_workspace (its multicast switch, artune.formats.sglang.dispatch)
RELIED_ON = (
    f"{CLASS}.custom_all_reduce",
    f"{CLASS}.capture",
    f"{CLASS}._init_workspace",
    f"{LEGACY}.custom_all_reduce",
    f"{LEGACY}.capture",
    "QuickAllReduce.quick_all_reduce",  # on ROCm: it runs the level should_quick_allreduce admitted
)
#: functions of the communicator that build its table (0.5.10-0.5.15): a change there is a change of table
TABLE_BUILDERS = ("_init_config", "_maybe_init_config")


@dataclass
class ArchFound:
    """One distinct answer: the reading, what each world size does, and the plans."""

    arch: str
    reading: ArchReading
    sized: list[Sized]
    outcomes: dict[tuple[int, str], Outcome] = field(default_factory=dict)


def row_line(record: Any, world_size: int, text: list[str], fallback: int) -> int:
    """The line of ``record``'s row: the call site written ``WS: ...`` (the row of a dict of world sizes),
    else the innermost call that built it."""
    lines = getattr(record, "lines", ()) or ()
    for line in lines:
        if 0 < line <= len(text) and text[line - 1].lstrip().startswith(f"{world_size}:"):
            return line
    return lines[-1] if lines else fallback


class Release:
    """Every table and finding of one SGLang release (or checkout) read from its communicators; ``settings``:
    environment variables set, as a user sets them (every other one at its default)."""

    def __init__(self, files: Files, settings: Mapping[str, str] = rules.NO_SETTINGS) -> None:
        self.files = files
        self.settings = settings
        self.env = rules.env_defaults(files.environ, settings)
        self.workspace = rules.workspace_bytes(self.env)
        self.readings: list[ArchReading] = []
        self._pcie: dict[str, Table] | None = None
        self.rows_file = files.configs or files.communicator
        self.origin = f"sglang:{self.rows_file.label}"
        self.text = self.rows_file.text.splitlines()
        self.findings: list[Finding] = []
        self._cache: dict[str, Table] = {}
        default = self._reading(*rules.DEFAULT_PROBE)
        self.default_key = default.identity()
        self.keys: dict[str, tuple[Any, ...]] = {}
        self.archs: dict[str, ArchFound] = {}
        self.served: dict[str, str] = {}  # probed arch -> the arch whose table SGLang runs there ("default")
        self.copies: set[str] = set()  # probed archs whose configs repeat another arch's, written again
        for cap, num_sm in rules.PROBES:
            arch = f"{cap[0]}.{cap[1]}"
            reading = self._reading(cap, num_sm)
            key = reading.identity()
            twin = next((a for a, k in self.keys.items() if k == key), None)
            if key == self.default_key:
                self.served[arch] = "default"
            elif twin is not None:
                self.served[arch] = twin
                self._copied(arch, twin, reading)
            else:
                self.keys[arch] = key
                self.archs[arch] = self._read(arch, reading)
        self.default = self._read("default", default)
        self.unfamiliar: tuple[Caveat, ...] = ()
        self.tables = {arch: self._table(a) for arch, a in self.archs.items()}
        self.default_table = self._table(self.default)
        self.pcie()
        # every reading done (across hosts and on PCIe too): what they relied on, and what no release verified
        self.evaluated = self._evaluated()
        self.unfamiliar = tuple(fingerprints.unfamiliar("sglang", self.evaluated))
        self.tables = {arch: self._unfamiliar(t) for arch, t in self.tables.items()}
        self.default_table = self._unfamiliar(self.default_table)
        self._pcie = {arch: self._unfamiliar(t) for arch, t in self.pcie().items()}

    def _reading(self, cap: tuple[int, int], num_sm: int | None) -> ArchReading:
        reading = ArchReading(self.files, cap, num_sm, self.env, settings=self.settings)
        self.readings.append(reading)
        return reading

    # ---------------------------------------------------------------- what the reading relied on

    def _evaluated(self) -> list[fingerprints.Evaluated]:
        """The dispatch functions the readings ran and relied on (``evaluated_in``)."""
        interps = [
            interp
            for reading in self.readings
            for interp in [reading.comm, *([reading.choice.interp] if reading.choice is not None else [])]
        ]
        return evaluated_in(interps)

    def _caveats(self, found: ArchFound) -> tuple[Caveat, ...]:
        return (*found.reading.caveats.caveats(found.reading.world_sizes()), *self.unfamiliar)

    def _unfamiliar(self, table: Table) -> Table:
        return replace(table, caveats=(*table.caveats, *self.unfamiliar))

    # ---------------------------------------------------------------- tables

    def _read(self, arch: str, reading: ArchReading) -> ArchFound:
        found = ArchFound(arch, reading, reading.supported())
        for sized in found.sized:
            if sized.status == "on":
                # graph capture off (SGLANG_MEMORY_SAVER_CUDA_GRAPH): graph-captured calls run the eager path;
                # releases before _is_graph_mode_supported keep the switch as tms_cudagraph, which capture() reads
                values = sized.comm.values if sized.comm is not None else {}
                graph_ok = values.get("_is_graph_mode_supported") is not False
                graph_ok = graph_ok and values.get("tms_cudagraph") is not True
                for mode in MODES:
                    found.outcomes[(sized.world_size, mode)] = reading.outcome(sized, mode == "graph" and graph_ok)
        return found

    def _note(self, sized: Sized) -> str:
        me = sized.comm.values if sized.comm is not None else {}
        pull, push = me.get("max_pull_size"), me.get("max_push_size")
        if self.files.configs is None:
            return (
                f"CustomAllReduceV2.__init__ gives the pull buffer {format_size(pull or 0)} (its max_pull_size "
                "default) and should_custom_ar sends larger sizes to nccl"
            )
        return (
            f"SGLang's {format_size(self.workspace)} default workspace ({rules.WORKSPACE_ENV}) sizes the pull buffer "
            f"to {format_size(pull or 0)} and each push slot to {format_size(push or 0)}; CustomAllReduceV2.__init__ "
            "clips the rows to them (the config's clip) and sends larger sizes to nccl"
        )

    def pcie(self) -> dict[str, Table]:
        """Per read arch, what SGLang runs on one host of PCIe-only GPUs (no NVLink between every pair): the
        choice of class, its gates and its sizing read on that machine. artune's table model has no such
        machine, so no table set carries these tables: the S108 note says what they hold, and the tests hold
        them to the engine's own code on that machine."""
        if self._pcie is None:
            self._pcie = {}
            for found in [*self.archs.values(), self.default]:
                reading = self._reading(found.reading.cap, found.reading.num_sm)
                reading.state.nvlink = False
                self._pcie[found.arch] = self._table(self._read(found.arch, reading), across=False)
        return self._pcie

    def _table(self, found: ArchFound, across: bool = True) -> Table:
        reading = found.reading
        about = "SGLang's default for other archs" if found.arch == "default" else f"arch {found.arch}"
        notes = (
            f"SGLang custom all-reduce v2 as {describe(self._sources())} runs it; {about}; the order of algorithms "
            f"from {CLASS}.{reading.dispatch or '?'}, the sizing from {CLASS}.__init__, interpreted"
        )
        legacy = Provenance("published", tool="sglang", notes=f"{LEGACY_NOTE}; {about}")
        plans = []
        for sized in found.sized:
            for mode in MODES:
                outcome = found.outcomes.get((sized.world_size, mode))
                if outcome is not None:
                    plans.append(self._plan(sized, mode, outcome, legacy if sized.cls == LEGACY else None))
        platform = Platform("cuda", found.arch)
        provenance = Provenance("published", tool="sglang", notes=notes)
        plans += self._across_hosts(found, provenance, legacy) if across else []
        return Table(
            platform, provenance, tuple(plans), rules="sglang", origin=self.origin, caveats=self._caveats(found)
        )

    def _plan(
        self,
        sized: Sized,
        mode: str,
        outcome: Outcome,
        provenance: Provenance | None,
        hosts: int = 1,
        nvlink: NVLinkDomain = NVLinkDomain.HOST,
    ) -> Plan:
        differs = outcome.written != outcome.bands
        return Plan(
            sized.world_size,
            mode,
            outcome.bands,
            FALLBACK,
            freeze_params(outcome.params),
            provenance,
            hosts,
            written=outcome.written if differs else (),
            notes=(self._note(sized),) if differs else (),
            nvlink=nvlink,
        )

    def _across_hosts(self, found: ArchFound, provenance: Provenance, legacy: Provenance) -> list[Plan]:
        """Plans across hosts, in one NVLink clique and joined over a network: the choice of class and its
        ``__init__`` interpreted for a multi-node group there (``rules.fakes``), at every world size where a
        communicator is then on, for every number of hosts dividing it. Where ``_is_graph_mode_supported`` is
        off across nodes, graph-captured calls take the eager plans. What the readings could not follow joins
        ``found``'s caveats."""
        plans: list[Plan] = []
        for nvlink in (NVLinkDomain.RACK, NVLinkDomain.HOST):
            reading = self._reading(found.reading.cap, found.reading.num_sm)
            # any split: the code asks only "all on one node?"
            reading.state.hosts, reading.state.rack = 2, nvlink is NVLinkDomain.RACK
            where = RACK_NOTE if nvlink is NVLinkDomain.RACK else NETWORK_NOTE
            for sized in reading.supported():
                if sized.status != "on" or sized.comm is None:
                    continue
                graph_ok = sized.comm.values.get("_is_graph_mode_supported") is not False
                for mode in MODES:
                    graph = mode == "graph"
                    outcome = reading.outcome(sized, graph and graph_ok)
                    note = where + (RACK_GRAPH_NOTE if graph and not graph_ok else "")
                    base = legacy if sized.cls == LEGACY else provenance
                    rule = Provenance("published", tool="sglang", notes=f"{note}; {base.notes}")
                    for hosts in range(2, sized.world_size + 1):
                        if sized.world_size % hosts == 0:
                            plans.append(self._plan(sized, mode, outcome, rule, hosts, nvlink))
            found.reading.caveats.update(reading.caveats)
        return plans

    def _sources(self) -> list[SourceFile]:
        return [f for f in (self.files.configs, self.files.communicator) if f is not None]

    def engine_arch(self, arch: str) -> Table | None:
        """The table SGLang runs on ``arch`` (one it has no row for): what its dispatch gives that GPU."""
        if arch in self._cache:
            return self._cache[arch]
        major, dot, minor = arch.partition(".")
        if not (dot and major.isdigit() and minor.isdigit()):
            return None  # not a capability: the set's default answers
        reading = self._reading((int(major), int(minor)), None)
        key = reading.identity()
        twin = next((a for a, k in self.keys.items() if k == key), None)
        how = f"SGLang's own dispatch on the capability ({arch}) gives it"
        if twin is not None:  # its rows, with the block counts it computes on this GPU (num_sm is its own)
            table = self._table(self._read(arch, reading)).with_changes(
                borrowed=(f"arch {arch} has no configs of its own in {self.origin}; {how} arch {twin}'s",)
            )
        elif key == self.default_key:
            table = self.default_table.with_changes(
                borrowed=(f"arch {arch} has no configs of its own in {self.origin}; {how} its default configs",)
            )
        else:
            table = self._table(self._read(arch, reading))
        self._cache[arch] = table
        return table

    def table_set(self) -> TableSet:
        return TableSet(
            self.origin,
            "cuda",
            MappingProxyType(self.tables),
            self.default_table,
            rules="sglang",
            engine_arch=self.engine_arch,
        )

    # ---------------------------------------------------------------- findings

    def _add(
        self,
        code: str,
        severity: str,
        source: str,
        arch: str,
        message: str,
        world_size: int | None = None,
        world_sizes: Sequence[int] = (),
        args: Sequence[str | int | float] = (),
    ) -> None:
        """One finding; ``world_sizes`` those its message names, ``args`` what it is written from (``Finding``)."""
        self.findings.append(
            Finding(
                self.origin,
                arch,
                message,
                world_size,
                None,
                source,
                severity,
                code=code,
                world_sizes=tuple(world_sizes),
                args=tuple(args),
            )
        )

    def _where(self, line: int) -> str:
        return f"{self.rows_file.path}:{line}"

    def _first_row(self, found: ArchFound) -> int:
        lines = [row_line(s.written, s.world_size, self.text, 0) for s in found.sized if s.written is not None]
        return min((line for line in lines if line), default=1)

    def _copied(self, arch: str, twin: str, reading: ArchReading) -> None:
        """An arch whose configs equal another's: inherited through the dispatch (a note) or copied rows."""
        theirs = self.archs[twin].sized
        mine = reading.supported()
        lines = lambda rows: [row_line(s.written, s.world_size, self.text, 0) for s in rows]  # noqa: E731
        if lines(mine) != lines(theirs):  # the same figures, written twice
            self.copies.add(arch)
            total = sum(1 for s in mine if s.status == "on")
            self._add(
                "E101",
                "warning",
                self._where(min(x for x in lines(mine) if x) if any(lines(mine)) else 1),
                arch,
                f"{arch} = {twin} in {total} of {total} world sizes: measured, or inherited?",
                args=(twin, total),
            )


def evaluated_in(interps: list[Any]) -> list[fingerprints.Evaluated]:
    """The dispatch functions ``interps`` ran (those of SGLang's communicator files, the configs module's and the
    table builders aside: a change there is a change of table), and those the reading relies on without running
    them (``RELIED_ON``, where their class's ``should_...`` ran), each with its fingerprint."""
    found: dict[str, fingerprints.Evaluated] = {}
    for interp in interps:
        # a nested def is part of its function's fingerprint; the file's own functions are fingerprinted
        defined = _defined(interp)
        ran = {n for (f, n) in interp.ran if f == interp.filename and n in defined}
        asked = {n.split(".")[0] for n in ran if n.split(".")[-1].startswith("should_")}
        relied = {n for n in RELIED_ON if n in defined and n.split(".")[0] in asked}
        for name in sorted((ran - set(TABLE_BUILDERS)) | relied):
            if name not in found:
                found[name] = fingerprints.evaluated(name, defined[name], interp.filename)
    return sorted(found.values(), key=lambda e: e.function)


def _defined(interp: Any) -> dict[str, ast.FunctionDef]:
    """The functions ``interp``'s file defines at its top level and in its classes, by qualified name."""
    out: dict[str, ast.FunctionDef] = {}
    for stmt in interp.tree.body:
        if isinstance(stmt, ast.FunctionDef):
            out[stmt.name] = stmt
        elif isinstance(stmt, ast.ClassDef):
            out.update({f"{stmt.name}.{i.name}": i for i in stmt.body if isinstance(i, ast.FunctionDef)})
    return out


def evaluated(files: Files, settings: Mapping[str, str] = rules.NO_SETTINGS) -> list[fingerprints.Evaluated]:
    """The dispatch functions a reading of ``files`` relies on, with their fingerprints (what
    ``artune verify-engine --record`` keeps once every probe agreed)."""
    return Release(files, settings).evaluated


__all__ = ["Release", "evaluated", "evaluated_in"]
