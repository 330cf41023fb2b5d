"""Write a table as vLLM's rows: custom all-reduce, symmetric memory, multimem and FlashInfer's bounds.

vLLM keeps one bound per algorithm and world size and has no graph/eager
split, so the projection is, per world size and in the smaller of the two
modes: FlashInfer's all-reduce (``FI_ALLREDUCE_FUSION_MAX_SIZE_MB``, in MB,
``<=``) the sizes from 0 where it is the first candidate; ``custom_ar`` the
sizes from 0 where it comes before torch symmetric memory; symmetric memory
the sizes after that up to where it stops; ``nccl`` the rest. The
symmetric-memory bound is written for vLLM's ``<=`` (0.22 and newer: the
last size it takes). A world size is in
``_WORLD_SIZES_MULTIMEM`` when its symmetric-memory band prefers
``symm_mem_multimem``. The export is read back as vLLM would run it (its
8 MiB custom all-reduce cap, symmetric memory before the custom row applies,
FlashInfer first) and everything the projection changes is listed in
``Export.dropped``.
"""

from __future__ import annotations

from artune.formats.files import SourceFile
from artune.formats.header import Export, differences, provenance_lines
from artune.formats.vllm.figures import Figures
from artune.formats.vllm.read import CUSTOM_AR_WORLD_SIZES, build_rules
from artune.sizes import MAX_SIZE, format_size
from artune.table.diff import ONE_HOST
from artune.table.types import MODES, Plan, Table

KiB = 1024
MiB = 1024 * KiB
SYMM = ("symm_mem_multimem", "symm_mem_two_shot")


def size_expr(nbytes: int) -> str:
    """``4 * MiB``, ``MiB // 4``, ``512 * KiB`` or the integer: the way vLLM writes sizes."""
    if nbytes >= MAX_SIZE:
        return "1 << 50"  # an open-ended band: artune reads 1 PiB as "no bound"
    if nbytes and nbytes % MiB == 0:
        return f"{nbytes // MiB} * MiB"
    if nbytes and MiB % nbytes == 0:
        return f"MiB // {MiB // nbytes}"
    if nbytes and nbytes % KiB == 0:
        return f"{nbytes // KiB} * KiB"
    return str(nbytes)


def _prefix_end(plan: Plan, names: tuple[str, ...], start: int) -> int:
    """The first size from ``start`` where no candidate is in ``names`` (exclusive end; ``start``: none)."""
    end = start
    for lower, upto, candidates in plan.spans():
        if upto is not None and upto < start:
            continue
        if lower > end or not any(n in names for n in candidates):
            break
        end = MAX_SIZE if upto is None else upto + 1  # open-ended: written as 1 << 50, artune's "no bound"
    return end


def _symm_end(plan: Plan, custom_end: int) -> int:
    """Where symmetric memory stops: its rule runs from 0 (behind custom_ar) or from custom_ar's end; 0: none."""
    from_zero = _prefix_end(plan, SYMM, 0)
    if from_zero > 0:
        return from_zero
    after = _prefix_end(plan, SYMM, custom_end)
    return after if after > custom_end else 0


def _first_end(plan: Plan, name: str, among: tuple[str, ...], covered: int) -> int:
    """The first size from 0 where ``name`` is not the first of ``among`` (sizes up to ``covered`` that hold
    none of ``among`` are FlashInfer's, and do not end it); 0: ``name`` is never first."""
    end = reach = 0
    for lower, upto, candidates in plan.spans():
        picks = [n for n in candidates if n in among]
        if lower > reach:
            break
        if picks[:1] == [name]:
            end = reach = MAX_SIZE if upto is None else upto + 1
        elif not picks and upto is not None and upto <= covered:
            reach = upto + 1
        else:
            break
    return end


def _fi_bound(plan: Plan) -> int:
    """The last size of the run from 0 where FlashInfer's all-reduce is the first candidate; -1: none."""
    end = 0
    for lower, upto, candidates in plan.spans():
        if lower > end or candidates[:1] != ("flashinfer_ar",):
            break
        end = MAX_SIZE if upto is None else upto + 1
    return end - 1


def _multimem_first(plan: Plan, start: int) -> bool:
    for _lower, upto, candidates in plan.spans():
        if upto is None or upto >= start:
            picks = [n for n in candidates if n in SYMM]
            return bool(picks) and picks[0] == "symm_mem_multimem"
    return False


def project(table: Table) -> tuple[dict[int, int], dict[int, int], list[int], dict[int, int]]:
    """(custom_ar limits, symm limits, multimem world sizes, FlashInfer bounds) per world size: the projection."""
    custom: dict[int, int] = {}
    symm: dict[int, int] = {}
    multimem: list[int] = []
    flashinfer: dict[int, int] = {}
    for ws in sorted({p.world_size for p in table.plans}):
        plans = [p for m in MODES if (p := table.plan(ws, m)) is not None]
        fi = min(_fi_bound(p) for p in plans)
        if fi >= 0:
            flashinfer[ws] = fi
        ca = min(_first_end(p, "custom_ar", ("custom_ar", *SYMM), fi) for p in plans)
        sm = min(_symm_end(p, ca) for p in plans)
        if ca > 0 or ws in CUSTOM_AR_WORLD_SIZES:
            custom[ws] = ca
        if sm > 0:
            symm[ws] = sm - 1 if sm < MAX_SIZE else sm  # vLLM 0.22 on compares <=: the last size it takes
            if all(_multimem_first(p, min(ca, sm - 1)) for p in plans):
                multimem.append(ws)
    return custom, symm, multimem, flashinfer


