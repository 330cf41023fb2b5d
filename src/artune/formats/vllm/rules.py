"""How vLLM decides, as its released code does: the rules of every ``vllm:`` and ``reference:vllm`` table.

``CudaCommunicator.all_reduce`` asks its paths in a fixed order and the
first that takes the message runs it; with vLLM's default settings the
paths artune plans are (``Dispatch.order``):

- ``flashinfer_ar``: FlashInfer's standalone all-reduce, on by default from
  vLLM 0.29 (``VLLM_ALLREDUCE_USE_FLASHINFER=1``), for the world sizes
  ``FI_ALLREDUCE_FUSION_MAX_SIZE_MB`` lists for the arch (keyed
  ``major*10+minor``), sizes up to that many MB, or on one host up to
  ``FI_MNNVL_ALLREDUCE_MAX_SIZE_MB[(arch, ws, 1)]`` where that is written
  (the ``auto`` backend is MNNVL there; without multicast it falls back to
  TRT-LLM with the same limit). It takes 2-D fp16/bf16/fp32 inputs, as
  vLLM's hidden states are.
- ``custom_ar``: ``CustomAllreduce`` for its ``_SUPPORTED_WORLD_SIZES`` (and
  ``ws <= 8`` from 0.27), sizes ``< max_size``. ``max_size`` is its 8 MiB
  default, lowered to ``CUSTOM_ALL_REDUCE_MAX_SIZES[arch][ws]`` only where
  torch symmetric memory started (the row's ``min(row, 8 MiB)``): a row above
  8 MiB is capped, and a row for an arch or world size without symmetric
  memory is not used at all.
- ``symm_mem_multimem`` / ``symm_mem_two_shot``: torch symmetric memory
  (``VLLM_ALLREDUCE_USE_SYMM_MEM``, on by default from 0.11) where
  ``SYMM_MEM_ALL_REDUCE_MAX_SIZES`` has the arch and world size and NVLink
  multicast works; bf16 only, ``nbytes <= limit`` (``<`` before 0.22);
  multimem for the world sizes ``_WORLD_SIZES_MULTIMEM[arch]`` lists.
- otherwise ``nccl`` (pynccl), which is also what every world size without
  any of these paths runs.

There is no fallback between arches: an arch missing from every table runs
the default path (``custom_ar`` below 8 MiB, nothing else). NCCL symmetric
memory and FlashInfer's PCIe path are off by default (QuickReduce and AITER
are ROCm's); they are read and checked, not planned, and a release that
turns one of them on by default is refused by the reader, never guessed.

Without NVLink multicast torch symmetric memory does not start, and then
custom all-reduce keeps its 8 MiB default instead of its row. So where that
changes what runs (an arch and world size with a symmetric-memory row, and a
custom_ar row below 8 MiB), a second plan with ``multicast=False`` holds what
vLLM runs on such a machine, beside the plan for any machine, which holds what
it runs with multicast (``artune.table.decide`` picks by the call's
``multicast``). The notes of each plan say why its bands differ from the rows.

Across hosts in one NVLink domain ``paths`` takes ``hosts``: FlashInfer's
backend is mnnvl (the ``(arch, ws, nodes)`` tuning, multicast needed, a
capability floor from 0.32) and custom all-reduce runs only in its MNNVL mode;
``artune.formats.vllm.rack`` builds those plans and says what runs across a
network.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Any

from artune.errors import OverrideError
from artune.sizes import format_size
from artune.table.family import TableSet
from artune.table.priority import SizeRule, bands_from_rules, below, upto
from artune.table.types import MODES, Band, NVLinkDomain, Plan, Platform, Provenance, Table

MiB = 1 << 20
FALLBACK = "nccl"
SYMM_NAMES = ("symm_mem_multimem", "symm_mem_two_shot")


@dataclass(frozen=True)
class Dispatch:
    """What one vLLM release runs with its default settings: its tables and the facts of its code.

    Size tables are ``{"M.m": {world_size: bytes}}``; FlashInfer's are in MB
    (``{"M.m": {world_size: MB}}`` and ``{("M.m", world_size, nodes): MB}``).
    """

    release: str  # how messages name it: "vLLM 0.33.0", "vllm:PATH"
    custom_ar: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    symm_mem: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    multimem: Mapping[str, Sequence[int]] | None = None  # None: symm_mem.py not read (two-shot assumed)
    fi_sizes_mb: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    fi_tuned_mb: Mapping[tuple[str, int, int], float] = field(default_factory=dict)
    custom_ar_on: bool = True  # parallel_state._ENABLE_CUSTOM_ALL_REDUCE
    custom_ar_max: int = 8192 * 1024  # CustomAllreduce(max_size=8192 * 1024)
    custom_ar_world_sizes: tuple[int, ...] = (2, 4, 6, 8)
    custom_ar_ws_limit: int | None = None  # should_custom_ar's "world_size > N: no" guard (vLLM 0.27 on: 8)
    custom_ar_inclusive: bool = False
    custom_ar_needs_symm: bool = True
    custom_ar_checks_ws: bool = True
    symm_mem_on: bool = True
    symm_inclusive: bool = True
    flashinfer_on: bool = False
    fi_tuned_on: bool = True  # the backend is MNNVL on one host (VLLM_FLASHINFER_ALLREDUCE_BACKEND=auto)
    fi_inclusive: bool = True
    fi_tuned_offset: int = 0  # vLLM 0.29-0.32 store a tuned bound as int(mb * MiB) - 1
    order: tuple[str, ...] = ("flashinfer_ar", "custom_ar", "symm_mem")
    #: across hosts (in one NVLink domain): FlashInfer's mnnvl backend needs this capability (major*10+minor;
    #: 100 from vLLM 0.32: "MNNVL requires Blackwell-class GPUs"), custom all-reduce's MNNVL mode likewise
    #: (None: CustomAllreduce is disabled across nodes, as before vLLM 0.27), and whether a failed torch
    #: symmetric-memory rendezvous is caught (vLLM 0.11.1 on) rather than raised at start-up
    fi_multinode_cc: int = 0
    custom_ar_mnnvl_cc: int | None = None
    symm_rendezvous_caught: bool = True

    def symm_up(self, arch: str, world_size: int) -> bool:
        """Whether torch symmetric memory starts (given multicast) for ``arch`` and ``world_size``."""
        return self.symm_mem_on and world_size in self.symm_mem.get(arch, {})

    def custom_ar_sizes(self) -> tuple[int, ...]:
        limit = self.custom_ar_ws_limit
        sizes = (ws for ws in self.custom_ar_world_sizes if ws > 1 and (limit is None or ws <= limit))
        return tuple(sizes) if self.custom_ar_on else ()

    def flashinfer_bound(self, arch: str, world_size: int, hosts: int = 1) -> tuple[int, int, str] | None:
        """FlashInfer's ``(bound as written, bound it runs, note)`` on ``hosts`` hosts, or ``None`` when it is
        off. Across hosts the backend is always mnnvl, so the ``(arch, world size, nodes)`` tuning applies
        whatever ``VLLM_FLASHINFER_ALLREDUCE_BACKEND`` leaves to ``auto``."""
        mb = self.fi_sizes_mb.get(arch, {}).get(world_size) if self.flashinfer_on and world_size > 1 else None
        if not mb:  # vLLM: "if not default_max_size_mb: disabled"
            return None
        written = int(mb * MiB)
        tuned = self.fi_tuned_mb.get((arch, world_size, hosts)) if self.fi_tuned_on else None
        if tuned is None:
            return written, written, ""
        where = "on one host" if hosts == 1 else f"across {hosts} hosts (mnnvl)"
        note = (
            f"FI_MNNVL_ALLREDUCE_MAX_SIZE_MB[({_int(arch)}, {world_size}, {hosts})] = {tuned:g} MB sets "
            f"FlashInfer's workspace {where}, in place of FI_ALLREDUCE_FUSION_MAX_SIZE_MB's {mb:g} MB"
        )
        return written, int(tuned * MiB) + self.fi_tuned_offset, note


def _int(arch: str) -> int:
    """``major*10+minor`` of ``"M.m"``; 0 for the table of arches vLLM names nowhere (``"default"``), whose
    capability is unknown: below every capability a release asks for (an arch it does name is read as itself)."""
    major, _, minor = arch.partition(".")
    return int(major) * 10 + int(minor) if major.isdigit() and minor.isdigit() else 0


def _bound(name: str, limit: int, inclusive: bool) -> SizeRule:
    return upto(name, limit) if inclusive else below(name, limit)


@dataclass(frozen=True)
class RowError:
    """Where vLLM's rows make it raise instead of deciding: ``message`` says what, ``world_size`` the one it is
    about (``None``: the arch's, every world size), ``multimem`` whether the multimem list is the cause (else
    custom_ar's rows)."""

    message: str
    world_size: int | None
    multimem: bool = False


@dataclass(frozen=True)
class Paths:
    """vLLM's first-match rules for one arch and world size: as it runs them, as its files write them, and why."""

    run: tuple[SizeRule, ...]
    written: tuple[SizeRule, ...]
    notes: tuple[str, ...]
    errors: tuple[RowError, ...] = ()  # where vLLM raises instead of deciding


def paths(d: Dispatch, arch: str, world_size: int, multicast: bool = True, hosts: int = 1) -> Paths:
    """The rules ``d`` runs at ``arch`` and ``world_size`` with or without NVLink ``multicast``, in
    ``CudaCommunicator``'s order: on one host, or across ``hosts`` hosts in one NVLink domain (a rack;
    ``artune.formats.vllm.rack`` says what runs across hosts joined over a network)."""
    run: dict[str, list[SizeRule]] = {}
    written: dict[str, list[SizeRule]] = {}
    notes: list[str] = []
    errors: list[RowError] = []
    fi = _flashinfer_path(d, arch, world_size, multicast, hosts)
    if fi is not None:
        run["flashinfer_ar"] = [_bound("flashinfer_ar", fi[1], d.fi_inclusive)]
        written["flashinfer_ar"] = [_bound("flashinfer_ar", fi[0], d.fi_inclusive)]
        notes += [fi[2]] if fi[2] else []
    symm_up = d.symm_up(arch, world_size) and multicast
    if world_size in d.custom_ar_sizes() and _custom_ar_starts(d, arch, world_size, multicast, hosts):
        limit, row = _custom_ar_limit(d, arch, world_size, symm_up, notes, errors)
        run["custom_ar"] = [_bound("custom_ar", limit, d.custom_ar_inclusive)]
        written["custom_ar"] = [_bound("custom_ar", d.custom_ar_max if row is None else row, d.custom_ar_inclusive)]
    if symm_up:
        symm = _symm_rule(d, arch, world_size, errors)
        if symm is not None:
            run["symm_mem"] = written["symm_mem"] = [symm]
    order = [p for p in d.order if p in run] + [p for p in run if p not in d.order]
    return Paths(
        tuple(r for p in order for r in run[p]),
        tuple(r for p in order for r in written.get(p, ())),
        tuple(notes),
        tuple(errors),
    )


def _flashinfer_path(
    d: Dispatch, arch: str, world_size: int, multicast: bool, hosts: int
) -> tuple[int, int, str] | None:
    """FlashInfer's ``(bound as written, bound it runs, note)``; across hosts its only backend is mnnvl,
    which needs multicast and, from vLLM 0.32, compute capability ``fi_multinode_cc``."""
    if hosts > 1 and (not multicast or _int(arch) < d.fi_multinode_cc):
        return None
    return d.flashinfer_bound(arch, world_size, hosts)


def _custom_ar_starts(d: Dispatch, arch: str, world_size: int, multicast: bool, hosts: int) -> bool:
    """Whether ``CustomAllreduce`` takes all-reduces: on one host wherever its world sizes allow; across
    hosts only in its MNNVL mode (``mnnvl_only``), which needs multicast, and then only at world size 2,
    since ranks on different hosts are never ``fully_connected``."""
    if hosts == 1:
        return True
    return d.custom_ar_mnnvl_cc is not None and _int(arch) >= d.custom_ar_mnnvl_cc and multicast and world_size == 2


def _custom_ar_limit(
    d: Dispatch, arch: str, world_size: int, symm_up: bool, notes: list[str], errors: list[RowError]
) -> tuple[int, int | None]:
    """custom_ar's bound as it runs, and its row (``None``: no row), with the notes on why they differ."""
    row = d.custom_ar.get(arch, {}).get(world_size)
    uses_row = symm_up or not d.custom_ar_needs_symm
    limit = d.custom_ar_max
    if uses_row and arch in d.custom_ar:
        if row is None and not d.custom_ar_checks_ws:
            message = (
                f"{arch} has a CUSTOM_ALL_REDUCE_MAX_SIZES row without world size {world_size}: CustomAllreduce "
                "raises KeyError at start-up"
            )
            errors.append(RowError(message, world_size))
        elif row is not None:
            limit = min(row, d.custom_ar_max)
            if row > d.custom_ar_max:
                notes.append(
                    f"CustomAllreduce's default max_size of {format_size(d.custom_ar_max)} caps custom_ar: sizes "
                    f"from {format_size(d.custom_ar_max)} go to the next path"
                )
    elif row is not None and d.symm_up(arch, world_size):  # the machine has no multicast
        notes.append(
            f"without NVLink multicast torch symmetric memory does not start, so custom_ar's row of "
            f"{format_size(row)} does not apply: custom_ar keeps its {format_size(d.custom_ar_max)} default"
        )
    elif row is not None:
        why = (
            f"{d.release} leaves it off by default (VLLM_ALLREDUCE_USE_SYMM_MEM=0)"
            if not d.symm_mem_on
            else f"SYMM_MEM_ALL_REDUCE_MAX_SIZES has no {arch} ws={world_size} row"
        )
        notes.append(
            f"custom_ar's row of {format_size(row)} applies only where torch symmetric memory starts, and {why}: "
            f"custom_ar keeps its {format_size(d.custom_ar_max)} default"
        )
    return limit, row


def _symm_rule(d: Dispatch, arch: str, world_size: int, errors: list[RowError]) -> SizeRule | None:
    """Torch symmetric memory's rule where it started (multimem or two-shot), or ``None`` where vLLM raises."""
    limit = d.symm_mem[arch][world_size]
    if d.multimem is not None and arch not in d.multimem:
        message = (
            f"{arch} is in SYMM_MEM_ALL_REDUCE_MAX_SIZES but not in _WORLD_SIZES_MULTIMEM: SymmMemCommunicator "
            "raises KeyError on its first all-reduce"
        )
        errors.append(RowError(message, None, multimem=True))
        return None
    multimem = d.multimem is not None and world_size in d.multimem[arch]  # unknown: two-shot
    return _bound(SYMM_NAMES[0] if multimem else SYMM_NAMES[1], limit, d.symm_inclusive)


def _kernel_rules() -> dict[str, Any]:
    """``kernels.json``: the custom all-reduce kernel rule as read from vLLM's C++ at the commits it names."""
    return json.loads(resources.files("artune.formats.vllm").joinpath("kernels.json").read_text(encoding="utf-8"))


KERNEL_RULES = _kernel_rules()
#: vLLM's later C++ reads this on every custom all-reduce call (``kernels.json``'s ``override``)
CUSTOM_AR_ALGO_ENV = KERNEL_RULES["override"]["variable"]
_CUSTOM_AR_ALGOS: dict[str, str] = KERNEL_RULES["override"]["values"]


def custom_ar_kernel(world_size: int, nbytes: int, forced: str | None = None, release: str = "") -> tuple[str, str]:
    """Which kernel vLLM's custom all-reduce launches for one message, ``"1stage"`` or ``"2stage"``, and why.

    ``CustomAllreduce::allreduce`` decides in C++ on every call, on an NVLink
    machine (every peer fully connected): by the rule ``kernels.json`` holds
    as read at the commit it names (1-stage at 2 ranks, below 512 KiB up to 4
    ranks and below 256 KiB up to 8, 2-stage from there), or with
    ``VLLM_CUSTOM_ALLREDUCE_ALGO`` set (``forced``) that kernel, as later
    sources read it (any other value throws). The C++ is compiled into the
    wheels, so the reason says, for ``release`` ("vLLM 0.33.0"; "" for a
    checkout), that the rule was not read at that release where it was not.
    """
    rule = KERNEL_RULES["rules"][-1]
    where = f"{rule['source']}, {rule['repository']}@{rule['commit'][:12]}"
    unverified = (
        ""
        if release and release.removeprefix("vLLM ") in rule["releases"]
        else f"; unverified for {release or 'this source'}: its C++ is compiled into the wheel, and artune read "
        f"the rule at commit {rule['commit'][:12]} only"
    )
    if forced is not None:
        if forced not in _CUSTOM_AR_ALGOS:
            raise OverrideError(
                f"{CUSTOM_AR_ALGO_ENV}={forced!r}: vLLM throws 'Invalid {CUSTOM_AR_ALGO_ENV}' on its first custom "
                f"all-reduce; valid values: {', '.join(_CUSTOM_AR_ALGOS)}"
            )
        kernel = _CUSTOM_AR_ALGOS[forced]
        return kernel, (
            f"{CUSTOM_AR_ALGO_ENV}={forced} forces the {kernel[0]}-stage kernel "
            f"({KERNEL_RULES['override']['source']}{unverified})"
        )
    steps = [(int(most), below) for most, below in rule["one_stage_below"]]
    most, below = next(((m, b) for m, b in steps if world_size <= m), steps[-1])
    if below is None:
        return (
            "1stage",
            f"at {most} ranks vLLM's custom all-reduce always runs its 1-stage kernel ({where}{unverified})",
        )
    fewest = max(m for m, _b in steps if m < most) + 1
    ranks = f"at {fewest} to {most} ranks"
    kernel = "1stage" if nbytes < below else "2stage"
    compare = "<" if nbytes < below else ">="
    return kernel, (
        f"vLLM's custom all-reduce runs 1-stage below {format_size(below)} {ranks}, 2-stage from there: "
        f"{format_size(nbytes)} {compare} {format_size(below)} at ws={world_size} -> {kernel} "
        f"({where}; {CUSTOM_AR_ALGO_ENV} unset{unverified})"
    )


def release_of(origin: str) -> str:
    """``"vLLM 0.33.0"`` for the tables of a release (origin ``vllm:vllm==0.33.0/...``); "" for any other."""
    head = origin.removeprefix("vllm:").split("/", 1)[0]
    return f"vLLM {head.partition('==')[2]}" if head.startswith("vllm==") else ""


def kernel(algorithm: str, world_size: int, nbytes: int, multicast: bool, forced: str | None = None) -> str | None:
    """The kernel vLLM picks per call for one of its paths (``artune.catalog.KERNELS``' names), or ``None`` for
    a path of one kernel (the catalog names it) or another engine's name.

    ``custom_ar`` by ``custom_ar_kernel``; FlashInfer's ``auto`` backend is
    MNNVL on one host and TRT-LLM where the node has no NVLink multicast
    (``flashinfer_all_reduce._resolve_fi_ar_backend``).
    """
    if algorithm == "custom_ar":
        return "custom_ar/" + custom_ar_kernel(world_size, nbytes, forced)[0]
    if algorithm == "flashinfer_ar":
        return "flashinfer/mnnvl" if multicast else "flashinfer/trtllm"
    return None


def world_sizes(d: Dispatch, arch: str) -> list[int]:
    """Every world size where some path of ``d`` runs on ``arch`` (the others run nccl)."""
    sizes = set(d.custom_ar_sizes())
    if d.symm_mem_on:
        sizes |= set(d.symm_mem.get(arch, {}))
    if d.flashinfer_on:
        sizes |= {ws for ws in d.fi_sizes_mb.get(arch, {}) if d.flashinfer_bound(arch, ws)}
    return sorted(sizes)


def arch_plans(d: Dispatch, arch: str) -> tuple[Plan, ...]:
    """One plan per world size and mode (vLLM has no graph/eager split) for ``arch``, and one more for machines
    without NVLink multicast where vLLM runs something else on them than symmetric memory's absence explains."""
    plans: list[Plan] = []
    for ws in world_sizes(d, arch):
        found = paths(d, arch, ws)
        if found.errors:
            continue  # vLLM raises there: the reader reports it, and there is nothing to decide
        written = bands_from_rules(found.written, FALLBACK)
        plans += both_modes(ws, found.run, written, found.notes, None)
        bare = paths(d, arch, ws, multicast=False)
        # symmetric memory needs multicast, so the plan for any machine already skips it without; the
        # other plan is needed only where its absence changes another path (custom_ar's buffer)
        if bands_from_rules(bare.run, FALLBACK) != bands_from_rules(
            tuple(r for r in found.run if r.algorithm not in SYMM_NAMES), FALLBACK
        ):
            plans += both_modes(ws, bare.run, written, bare.notes, False)
    return tuple(plans)


def both_modes(
    ws: int,
    run: tuple[SizeRule, ...],
    written: tuple[Band, ...],
    notes: tuple[str, ...],
    multicast: bool | None,
    hosts: int = 1,
    rack: Provenance | None = None,
) -> list[Plan]:
    """The plan in both modes; ``rack``: across ``hosts`` hosts in one NVLink domain, with this provenance."""
    bands = bands_from_rules(run, FALLBACK)
    extra = {"written": written, "notes": notes} if written != bands else {}
    nvlink = NVLinkDomain.HOST if rack is None else NVLinkDomain.RACK
    return [
        Plan(ws, mode, bands, FALLBACK, provenance=rack, multicast=multicast, hosts=hosts, nvlink=nvlink, **extra)  # type: ignore[arg-type]
        for mode in MODES
    ]


def planned_archs(d: Dispatch) -> list[str]:
    """The arches some table of ``d`` that runs by default names, in file order."""
    archs = [*d.custom_ar, *(d.symm_mem if d.symm_mem_on else {})]
    if d.flashinfer_on:
        archs += list(d.fi_sizes_mb)
    return list(dict.fromkeys(archs))


def default_path(d: Dispatch) -> str:
    """One line: what ``d`` runs on an arch that no table names."""
    sizes = d.custom_ar_sizes()
    if not sizes:
        return "nccl for every size"
    listed = ", ".join(map(str, sizes))
    compare = "up to" if d.custom_ar_inclusive else "below"
    return f"custom_ar {compare} {format_size(d.custom_ar_max)} at world sizes {listed}, nccl otherwise"


def table_set(
    d: Dispatch,
    origin: str,
    provenance: Callable[[str], Provenance],
    default_provenance: Provenance,
    name: str = "",
    across_hosts: Callable[[Dispatch, str, Provenance], tuple[Plan, ...]] | None = None,
) -> TableSet:
    """``d``'s tables, one per arch its tables name, and its default path for every other arch.

    ``origin`` names the tables (``vllm:PATH``, ``reference:vllm``), ``name`` the set (default: ``origin``);
    ``across_hosts`` adds each arch's plans for ranks across hosts (``artune.formats.vllm.rack.rack_plans``).
    """

    def plans(arch: str, source: Provenance) -> tuple[Plan, ...]:
        return arch_plans(d, arch) + (across_hosts(d, arch, source) if across_hosts is not None else ())

    tables = {
        arch: Table(
            Platform("cuda", arch), provenance(arch), plans(arch, provenance(arch)), rules="vllm", origin=origin
        )
        for arch in planned_archs(d)
    }
    default = Table(
        Platform("cuda", "default"),
        default_provenance,
        plans("default", default_provenance),
        rules="vllm",
        origin=origin,
    )

    def engine_arch(arch: str) -> Table:
        note = (
            f"{d.release} has no row for arch {arch}: it runs its default path there ({default_path(d)}; no "
            "symmetric memory; vLLM has no fallback between arches)"
        )
        # the default path across hosts depends on the capability (custom all-reduce's MNNVL mode)
        return default.with_changes(borrowed=(note,), plans=plans(arch, default_provenance))

    return TableSet(name or origin, "cuda", MappingProxyType(tables), default, rules="vllm", engine_arch=engine_arch)
