"""Write a table as vLLM's rows: ``CUSTOM_ALL_REDUCE_MAX_SIZES``, ``SYMM_MEM_ALL_REDUCE_MAX_SIZES``, multimem.

vLLM keeps one bound per algorithm and world size and has no graph/eager
split, so the projection is: per world size, ``custom_ar`` gets the sizes
from 0 up to the first size where it stops being a candidate in either
mode (the smaller of the two modes' bounds), torch symmetric memory the
sizes after that up to where it stops in either mode, and ``nccl`` the
rest. The symmetric-memory bound is written for vLLM's ``<`` (as
``reference:vllm``); vLLM's newest ``<=`` also admits the bound itself.
A world size is in ``_WORLD_SIZES_MULTIMEM`` when its symmetric-memory band
prefers ``symm_mem_multimem``. Everything the projection drops is listed in
``Export.dropped``.
"""

from __future__ import annotations

from artune.formats.header import Export, differences, provenance_lines
from artune.formats.source import SourceFile
from artune.formats.vllm_figures import Figures
from artune.formats.vllm_read import CUSTOM_AR_WORLD_SIZES, build
from artune.sizes import MAX_SIZE, format_size
from artune.table.model import MODES, Plan, Table

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


def _multimem_first(plan: Plan, start: int) -> bool:
    for _lower, upto, candidates in plan.spans():
        if upto is None or upto >= start:
            picks = [n for n in candidates if n in SYMM]
            return bool(picks) and picks[0] == "symm_mem_multimem"
    return False


def project(table: Table) -> tuple[dict[int, int], dict[int, int], list[int]]:
    """(custom_ar limits, symm limits, multimem world sizes) per world size: the projection."""
    custom: dict[int, int] = {}
    symm: dict[int, int] = {}
    multimem: list[int] = []
    for ws in sorted({p.world_size for p in table.plans}):
        plans = [p for m in MODES if (p := table.plan(ws, m)) is not None]
        ca = min(_prefix_end(p, ("custom_ar",), 0) for p in plans)
        sm = min(_symm_end(p, ca) for p in plans)
        custom[ws] = ca
        if sm > 0:
            symm[ws] = sm
            if all(_multimem_first(p, min(ca, sm - 1)) for p in plans):
                multimem.append(ws)
    return custom, symm, multimem


def reread(arch: str, custom: dict[int, int], symm: dict[int, int], multimem: list[int]) -> Table:
    """The table vLLM would decide with from these rows (``artune import vllm`` of the export)."""
    figures = Figures(custom_ar={arch: custom}, symm_mem={arch: symm} if symm else {}, multimem={arch: multimem})
    return build(figures, [SourceFile("<export>", "")]).tables.tables[arch]


def export_vllm(tables: list[Table], command: str) -> Export:
    """vLLM rows for each table's arch, as a Python fragment that reads back with ``artune import vllm``."""
    lines: list[str] = []
    rows: dict[str, tuple[dict[int, int], dict[int, int], list[int]]] = {}
    dropped: list[str] = []
    for table in tables:
        lines += provenance_lines(table, command)
        custom, symm, multimem = project(table)
        missing = [ws for ws in CUSTOM_AR_WORLD_SIZES if ws not in custom]
        if missing:
            dropped.append(
                f"{table.platform.arch}: no plan for world sizes {missing}; vLLM needs every one of 2, 4, 6, 8 "
                "in CUSTOM_ALL_REDUCE_MAX_SIZES: written as 0 (custom_ar never)"
            )
            custom.update({ws: 0 for ws in missing})
        rows[table.platform.arch] = (dict(sorted(custom.items())), symm, multimem)
        written = reread(table.platform.arch, *rows[table.platform.arch])
        dropped += [f"{table.platform.arch}: {d}" for d in differences(table, written)]
        if any(p.open_ended for p in table.plans):
            dropped.append(
                f"{table.platform.arch}: an open-ended band is written as 1 << 50 (artune reads it back as "
                "open-ended); vLLM clips custom_ar to its 8 MiB buffer"
            )
    lines += ["", "KiB = 1024  # already in all_reduce_utils.py", "MiB = 1024 * KiB", ""]
    lines.append("# vllm/distributed/device_communicators/all_reduce_utils.py: custom_ar runs below (<) these")
    lines.append("CUSTOM_ALL_REDUCE_MAX_SIZES = {")
    for arch, (custom, _symm, _mm) in rows.items():
        lines.append(f'    "{arch}": {{')
        lines += [f"        {ws}: {size_expr(v)},  # {format_size(v)}" for ws, v in custom.items()]
        lines.append("    },")
    lines += ["}", "", "# torch symmetric memory runs below (<) these; vLLM's newest compares <=", ""]
    lines.append("SYMM_MEM_ALL_REDUCE_MAX_SIZES = {")
    for arch, (_c, symm, _mm) in rows.items():
        if symm:
            lines.append(f'    "{arch}": {{' + ", ".join(f"{ws}: {size_expr(v)}" for ws, v in symm.items()) + "},")
    lines += ["}", "", "# vllm/distributed/device_communicators/symm_mem.py, SymmMemCommunicator:"]
    lines.append("# keep its arch keys in step with SYMM_MEM_ALL_REDUCE_MAX_SIZES (a missing one raises KeyError)")
    lines.append("_WORLD_SIZES_MULTIMEM = {")
    for arch, (_c, symm, multimem) in rows.items():
        if symm:
            lines.append(f'    "{arch}": {sorted(multimem)},')
    lines.append("}")
    return Export("\n".join(lines) + "\n", dropped)