def reread(
    arch: str, custom: dict[int, int], symm: dict[int, int], multimem: list[int], flashinfer: dict[int, int]
) -> Table:
    """The table vLLM would decide with from these rows (``artune import vllm`` of the export)."""
    figures = Figures(
        custom_ar={arch: custom},
        symm_mem={arch: symm} if symm else {},
        multimem={arch: multimem},
        fi_fusion={arch: {ws: bound / MiB for ws, bound in flashinfer.items()}} if flashinfer else None,
    )
    built = build_rules(figures, [SourceFile("<export>", "")]).tables
    return built.resolve(arch)


def _mb(bound: int) -> str:
    """``64`` or ``0.5``: a byte bound as vLLM's MB (a power-of-two division, so exact)."""
    mb = bound / MiB
    return str(int(mb)) if mb == int(mb) else repr(mb)


def export_vllm(tables: list[Table], command: str) -> Export:
    """vLLM rows for each table's arch, as a Python fragment that reads back with ``artune import vllm``."""
    lines: list[str] = []
    rows: dict[str, _Rows] = {}
    dropped: list[str] = []
    for table in tables:
        lines += provenance_lines(table, command)
        rows[table.platform.arch], lost = _table_rows(table)
        dropped += lost
    return Export("\n".join(lines + _fragment(rows)) + "\n", dropped)


_Rows = tuple[dict[int, int], dict[int, int], list[int], dict[int, int]]  # custom, symm, multimem, flashinfer


def _table_rows(table: Table) -> tuple[_Rows, list[str]]:
    """The vLLM rows of one table, and what they cannot hold."""
    dropped: list[str] = []
    custom, symm, multimem, flashinfer = project(table)
    missing = [ws for ws in CUSTOM_AR_WORLD_SIZES if ws not in custom]
    if missing:
        dropped.append(
            f"{table.platform.arch}: no plan for world sizes {missing}; vLLM needs every one of 2, 4, 6, 8 "
            "in CUSTOM_ALL_REDUCE_MAX_SIZES: written as 0 (custom_ar never)"
        )
        custom.update({ws: 0 for ws in missing})
    lonely = [ws for ws, limit in custom.items() if limit != 8 * MiB and ws not in symm]
    if lonely:
        dropped.append(
            f"{table.platform.arch}: world sizes {lonely} have no symmetric-memory row: vLLM applies a "
            "custom_ar row only where symmetric memory starts, and keeps its 8 MiB default there"
        )
    rows: _Rows = (dict(sorted(custom.items())), symm, multimem, flashinfer)
    written = reread(table.platform.arch, *rows)
    # the rows are one host's: across hosts vLLM's code decides from them (artune.formats.vllm.rack),
    # and the fragment carries none of that code to read back
    dropped += [f"{table.platform.arch}: {d}" for d in differences(table, written, {ONE_HOST})]
    if table.rules == "artune" and any(p.hosts > 1 for p in table.plans):
        dropped.append(
            f"{table.platform.arch}: plans across hosts are not written: vLLM has no rows for them (its code "
            "decides across hosts from the one-host rows and FI_MNNVL_ALLREDUCE_MAX_SIZE_MB)"
        )
    if any(p.open_ended for p in table.plans):
        dropped.append(
            f"{table.platform.arch}: an open-ended band is written as 1 << 50 (artune reads it back as "
            "open-ended); vLLM clips custom_ar to its 8 MiB buffer"
        )
    return rows, dropped


def _fragment(rows: dict[str, _Rows]) -> list[str]:
    """The Python text of every arch's rows, in the shape of vLLM's files."""
    lines: list[str] = []
    lines += ["", "KiB = 1024  # already in all_reduce_utils.py", "MiB = 1024 * KiB", ""]
    lines.append("# vllm/distributed/device_communicators/all_reduce_utils.py: custom_ar runs below (<) these")
    lines.append("CUSTOM_ALL_REDUCE_MAX_SIZES = {")
    for arch, (custom, _symm, _mm, _fi) in rows.items():
        lines.append(f'    "{arch}": {{')
        lines += [f"        {ws}: {size_expr(v)},  # {format_size(v)}" for ws, v in custom.items()]
        lines.append("    },")
    lines += ["}", "", "# torch symmetric memory runs up to (<=) these (vLLM 0.22 and newer)", ""]
    lines.append("SYMM_MEM_ALL_REDUCE_MAX_SIZES = {")
    for arch, (_c, symm, _mm, _fi) in rows.items():
        if symm:
            lines.append(f'    "{arch}": {{' + ", ".join(f"{ws}: {size_expr(v)}" for ws, v in symm.items()) + "},")
    lines += ["}", "", "# vllm/distributed/device_communicators/symm_mem.py, SymmMemCommunicator:"]
    lines.append("# keep its arch keys in step with SYMM_MEM_ALL_REDUCE_MAX_SIZES (a missing one raises KeyError)")
    lines.append("_WORLD_SIZES_MULTIMEM = {")
    for arch, (_c, symm, multimem, _fi) in rows.items():
        if symm:
            lines.append(f'    "{arch}": {sorted(multimem)},')
    lines.append("}")
    if any(fi for *_rest, fi in rows.values()):
        lines += [
            "",
            "# vllm/compilation/passes/fusion/allreduce_rms_fusion.py: FlashInfer's all-reduce runs up to (<=)",
        ]
        lines.append("# these many MB (keyed major * 10 + minor), first, where vLLM turns it on (0.29 and newer)")
        lines.append("FI_ALLREDUCE_FUSION_MAX_SIZE_MB = {")
        for arch, (*_rest, fi) in rows.items():
            if fi:
                major, _, minor = arch.partition(".")
                cells = ", ".join(f"{ws}: {_mb(b)}" for ws, b in fi.items())
                lines.append(f"    {int(major) * 10 + int(minor)}: {{{cells}}},")
        lines.append("}")
    return lines
