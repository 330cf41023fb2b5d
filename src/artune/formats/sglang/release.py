"""SGLang as a release runs it: tables and the reviewers' findings from the interpreted communicators.

``artune.formats.sglang.dispatch`` answers, for one GPU and group, which
communicator SGLang builds (v2 or its legacy ``CustomAllreduce``) and what it
runs at every size. This module asks it for the probed GPUs
(``artune.formats.sglang.rules.PROBES``), on one host and across hosts (in one
NVLink clique, or joined over a network), keeps one table per distinct answer
(an arch whose configs equal another's is served by that one's table, as
SGLang's own dispatch serves it: ``engine_arch``), and writes the findings a
reviewer acts on, one line per problem over archs, world sizes and modes:

- ``error``: ``__init__`` raises at a world size the communicator admits
  (SGLang logs "Setup Custom allreduce failed" and runs NCCL);
- ``warning``: world sizes with no config (NCCL), bounds the default
  workspace clips, multicast asked for where ``num_mc_blocks`` is
  ``None``, rows copied from another arch, a band no aligned size reaches;
- ``note``: v2 off by default in the release, world sizes where the legacy
  class runs, what runs on PCIe-only GPUs, arches served by another's
  configs, and (0.5.10-0.5.15) the pull buffer that ends custom all-reduce.

Every table carries what the reading cannot vouch for (``Table.caveats``):
what the evaluator could not follow, and the dispatch functions whose
fingerprint no verified release has (``artune.formats.fingerprints``).

SGLang's documented ways of switching an algorithm off (equal adjacent
thresholds, ``mc = Range(0, 0)``, ``num_mc_blocks = None`` with no range)
are not findings: the dispatch is read, so they simply never run.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from artune.formats import fingerprints
from artune.formats.engine import EngineImport
from artune.formats.files import SourceFile, describe
from artune.formats.pyeval import Record
from artune.formats.sglang import rules as rules
from artune.formats.sglang.choice import DISPATCH, LEGACY, LEGACY_KERNEL
from artune.formats.sglang.dispatch import CLASS, ArchReading, Files, Outcome, Sized, env_defaults
from artune.sizes import format_size, format_span
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
)
#: functions of the communicator that build its table (0.5.10-0.5.15): a change there is a change of table
TABLE_BUILDERS = ("_init_config", "_maybe_init_config")


@dataclass
class _Arch:
    """One distinct answer: the reading, what each world size does, and the plans."""

    arch: str
    reading: ArchReading
    sized: list[Sized]
    outcomes: dict[tuple[int, str], Outcome] = field(default_factory=dict)


def _ranges(values: list[int]) -> str:
    """``[9, 10, 11, 16]`` -> ``"9-11, 16"``."""
    parts: list[str] = []
    for v in sorted(values):
        if parts and parts[-1][1] == v - 1:
            parts[-1] = (parts[-1][0], v)
        else:
            parts.append((v, v))  # type: ignore[arg-type]
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)  # type: ignore[misc]


def _world_sizes(values: list[int]) -> str:
    """``"world size 4"``, ``"world sizes 9-15"``."""
    return f"world size{'s' if len(set(values)) > 1 else ''} {_ranges(values)}"


def _arch_order(arch: str) -> tuple[int, ...]:
    """``"9.0" < "10.0" < "10.3" < "default"``."""
    return tuple(int(p) for p in arch.split(".")) if arch[:1].isdigit() else (1 << 30,)


def group_archs(per_arch: dict[str, list[int]]) -> list[tuple[str, list[int]]]:
    """Archs with the same world sizes, merged: ``[("10.0, 10.7", [9, ..., 15])]``."""
    merged: dict[tuple[int, ...], list[str]] = {}
    for arch in sorted(per_arch, key=_arch_order):
        if per_arch[arch]:
            merged.setdefault(tuple(sorted(set(per_arch[arch]))), []).append(arch)
    return [(", ".join(archs), list(sizes)) for sizes, archs in merged.items()]


def holes_message(sizes: list[int]) -> str:
    """World sizes below an arch's largest config that have none."""
    have = "has" if len(sizes) == 1 else "have"
    return f"{_world_sizes(sizes)} {have} no config: custom all-reduce v2 is disabled there and every size goes to nccl"


