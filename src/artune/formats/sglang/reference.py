"""SGLang's all-reduce dispatch as artune tables (``reference:sglang``): release 0.5.23, as it runs.

Figures from SGLang 0.5.23's custom all-reduce v2 configs
(``sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py``
in the released wheel): per arch and world size, a graph-mode and an
eager-mode row plus kernel block counts. The rules are the release's, as
``artune.formats.sglang.rules`` writes them out (and tests hold equal to
the released code):

1. ``1shot_push`` if ``nbytes <= one_shot_push_threshold``
2. ``2shot_push`` if ``nbytes <= two_shot_push_threshold`` (set on SM100 at 4 and 8 ranks)
3. ``1shot_pull`` if ``nbytes <= one_shot_pull_threshold``
4. ``2shot_pull_mc`` if multicast works (and ``num_mc_blocks`` is set) and ``mc`` contains ``nbytes``
5. ``2shot_pull`` if ``nbytes <= two_shot_pull_threshold``
6. ``nccl``

after ``CustomAllReduceV2.__init__`` has clipped each row to its default
workspace (``SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB``, 16 MiB: a pull
buffer of at most 16 MiB, push slots likewise). The rows as written stay in
each plan's ``written``. Exact bytes: a float threshold is truncated
(``int(2.438 * MB)`` = 2556428) and a float ``Range`` bound kept, so
``Range(2.438 * MB, ...)`` first matches at 2556429.

Arch keys: SM90 ``"9.0"`` (every 9.x), SM100 ``"10.0"`` (10.x with minor
< 7: ``10.3`` gets it through SGLang's own dispatch, not a family chain),
SM107 ``"10.7"``; every other arch gets the set's ``default`` (world sizes
2..16). A world size without a row has no plan: SGLang disables custom
all-reduce v2 there and runs NCCL.

Parameters: every SGLang algorithm needs ``blocks``, its kernel grid size
(``1shot_push`` and ``2shot_push`` share the push grid, ``1shot_pull`` and
``2shot_pull`` the pull grid, ``2shot_pull_mc`` the multicast grid). Where
SGLang sets it to the GPU's SM count, the value is an int when the tuning
device is known (132 for SM90, tuned on H200; 148 for SM100, tuned on B200)
and a string expression of the running device's SM count where it is not:
``"sms"`` or ``"min(192,sms)"`` (SM107 and the default). Where SGLang's
multicast block count is ``None`` it disables multicast, and the plan has no
``2shot_pull_mc``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from types import MappingProxyType
from typing import NamedTuple

from artune.formats.sglang import checks
from artune.formats.sglang import rules as sglang
from artune.formats.sglang.choice import LEGACY_KERNEL
from artune.formats.sglang.release import RACK_GRAPH_NOTE as _RACK_GRAPH_NOTE
from artune.formats.sglang.release import RACK_NOTE as _RACK_NOTE
from artune.formats.sglang.rules import Heuristic
from artune.sizes import format_size
from artune.table.check import Finding
from artune.table.family import TableSet
from artune.table.priority import bands_from_rules
from artune.table.types import NVLinkDomain, ParamValue, Plan, Platform, Provenance, Table, freeze_params

KB = 1024
MB = 1024 * KB

ORIGIN = "reference:sglang"
RELEASE = "0.5.23"
SOURCE_FILE = "sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
FALLBACK = "nccl"
WORKSPACE = 16 * MB  # SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB's default, 16 MiB


def H(
    push: float, pull: float, two_shot: float, mc: tuple[float, float] = (0, 0), two_shot_push: float = 0
) -> Heuristic:
    """A row as 0.5.23's ``_pack_heuristic`` makes it: the thresholds int()-ed, the mc range as written."""
    return Heuristic(int(push), int(pull), int(two_shot), mc, int(two_shot_push))


class Blocks(NamedTuple):
    """Kernel grid sizes; ``mc`` None disables multicast."""

    push: ParamValue
    pull: ParamValue
    mc: ParamValue | None


def R(lo: float, hi: float) -> tuple[float, float]:
    return (lo, hi)


