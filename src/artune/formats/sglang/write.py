"""Write a table as SGLang 0.5.23's ``_smXYZ_configs(num_sm)``, to paste into its configs file.

SGLang 0.5.23 (``configs/custom_all_reduce_v2.py``) tries, per mode,
``1shot_push`` up to its threshold, ``2shot_push`` up to its own,
``1shot_pull``, the multicast ``2shot_pull`` inside its range, then
``2shot_pull``; NCCL above. Projection, per world size and mode: each
threshold is the last size where its algorithm is a candidate (a later one
at least the earlier ones, so an algorithm the table does not use is
switched off the way SGLang does it: equal adjacent thresholds), and the
multicast range runs from its first size to its last. Rows are written as
0.5.23 writes its own, ``_pack_heuristic(push, pull, two_shot, Range(mc),
two_shot_push)`` (the fifth slot is ``two_shot_push_threshold``; it and the
range are left out when unused, which keeps the row valid for 0.5.19-0.5.22
too). Block counts come from the plan's ``blocks`` parameters (``"sms"`` is
written ``num_sm``). A CPU table maps by role, stated on stderr:
``shm_one_shot`` is written as one-shot push, ``shm_two_shot`` as two-shot
pull, the process group as SGLang's nccl fallback, with ``blocks = num_sm``.
An engine's table is written as its file writes it (``Plan.written``: SGLang
clips the rows to its workspace again when it runs them).

The rows are read back by 0.5.23's own order (``artune.formats.sglang.reference.table_of``,
which ``tests/test_oracle_sglang.py`` holds equal to the release's code) and
compared, as written, with the table: every difference is listed in
``Export.dropped``. ``standalone`` wraps the function in the record classes
and a capability dispatch, so that the output is a whole configs file; where
no row sets ``two_shot_push_threshold`` ``artune import sglang`` reads it
alone (with one, only a 0.5.23 communicator says where that algorithm goes,
so artune reads it from a checkout with the function pasted in).
"""

from __future__ import annotations

import math

from artune.catalog import scheme_of
from artune.errors import TableError
from artune.formats.export import Export, differences, provenance_lines
from artune.formats.sglang.reference import Blocks, table_of
from artune.formats.sglang.rules import Heuristic
from artune.sizes import MAX_SIZE
from artune.table.types import MODES, Band, ParamValue, Plan, Table

KB = 1024
MB = 1024 * KB
#: the SGLang algorithm that writes each CPU algorithm of a CPU table: the one of its scheme (``artune.catalog``)
CPU_ROLES = {
    name: next(role for role in ("1shot_push", "2shot_pull", "nccl") if scheme_of(role) is scheme_of(name))
    for name in ("shm_one_shot", "shm_two_shot", "gloo", "mpi")
}
_PUSH_GRID = ("1shot_push", "2shot_push")
_PULL_GRID = ("1shot_pull", "2shot_pull")

_PRELUDE = """\
from functools import cache
from typing import NamedTuple, Optional

import torch

KB, MB = 1024, 1024 * 1024


class Range(NamedTuple):
    min_bytes: int
    max_bytes: int

    def contains(self, n: int) -> bool:
        return self.max_bytes > 0 and self.min_bytes <= n <= self.max_bytes


class Heuristic(NamedTuple):
    one_shot_push_threshold: int
    one_shot_pull_threshold: int
    two_shot_pull_threshold: int
    mc: Range = Range(0, 0)
{push_field}

class AllReduceConfig(NamedTuple):
    graph: Heuristic
    eager: Heuristic
    num_push_blocks: int
    num_pull_blocks: int
    num_mc_blocks: Optional[int]


def _pack_heuristic(*args) -> Heuristic:
    return Heuristic(*(int(p) if isinstance(p, float) else p for p in args))

"""