def clipped_where(per_arch: dict[str, list[int]], modes: set[str]) -> str:
    """``"; at 9.0 ws 2-8; 10.0, 10.7 ws 2-8, 16"``: where rows are clipped, arches with equal sizes merged."""
    where = "; at " + "; ".join(f"{archs} ws {_ranges(sizes)}" for archs, sizes in group_archs(per_arch))
    return where + (f" ({next(iter(modes))} mode)" if len(modes) == 1 else "")


def clipped_message(workspace: int, where: str) -> str:
    """Rows the default workspace clips (``where``: ``clipped_where``)."""
    return (
        f"SGLang's {format_size(workspace)} default workspace ({rules.WORKSPACE_ENV}) clips the rows above "
        f"it: nccl runs there, not what the rows write (artune explain shows both){where}"
    )


def served_message(by: dict[str, list[str]]) -> tuple[str, str]:
    """``(archs, message)`` for arches with no configs of their own, by the arch whose configs they get."""
    parts = [
        f"{' and '.join(archs)} {'its default configs' if twin == 'default' else f'the configs of {twin}'}"
        for twin, archs in by.items()
    ]
    archs = ", ".join(sorted((a for names in by.values() for a in names), key=_arch_order))
    return archs, f"no configs of their own: SGLang's dispatch on the GPU's capability gives {'; '.join(parts)}"


def pcie_message(runs: str) -> str:
    """S108: what SGLang ``runs`` on PCIe-only GPUs ("custom_ar_v1 at world size 2 up to 8MiB")."""
    return (
        "on PCIe-only GPUs (no NVLink between every pair; these tables are for NVLink-connected ones) "
        f"SGLang runs {runs}; nccl everywhere else (can_use_custom_all_reduce_with_nvlink refuses more than two "
        "PCIe-only GPUs)"
    )


def rack_findings(origin: str, tables: dict[str, Table], default: Table | None, source: str) -> list[Finding]:
    """N111, a note per set: the world sizes where custom all-reduce v2 runs across hosts in one NVLink
    clique, with graph-captured calls on the eager plans; every other one across hosts runs nccl."""
    per_arch: dict[str, list[int]] = {}
    for arch, table in {**tables, **({"default": default} if default is not None else {})}.items():
        per_arch[arch] = sorted({p.world_size for p in table.plans if p.nvlink is NVLinkDomain.RACK})
    groups = group_archs(per_arch)
    if not groups:
        return []
    listed = "; ".join(f"{archs} ws {_ranges(sizes)}" for archs, sizes in groups)
    graph = any(
        p.mode == "graph" and RACK_GRAPH_NOTE in (p.provenance.notes if p.provenance else "")
        for t in (*tables.values(), *([default] if default is not None else []))
        for p in t.plans
    )
    message = (
        f"across hosts in one NVLink clique (nvlink=rack) custom all-reduce v2 runs at {listed}, on any number "
        "of hosts dividing the world size"
        + ("; graph-captured calls take the eager plans there" if graph else "")
        + "; every other world size across hosts, and every one across hosts joined over a network, runs nccl"
    )
    return [Finding(origin, ", ".join(a for a, _ in groups), message, None, None, source, "note", code="N111")]