# world size -> (graph, eager)
SM90: dict[int, tuple[Heuristic, Heuristic]] = {
    2: (H(16 * MB, 128 * MB, 128 * MB), H(32 * MB, 128 * MB, 128 * MB)),
    3: (H(1.25 * MB, 1.25 * MB, 128 * MB), H(3 * MB, 3 * MB, 16 * MB)),
    4: (H(384 * KB, 384 * KB, 128 * MB), H(896 * KB, 896 * KB, 32 * MB, R(0, 32 * MB))),
    5: (H(192 * KB, 192 * KB, 32 * MB), H(384 * KB, 384 * KB, 32 * MB, R(0, 32 * MB))),
    6: (H(128 * KB, 128 * KB, 32 * MB, R(8 * MB, 32 * MB)), H(192 * KB, 192 * KB, 32 * MB, R(0, 32 * MB))),
    7: (H(128 * KB, 128 * KB, 32 * MB, R(1 * MB, 32 * MB)), H(128 * KB, 128 * KB, 32 * MB, R(0, 32 * MB))),
    8: (
        H(128 * KB, 128 * KB, 32 * MB, R(512 * KB, 128 * MB)),
        H(128 * KB, 128 * KB, 128 * MB, R(0, 128 * MB)),
    ),
}

SM100: dict[int, tuple[Heuristic, Heuristic]] = {
    2: (H(8 * MB, 32 * MB, 128 * MB), H(16 * MB, 128 * MB, 128 * MB)),
    3: (H(4 * MB, 4 * MB, 128 * MB), H(8 * MB, 8 * MB, 32 * MB)),
    4: (
        H(0.625 * MB, 0.625 * MB, 128 * MB, two_shot_push=8 * MB),
        H(0.625 * MB, 0.625 * MB, 32 * MB, two_shot_push=8 * MB),
    ),
    5: (H(1.5 * MB, 1.5 * MB, 128 * MB), H(2 * MB, 2 * MB, 32 * MB, R(0, 32 * MB))),
    6: (H(1 * MB, 1 * MB, 128 * MB), H(1.25 * MB, 1.25 * MB, 64 * MB, R(0, 64 * MB))),
    7: (H(0.625 * MB, 0.625 * MB, 128 * MB), H(1 * MB, 1 * MB, 64 * MB, R(0, 64 * MB))),
    8: (
        H(256 * KB, 256 * KB, 128 * MB, R(8 * MB, 128 * MB), two_shot_push=8 * MB),
        H(256 * KB, 256 * KB, 128 * MB, R(0, 128 * MB), two_shot_push=8 * MB),
    ),
    16: (
        H(0.25 * MB, 0.25 * MB, 128 * MB, R(256 * KB, 128 * MB)),
        H(0.25 * MB, 0.25 * MB, 128 * MB, R(256 * KB, 128 * MB)),
    ),
}


def _same(heuristic: Heuristic) -> tuple[Heuristic, Heuristic]:
    return heuristic, heuristic


SM107: dict[int, tuple[Heuristic, Heuristic]] = {
    2: _same(H(128 * MB, 128 * MB, 128 * MB)),
    3: (H(19.625 * MB, 19.625 * MB, 128 * MB), H(39.188 * MB, 39.188 * MB, 128 * MB)),
    4: (H(6.938 * MB, 6.938 * MB, 128 * MB), H(9.812 * MB, 9.812 * MB, 128 * MB, R(9.812 * MB, 128 * MB))),
    5: _same(H(6.938 * MB, 6.938 * MB, 128 * MB, R(6.938 * MB, 128 * MB))),
    6: _same(H(4.875 * MB, 4.875 * MB, 128 * MB, R(4.875 * MB, 128 * MB))),
    7: _same(H(3.438 * MB, 3.438 * MB, 128 * MB, R(3.438 * MB, 128 * MB))),
    8: _same(H(2.438 * MB, 2.438 * MB, 128 * MB, R(2.438 * MB, 128 * MB))),
    16: _same(H(832 * KB, 832 * KB, 128 * MB, R(832 * KB, 128 * MB))),
}

DEFAULT: dict[int, tuple[Heuristic, Heuristic]] = {ws: _same(H(1 * MB, 1 * MB, 16 * MB)) for ws in range(2, 17)}