def size_expr(nbytes: int, lower: bool = False) -> str:
    """``2 * MB``, ``832 * KB``, ``2.438 * MB`` or the integer: the way SGLang writes sizes, exact.

    SGLang truncates a float threshold (``int(2.438 * MB)``) and compares a
    range's lower end as a float (first size ``ceil``); ``lower`` picks the
    latter, so the written text means exactly ``nbytes``.
    """
    if nbytes >= MAX_SIZE:
        return "1 << 50"  # an open-ended band: artune reads 1 PiB as "no bound"
    if nbytes and nbytes % MB == 0:
        return f"{nbytes // MB} * MB"
    for digits in (1, 2, 3):
        mb = round(nbytes / MB, digits)
        value = mb * MB
        if (math.ceil(value) if lower else int(value)) == nbytes and mb > 0:
            return f"{mb:.{digits}f} * MB"
    if nbytes and nbytes % KB == 0:
        return f"{nbytes // KB} * KB"
    if not lower and (nbytes + 1) % KB == 0:
        return f"{size_expr(nbytes + 1)} - 1"  # an exclusive bound, as SGLang writes "8 * MB - 1"
    return str(nbytes)


def _spans(plan: Plan, name: str) -> tuple[int, int] | None:
    """First and last size where ``name`` is a candidate."""
    lo = hi = None
    for lower, upto, candidates in plan.spans():
        if name in candidates:
            lo = lower if lo is None else lo
            hi = MAX_SIZE if upto is None else upto  # open-ended: 1 << 50, which artune reads as "no bound"
    return None if lo is None or hi is None else (lo, hi)


def row(plan: Plan) -> Heuristic:
    """The plan's row in 0.5.23's order: each threshold the last size of its algorithm, at least the earlier ones."""

    def last(name: str, floor: int = 0) -> int:
        span = _spans(plan, name)
        return max(span[1] if span else 0, floor)

    push = last("1shot_push")
    two_shot_push = last("2shot_push")
    pull = last("1shot_pull", push)
    mc = _spans(plan, "2shot_pull_mc") or (0, 0)
    return Heuristic(push, pull, last("2shot_pull", pull), mc, two_shot_push)


def heuristic(h: Heuristic) -> str:
    """``_pack_heuristic(...)`` for one row, as 0.5.23 writes its own (unused trailing slots left out)."""
    args = [size_expr(h.one_shot_push), size_expr(h.one_shot_pull), size_expr(h.two_shot_pull)]
    lo, hi = (int(v) for v in h.mc)
    if hi or h.two_shot_push:
        args.append(f"Range({size_expr(lo, lower=True)}, {size_expr(hi)})" if hi else "Range(0, 0)")
    if h.two_shot_push:
        args.append(size_expr(h.two_shot_push))
    return f"_pack_heuristic({', '.join(args)})"


def _blocks(plans: list[Plan], names: tuple[str, ...]) -> ParamValue | None:
    for plan in plans:
        for name in names:
            value = plan.params_for(name).get("blocks")
            if value is not None:
                return value
    return None


def _block_expr(value: ParamValue | None) -> str:
    if value is None:
        return "None"
    if isinstance(value, str):
        return value.replace("sms", "num_sm").replace(",", ", ")
    return repr(value)


def _mapped(table: Table) -> tuple[Table, list[str]]:
    """A CPU table with its algorithms renamed by role; other tables as they are."""
    if table.platform.kind != "cpu":
        return table, []
    plans = []
    for plan in table.plans:
        bands = tuple(Band(b.upto, tuple(dict.fromkeys(CPU_ROLES.get(c, c) for c in b.candidates))) for b in plan.bands)
        used = {c for b in bands for c in b.candidates}
        params = tuple((name, (("blocks", "sms"),)) for name in sorted(used) if name != "nccl")
        plans.append(Plan(plan.world_size, plan.mode, bands, CPU_ROLES.get(plan.fallback, plan.fallback), params))
    note = (
        "a CPU table written in SGLang's shape by role: "
        + ", ".join(f"{k} -> {v}" for k, v in CPU_ROLES.items())
        + "; blocks = num_sm; other parameters (chunk_bytes) dropped"
    )
    return table.with_changes(plans=tuple(plans)), [note]