def _row_line(record: Any, world_size: int, text: list[str], fallback: int) -> int:
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
        self.env = env_defaults(files.environ, settings)
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
        self.archs: dict[str, _Arch] = {}
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
        self.evaluated = self._evaluated()  # what the tables so far relied on: enough to fingerprint
        self.unfamiliar = tuple(fingerprints.unfamiliar("sglang", self.evaluated))
        self.tables = {arch: self._table(a) for arch, a in self.archs.items()}
        self.default_table = self._table(self.default)

    def _reading(self, cap: tuple[int, int], num_sm: int | None) -> ArchReading:
        reading = ArchReading(self.files, cap, num_sm, self.env, settings=self.settings)
        self.readings.append(reading)
        return reading

    # ---------------------------------------------------------------- what the reading relied on

    def _evaluated(self) -> list[fingerprints.Evaluated]:
        """The dispatch functions the reading ran (those of the communicator files, the configs module's and
        the table builders aside: a change there is a change of table), and those it relies on without running
        them (``RELIED_ON``), each with its fingerprint."""
        found: dict[str, fingerprints.Evaluated] = {}
        for reading in self.readings:
            for interp in [reading.comm, *([reading.choice.interp] if reading.choice is not None else [])]:
                # a nested def is part of its function's fingerprint; the file's own functions are fingerprinted
                defined = _defined(interp)
                ran = {n for (f, n) in interp.ran if f == interp.filename and n in defined}
                # a class's launchers matter where its should_custom_ar admitted calls
                relied = {n for n in RELIED_ON if n in defined and f"{n.split('.')[0]}.should_custom_ar" in ran}
                for name in sorted((ran - set(TABLE_BUILDERS)) | relied):
                    if name not in found:
                        found[name] = fingerprints.evaluated(name, defined[name], interp.filename)
        return sorted(found.values(), key=lambda e: e.function)

    def _caveats(self, found: _Arch) -> tuple[Caveat, ...]:
        return (*found.reading.caveats.caveats(found.reading.world_sizes()), *self.unfamiliar)

    # ---------------------------------------------------------------- tables

    def _read(self, arch: str, reading: ArchReading) -> _Arch:
        found = _Arch(arch, reading, reading.supported())
        for sized in found.sized:
            if sized.status == "on":
                for mode in MODES:
                    found.outcomes[(sized.world_size, mode)] = reading.outcome(sized, mode == "graph")
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

    def _table(self, found: _Arch, across: bool = True) -> Table:
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

    def _across_hosts(self, found: _Arch, provenance: Provenance, legacy: Provenance) -> list[Plan]:
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
        if twin is not None:
            table = self.tables[twin].with_changes(
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
        self, code: str, severity: str, source: str, arch: str, message: str, world_size: int | None = None
    ) -> None:
        self.findings.append(Finding(self.origin, arch, message, world_size, None, source, severity, code=code))

    def _where(self, line: int) -> str:
        return f"{self.rows_file.path}:{line}"

    def _first_row(self, found: _Arch) -> int:
        lines = [_row_line(s.written, s.world_size, self.text, 0) for s in found.sized if s.written is not None]
        return min((line for line in lines if line), default=1)

    def _copied(self, arch: str, twin: str, reading: ArchReading) -> None:
        """An arch whose configs equal another's: inherited through the dispatch (a note) or copied rows."""
        theirs = self.archs[twin].sized
        mine = reading.supported()
        lines = lambda rows: [_row_line(s.written, s.world_size, self.text, 0) for s in rows]  # noqa: E731
        if lines(mine) != lines(theirs):  # the same figures, written twice
            self.copies.add(arch)
            total = sum(1 for s in mine if s.status == "on")
            self._add(
                "E101",
                "warning",
                self._where(min(x for x in lines(mine) if x) if any(lines(mine)) else 1),
                arch,
                f"{arch} = {twin} in {total} of {total} world sizes: measured, or inherited?",
            )

    def collect(self) -> tuple[Finding, ...]:
        """Every finding, one line per problem."""
        everything = [*self.archs.values(), self.default]
        self._opt_in(everything)
        self._raises(everything)
        self._holes(everything)
        self._clipped(everything)
        self._multicast(everything)
        self._unreachable(everything)
        self._served()
        self._on_pcie()
        self.findings += rack_findings(self.origin, self.tables, self.default_table, self._where(1))
        order = {"error": 0, "warning": 1, "note": 2}
        return tuple(sorted(self.findings, key=lambda f: order.get(f.severity, 3)))

    def _on_pcie(self) -> None:
        """S108: what runs on PCIe-only GPUs, where it differs from the NVLink tables: per world size with a
        custom algorithm, which, up to which size (the eager plans; graph's say the same in every release)."""
        if self.default.reading.choice is None:
            return  # without the dispatcher, what SGLang picks there is not read (S107 says so)
        by: dict[str, list[str]] = {}
        for arch, table in self.pcie().items():
            parts = [
                f"{'/'.join(dict.fromkeys(c for b in p.bands for c in b.candidates if c != FALLBACK))} at world "
                f"size {p.world_size} up to {format_size(p.bands[-1].upto) if p.bands[-1].upto else 'any size'}"
                for p in table.plans
                if p.mode == "eager" and p.bands
            ]
            by.setdefault("; ".join(parts) or "no custom all-reduce at any world size", []).append(arch)
        where = self.default.reading.choice
        source = where.where(where.dispatch.node if where.dispatch else None)
        for runs, archs in by.items():
            self._add("S108", "note", source, ", ".join(sorted(archs, key=_arch_order)), pcie_message(runs))

    @staticmethod
    def _group(per_arch: dict[str, list[int]]) -> list[tuple[str, list[int]]]:
        return group_archs(per_arch)

    def _raises(self, everything: list[_Arch]) -> None:
        per_arch = {a.arch: [s.world_size for s in a.sized if s.status == "raises"] for a in everything}
        errors = {s.world_size: s.error for a in everything for s in a.sized if s.status == "raises"}
        classes = {s.world_size: s.cls for a in everything for s in a.sized if s.status == "raises"}
        for archs, sizes in self._group(per_arch):
            error = errors[sizes[0]]
            match = _LOCATION.match(error)
            source = match.group(1) if match else self.files.communicator.path
            what = re.sub(r"^KeyError \S+ in ", "KeyError in ", error[match.end() :] if match else error)
            self._add(
                "E202",
                "error",
                source,
                archs,
                f"{classes[sizes[0]]}.__init__ raises ({what}) at {_world_sizes(sizes)}, which the communicator "
                "admits: SGLang logs 'Setup Custom allreduce failed' and runs nccl there",
            )

    def _holes(self, everything: list[_Arch]) -> None:
        if not any(s.cls == CLASS and s.status == "on" for a in everything for s in a.sized):
            return  # v2 off by default (S105): the legacy class's world sizes are its own, not holes
        per_arch: dict[str, list[int]] = {}
        lines: dict[str, int] = {}
        for found in everything:
            on = [s.world_size for s in found.sized if s.status == "on"]
            if on:
                per_arch[found.arch] = [
                    s.world_size for s in found.sized if s.status == "off" and s.world_size < max(on)
                ]
                lines[found.arch] = self._first_row(found)
        for archs, sizes in self._group(per_arch):
            self._add("E201", "warning", self._where(lines[archs.split(", ")[0]]), archs, holes_message(sizes))

    def _clipped(self, everything: list[_Arch]) -> None:
        per_arch: dict[str, list[int]] = {}
        modes: set[str] = set()
        first = 0
        for found in everything:
            for (ws, mode), outcome in found.outcomes.items():
                if outcome.written != outcome.bands:
                    per_arch.setdefault(found.arch, []).append(ws)
                    modes.add(mode)
                    if not first:
                        sized = next(s for s in found.sized if s.world_size == ws)
                        first = _row_line(sized.written, ws, self.text, 1)
        if not per_arch:
            return
        where = clipped_where(per_arch, modes)
        archs = ", ".join(sorted(per_arch, key=_arch_order))
        if self.files.configs is None:
            self._add(
                "S102",
                "note",
                self._where(first),
                archs,
                "the 16MiB pull buffer (CustomAllReduceV2.__init__'s max_pull_size default) ends custom all-reduce: "
                f"nccl runs above it, where the rows write a custom algorithm for every size{where}",
            )
            return
        self._add("E301", "warning", self._where(first), archs, clipped_message(self.workspace, where))

    def _multicast(self, everything: list[_Arch]) -> None:
        per_arch: dict[str, list[int]] = {}
        first = 0
        for found in everything:
            asked = []
            for sized in found.sized:
                config = sized.written
                if not (isinstance(config, Record) and config.get("num_mc_blocks", 0) is None):
                    continue
                heuristics = [config.get(m) for m in MODES]
                ranges = [h.get("mc") for h in heuristics if isinstance(h, Record)]
                if any(isinstance(r, Record) and r.get("max_bytes", 0) > 0 for r in ranges):
                    asked.append(sized.world_size)
                    first = first or _row_line(config, sized.world_size, self.text, 1)
            per_arch[found.arch] = asked
        for archs, sizes in self._group(per_arch):
            self._add(
                "S103",
                "warning",
                self._where(first),
                archs,
                f"rows ask for multicast two-shot (a non-empty mc range) at {_world_sizes(sizes)}, where "
                "num_mc_blocks is None: multicast never runs there",
            )

    def _unreachable(self, everything: list[_Arch]) -> None:
        per_key: dict[tuple[str, str], list[int]] = {}
        for found in everything:
            for (ws, _mode), outcome in found.outcomes.items():
                reached = {
                    name
                    for lo, hi, names in _spans(outcome)
                    if hi is None or -(-lo // rules.ALIGN) * rules.ALIGN <= hi
                    for name in names
                }
                for lo, hi, names in _spans(outcome):
                    for name in names:
                        if name != FALLBACK and name not in reached:
                            text = f"{name} is left only {format_span(lo, hi)}, which holds no 16-byte-aligned size"
                            per_key.setdefault((found.arch, text), []).append(ws)
        for (arch, text), sizes in per_key.items():
            self._add(
                "E103",
                "warning",
                self.files.communicator.path,
                arch,
                f"{text}: it never runs; at {_world_sizes(sorted(set(sizes)))}",
            )

    def _served(self) -> None:
        by: dict[str, list[str]] = {}
        for arch, twin in self.served.items():
            if arch not in self.copies:  # a copy has configs of its own: the copied-rows warning says so
                by.setdefault(twin, []).append(arch)
        if by:
            self._add("S104", "note", self._where(self._dispatch_line()), *served_message(by))

    def _dispatch_line(self) -> int:
        """The line of the function that asks the GPU's capability (where an arch's configs are chosen)."""
        for node in ast.walk(ast.parse(self.rows_file.text)):
            if isinstance(node, ast.FunctionDef) and re.search(
                r"get_device_capability|is_sm100_supported", ast.unparse(node)
            ):
                return node.lineno
        return 1

    def _opt_in(self, everything: list[_Arch]) -> None:
        """Where SGLang picks its legacy class on one host: everywhere (v2 off by default, 0.5.10-0.5.11:
        S105), or at world sizes v2 declines (S106); and with no dispatcher beside the communicator, what is
        assumed (S107)."""
        choice = self.default.reading.choice
        if choice is None:
            self._add(
                "S107",
                "note",
                f"{self.files.communicator.path}:1",
                "all",
                f"no custom_all_reduce.py beside {CLASS}: artune takes {CLASS} as the class SGLang builds for every "
                f"group (its {DISPATCH} decides that, and where it declines, runs the legacy {LEGACY}; give the "
                "checkout or the release to read it)",
            )
            return
        on = [s for a in everything for s in a.sized if s.status == "on"]
        legacy: dict[str, list[int]] = {}
        for found in everything:
            legacy[found.arch] = [s.world_size for s in found.sized if s.cls == LEGACY and s.status == "on"]
        condition = choice.v2_condition()
        if on and all(s.cls == LEGACY for s in on) and condition is not None:
            line, test = condition
            self._add(
                "S105",
                "note",
                f"{choice.source.path}:{line}",
                "all",
                f"custom all-reduce v2 is off by default in this release (SGLang takes it when `{test}`): by "
                f"default SGLang runs its legacy {LEGACY}, which these tables describe ({LEGACY_KERNEL})",
            )
            return
        for archs, sizes in self._group(legacy):
            self._add(
                "S106",
                "note",
                f"{choice.source.path}:{choice.dispatch.node.lineno if choice.dispatch else 1}",
                archs,
                f"{DISPATCH} picks SGLang's legacy {LEGACY} at {_world_sizes(sizes)}, where v2 declines the group: "
                f"{LEGACY_KERNEL} runs there (what its should_custom_ar admits), not v2's algorithms",
            )


def _spans(outcome: Outcome) -> list[tuple[int, int | None, tuple[str, ...]]]:
    out: list[tuple[int, int | None, tuple[str, ...]]] = []
    lower = 0
    for band in outcome.bands:
        out.append((lower, band.upto, band.candidates))
        if band.upto is None:
            break
        lower = band.upto + 1
    return out


def _defined(interp: Any) -> dict[str, ast.FunctionDef]:
    """The functions ``interp``'s file defines at its top level and in its classes, by qualified name."""
    out: dict[str, ast.FunctionDef] = {}
    for stmt in interp.tree.body:
        if isinstance(stmt, ast.FunctionDef):
            out[stmt.name] = stmt
        elif isinstance(stmt, ast.ClassDef):
            out.update({f"{stmt.name}.{i.name}": i for i in stmt.body if isinstance(i, ast.FunctionDef)})
    return out


def build_release(files: Files, settings: Mapping[str, str] = rules.NO_SETTINGS) -> EngineImport:
    """The tables and findings of SGLang as ``files`` (a release or a checkout) run it; ``settings``: environment
    variables set, as a user sets them."""
    release = Release(files, settings)
    findings = release.collect()
    sources = tuple(f for f in (files.configs, files.communicator, files.dispatcher) if f is not None)
    return EngineImport("sglang", release.table_set(), findings, sources)


def evaluated(files: Files, settings: Mapping[str, str] = rules.NO_SETTINGS) -> list[fingerprints.Evaluated]:
    """The dispatch functions a reading of ``files`` relies on, with their fingerprints (what
    ``artune verify-engine --record`` keeps once every probe agreed)."""
    return Release(files, settings).evaluated


__all__ = ["Release", "build_release", "evaluated"]