def _sm90_blocks(world_size: int) -> Blocks:
    return Blocks(push=132, pull=64, mc=None if world_size < 4 else 128 // world_size)


_SM100_MC = {5: 64, 6: 48, 7: 48, 8: 32, 16: 32}


def _sm100_blocks(world_size: int) -> Blocks:
    return Blocks(push=148, pull=148 if world_size == 2 else 96, mc=_SM100_MC.get(world_size))


_SM107_MC = {4: 128, 5: 128, 6: 128, 7: 128, 8: 96, 16: 32}


def _sm107_blocks(world_size: int) -> Blocks:
    return Blocks(push="sms", pull="min(192,sms)", mc=_SM107_MC.get(world_size))


def _default_blocks(world_size: int) -> Blocks:
    return Blocks(push="sms", pull="sms", mc=None)


# ------------------------------------------------------------------ conversion

_NOTE = (
    f"SGLang's {WORKSPACE // MB}MiB default workspace (SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB) sizes the pull "
    "buffer to {pull} and each push slot to {push}; CustomAllReduceV2.__init__ clips the rows to them "
    "(the config's clip) and sends larger sizes to nccl"
)


def _params(algorithms: tuple[str, ...], blocks: Blocks) -> dict[str, dict[str, ParamValue]]:
    grid: dict[str, ParamValue | None] = {
        "2shot_push": blocks.push,
        "1shot_push": blocks.push,
        "1shot_pull": blocks.pull,
        "2shot_pull": blocks.pull,
        "2shot_pull_mc": blocks.mc,
    }
    return {name: {"blocks": grid[name]} for name in algorithms if grid.get(name) is not None}


def table_of(
    arch: str,
    figures: dict[int, tuple[Heuristic, Heuristic]],
    blocks_for: Callable[[int], Blocks],
    provenance: Provenance,
) -> Table:
    """The table SGLang 0.5.23 runs from ``figures`` (world size -> graph and eager rows) and their block counts:
    each row clipped to the default workspace, the row as written kept in ``Plan.written``."""
    plans = []
    for world_size, rows in sorted(figures.items()):
        blocks = blocks_for(world_size)
        multicast = blocks.mc is not None
        pull, push = sglang.workspace(rows, world_size, WORKSPACE)
        for mode, row in zip(("graph", "eager"), rows, strict=True):
            written = sglang.as_run(bands_from_rules(sglang.first_match(row, multicast), FALLBACK))
            clipped = sglang.clip(row, pull, push, world_size)
            bands = sglang.as_run(bands_from_rules(sglang.first_match(clipped, multicast), FALLBACK))
            used = tuple(dict.fromkeys(name for band in (*bands, *written) for name in band.candidates))
            differs = written != bands
            plans.append(
                Plan(
                    world_size,
                    mode,
                    bands,
                    FALLBACK,
                    freeze_params(_params(used, blocks)),
                    written=written if differs else (),
                    notes=(_NOTE.format(pull=format_size(pull), push=format_size(push)),) if differs else (),
                )
            )
    plans += _rack_plans(plans, provenance)
    return Table(Platform("cuda", arch), provenance, tuple(plans), rules="sglang", origin=ORIGIN)


def _rack_plans(single: list[Plan], provenance: Provenance) -> list[Plan]:
    """0.5.23 across hosts in one NVLink clique: ``can_use_custom_all_reduce_v2`` admits the group (with a
    VMM-backed allocator) at every world size it has a config for, sized as on one host, and
    ``_is_graph_mode_supported`` is off across nodes, so both modes run the eager row; for every number of
    hosts dividing the world size."""
    eager = {p.world_size: p for p in single if p.mode == "eager"}
    out = []
    for world_size, plan in sorted(eager.items()):
        for mode in ("graph", "eager"):
            why = _RACK_NOTE + (_RACK_GRAPH_NOTE if mode == "graph" else "")
            rule = Provenance(
                provenance.source, device=provenance.device, tool="sglang", notes=f"{why}; {provenance.notes}"
            )
            out += [
                replace(plan, mode=mode, hosts=hosts, nvlink=NVLinkDomain.RACK, provenance=rule)
                for hosts in range(2, world_size + 1)
                if world_size % hosts == 0
            ]
    return out


def _provenance(device: str, notes: str) -> Provenance:
    return Provenance(
        source="published", device=device, tool="sglang", notes=f"{notes} (sglang=={RELEASE}: {SOURCE_FILE})"
    )


def table_set() -> TableSet:
    """SGLang's SM90, SM100 and SM107 tables keyed by arch, with its default as the set's default."""
    tables = {
        "9.0": table_of(
            "9.0",
            SM90,
            _sm90_blocks,
            _provenance(
                "H200",
                "SGLang custom all-reduce v2, SM90 table (every 9.x); tuned on H200; "
                "blocks: push = 132 SMs, pull 64, multicast 128 // world size from 4 ranks",
            ),
        ),
        "10.0": table_of(
            "10.0",
            SM100,
            _sm100_blocks,
            _provenance(
                "B200 (world size 16 on GB200, the 2shot_push rows on B300)",
                "SGLang custom all-reduce v2, SM100 table (10.x with minor < 7); tuned on B200; "
                "blocks: push = 148 SMs, pull = 148 at 2 ranks else 96",
            ),
        ),
        "10.7": table_of(
            "10.7",
            SM107,
            _sm107_blocks,
            _provenance(
                "Rubin (one variant)",
                "SGLang custom all-reduce v2, SM107 table (10.x with minor >= 7); tuned on one Rubin "
                "variant only; SM-count blocks left as 'sms' / 'min(192,sms)'",
            ),
        ),
    }
    default = table_of(
        "default",
        DEFAULT,
        _default_blocks,
        _provenance(
            "",
            "SGLang custom all-reduce v2 default for archs without a tuned table: world sizes 2..16, "
            "one-shot up to 1 MB, two-shot up to 16 MB, no multicast, blocks = SMs",
        ),
    )

    def engine_arch(arch: str) -> Table | None:
        major, dot, minor = arch.partition(".")
        if not (dot and major.isdigit() and minor.isdigit()):
            return None
        key = sglang.arch_configs(int(major), int(minor))
        if key == "default":
            return None  # the set's default, with its own note
        note = f"arch {arch} has no table in {ORIGIN}; SGLang's dispatch on the capability gives it arch {key}'s"
        return tables[key].with_changes(borrowed=(note,))

    return TableSet("sglang", "cuda", MappingProxyType(tables), default, rules="sglang", engine_arch=engine_arch)


def findings() -> tuple[Finding, ...]:
    """What ``artune check sglang==0.5.23`` finds, on the reference's tables: the same messages, named
    ``reference:sglang`` where the release's name a file and line."""
    refs = table_set()
    everything = {**refs.tables, **({"default": refs.default} if refs.default is not None else {})}
    holes: dict[str, list[int]] = {}
    clipped: dict[str, list[int]] = {}
    modes: set[str] = set()
    for arch, table in everything.items():
        single = [p for p in table.plans if p.hosts == 1]
        sizes = {p.world_size for p in single}
        holes[arch] = [ws for ws in range(2, max(sizes, default=1)) if ws not in sizes]
        for plan in single:
            if plan.written:
                clipped.setdefault(arch, []).append(plan.world_size)
                modes.add(plan.mode)
    out = [
        Finding(ORIGIN, archs, checks.holes_message(sizes), code="E201", world_sizes=tuple(sizes))
        for archs, sizes in checks.group_archs(holes)
    ]
    if clipped:
        where = checks.clipped_where(clipped, modes)
        archs = ", ".join(sorted(clipped, key=checks.arch_order))
        args = (WORKSPACE, *checks.clipped_args(clipped, modes))
        out.append(Finding(ORIGIN, archs, checks.clipped_message(WORKSPACE, where), code="E301", args=args))
    served: dict[str, list[str]] = {}
    for (major, minor), _sms in sglang.PROBES:
        arch = f"{major}.{minor}"
        if arch not in refs.tables:
            served.setdefault(sglang.arch_configs(major, minor), []).append(arch)
    if served:
        archs, message = checks.served_message(served)
        args = tuple(f"{arch}: {twin}" for twin, arches in served.items() for arch in arches)
        out.append(Finding(ORIGIN, archs, message, severity="note", code="S104", args=args))
    runs = f"{LEGACY_KERNEL} at world size {sglang.LEGACY_PCIE_WORLD_SIZE} up to {format_size(sglang.LEGACY_MAX_SIZE)}"
    pcie = (sglang.LEGACY_PCIE_WORLD_SIZE,)
    out.append(
        Finding(
            ORIGIN,
            ", ".join(everything),
            checks.pcie_message(runs),
            severity="note",
            code="S108",
            world_sizes=pcie,
            args=(runs,),
        )
    )
    out += checks.rack_findings(ORIGIN, dict(refs.tables), refs.default, "")
    return tuple(out)