def as_written(table: Table) -> Table:
    """``table`` with the rows its engine's file writes (an engine's caps and clips undone): what an export
    writes back, since the engine applies them again when it reads the file."""
    if not any(plan.written for plan in table.plans):
        return table
    return table.with_changes(plans=tuple(plan.as_written() for plan in table.plans))


def function_name(arch: str) -> str:
    """``_sm107_configs`` for arch ``10.7``."""
    major, dot, minor = arch.partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        raise TableError(f"arch {arch!r}: SGLang keys its configs by SM version M.m; pass --arch, e.g. --arch 9.0")
    return f"_sm{major}{minor}_configs"


def export_sglang(table: Table, command: str, arch: str | None = None, standalone: bool = False) -> Export:
    """``_smXYZ_configs(num_sm)`` for ``table`` (keyed by ``arch``, default the table's)."""
    arch = arch or table.platform.arch
    name = function_name(arch)
    work, notes = _mapped(as_written(table))
    lines = provenance_lines(table, command)
    if arch != table.platform.arch:
        lines.append(f"# written as arch {arch} (the table is for {table.platform.arch})")
    lines += ["", "", "@cache", f"def {name}(num_sm: int) -> dict[int, AllReduceConfig]:", "    return {"]
    figures: dict[int, tuple[Heuristic, Heuristic]] = {}
    blocks: dict[int, Blocks] = {}
    for ws in sorted({p.world_size for p in work.plans}):
        plans = {m: p for m in MODES if (p := work.plan(ws, m)) is not None}
        graph = plans.get("graph") or plans["eager"]
        every = list(plans.values())
        figures[ws] = (row(graph), row(plans.get("eager") or graph))
        push, pull = _blocks(every, _PUSH_GRID), _blocks(every, _PULL_GRID)
        used = {name for plan in every for name in plan.algorithms}
        for grid, value in (("push", push), ("pull", pull)):
            if value is None and used & set(_PUSH_GRID if grid == "push" else _PULL_GRID):
                notes.append(f"ws={ws}: no blocks parameter for the {grid} kernels; written as num_sm")
        blocks[ws] = Blocks(push or "sms", pull or "sms", _blocks(every, ("2shot_pull_mc",)))
        lines += [
            f"        {ws}: AllReduceConfig(",
            f"            graph={heuristic(figures[ws][0])},",
            f"            eager={heuristic(figures[ws][1])},",
            f"            num_push_blocks={_block_expr(blocks[ws].push)},",
            f"            num_pull_blocks={_block_expr(blocks[ws].pull)},",
            f"            num_mc_blocks={_block_expr(blocks[ws].mc)},",
            "        ),",
        ]
    lines += ["    }", ""]
    body = "\n".join(lines)
    written = as_written(table_of(arch, figures, blocks.__getitem__, table.provenance))
    dropped = [*notes, *differences(work, written)]
    if any(p.open_ended for p in work.plans):
        dropped.append(
            "an open-ended band is written as 1 << 50 (artune reads it back as open-ended); SGLang clips it to its "
            "workspace, 16 MiB by default, and runs nccl above"
        )
    push = any(h.two_shot_push for rows in figures.values() for h in rows)
    return Export(_module(body, name, arch, push) if standalone else body, dropped)


def _module(body: str, name: str, arch: str, push: bool) -> str:
    major, _, minor = arch.partition(".")
    dispatch = (
        "\n\n@cache\ndef _get_all_reduce_configs() -> dict[int, AllReduceConfig]:\n"
        "    major, minor = torch.cuda.get_device_capability()\n"
        "    num_sm = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count\n"
        f"    if (major, minor) == ({major}, {minor}):\n"
        f"        return {name}(num_sm)\n"
        "    return {}\n"
    )
    field = "    two_shot_push_threshold: int = 0  # SGLang 0.5.23: tried after 1shot_push\n" if push else ""
    return _PRELUDE.replace("{push_field}\n", field) + body + dispatch
