"""The reviewers' findings on vLLM's tables, as vLLM runs them: copies, raises, unused and capped rows, gaps.

Each finding names the file and line of the row it is about (``Figures.line``)
and is computed from the tables and from vLLM's rules (``Dispatch``) as
fitted to the release's own code (``artune.formats.vllm.dispatch``), so it
says what the code does with the rows: where it raises, which rows it never
uses or caps, which world sizes have no path, which rows never run because an
earlier path takes every size they hold, and what runs across hosts.
"""

from __future__ import annotations

from collections.abc import Mapping

from artune.formats.engine import FindingSink
from artune.formats.vllm.figures import CUSTOM_AR, FI_FUSION, FI_MNNVL, FI_ONESHOT, MULTIMEM, SYMM_MEM, Figures
from artune.formats.vllm.rack import network_error, network_errors, rack_topologies
from artune.formats.vllm.rules import (
    SYMM_NAMES,
    Dispatch,
    RowError,
    default_path,
    paths,
    planned_archs,
    world_sizes,
)
from artune.sizes import format_size
from artune.table.check import Finding, _ranges, copied_archs, shadowed_rules

FI_ONESHOT_CAP_MB = 64  # "OneShot max size is at most 64MB / world size (FlashInfer restriction)"


def row_tables(figures: Figures) -> dict[str, Mapping[str, object]]:
    """The tables a new arch's rows are copied into (FlashInfer's are keyed and tuned apart)."""
    tables: dict[str, Mapping[str, object]] = {CUSTOM_AR: figures.custom_ar or {}}
    if figures.symm_mem:
        tables[SYMM_MEM] = figures.symm_mem
    if figures.multimem is not None:
        tables[MULTIMEM] = {k: sorted(v) for k, v in figures.multimem.items()}
    return tables


def reader_findings(figures: Figures, d: Dispatch, origin: str, first: str) -> tuple[Finding, ...]:
    """The reviewers' findings on ``figures`` run as ``d``, for the tables named ``origin`` (``first``: the
    file a finding without a line of its own names; "" where there is no file, as for reference:vllm)."""
    copies = {arch: (parent, equal, total) for arch, parent, equal, total in copied_archs(row_tables(figures))}
    sink = FindingSink(origin)
    _findings(figures, d, copies, first, sink)
    return sink.done()


def _findings(
    figures: Figures, d: Dispatch, copies: dict[str, tuple[str, int, int]], first: str, sink: FindingSink
) -> None:
    where = figures.line(CUSTOM_AR) or first
    if figures.custom_ar is None:
        sink.add(
            first,
            "*",
            f"{d.release} has no per-arch tables (no {CUSTOM_AR}): on every arch it runs {default_path(d)}",
            severity="note",
            code="V101",
            world_sizes=d.custom_ar_sizes(),
            args=(default_path(d),),
        )
        return
    for arch, (parent, equal, total) in copies.items():
        fi = "" if figures.fi_fusion is None else _fi_step(figures, arch, parent)
        sink.add(
            figures.line(CUSTOM_AR, arch),
            arch,
            f"{arch} = {parent} in {equal} of {total} tables: measured, or inherited?{fi}",
            code="E101",
            args=(parent, equal, total, fi),
        )
    _raises(figures, d, sink)
    _unused_rows(figures, d, sink)
    _capped(figures, d, sink)
    _no_path(figures, d, where, sink)
    _never_run(figures, d, sink)
    _fi_findings(figures, d, sink)
    _rack_findings(figures, d, sink)


def _fi_step(figures: Figures, arch: str, parent: str) -> str:
    mine, theirs = (figures.fi_fusion or {}).get(arch), (figures.fi_fusion or {}).get(parent) or {}
    if mine is None or mine == theirs:
        return ""
    moved = [
        f"ws {ws}: {_mb(mine.get(ws))} ({parent}: {_mb(theirs.get(ws))})"
        for ws in sorted({*mine, *theirs})
        if mine.get(ws) != theirs.get(ws)
    ]
    return f"; its {FI_FUSION} row differs: {', '.join(moved)}"


def _mb(value: float | None) -> str:
    return "none" if value is None else f"{value:g} MB"


def _raises(figures: Figures, d: Dispatch, sink: FindingSink) -> None:
    for arch in planned_archs(d):
        seen: set[RowError] = set()
        for ws in world_sizes(d, arch):
            for error in paths(d, arch, ws).errors:
                if error not in seen:  # the multimem KeyError is the arch's, not one world size's
                    seen.add(error)
                    line = figures.line(MULTIMEM if error.multimem else CUSTOM_AR, arch)
                    where = error.world_size
                    named = (where,) if where else ()
                    message = error.message
                    sink.add(
                        line, arch, message, where, severity="error", code="E202", world_sizes=named, args=(message,)
                    )
    if figures.multimem is not None:
        for arch, sizes in figures.multimem.items():
            if arch not in figures.symm_mem:
                sink.add(
                    figures.line(MULTIMEM, arch),
                    arch,
                    f"{arch} is in {MULTIMEM} but not in {SYMM_MEM}: torch symmetric memory is disabled at "
                    f"start-up on {arch}, so the multimem list is never used (the two tables must stay in step)",
                    code="V102",
                    args=tuple(sizes),
                )
                continue
            unused = [ws for ws in sizes if ws not in figures.symm_mem[arch]]
            if unused:
                sink.add(
                    figures.line(MULTIMEM, arch),
                    arch,
                    f"{MULTIMEM}[{arch!r}] lists world sizes {unused} that {SYMM_MEM} does not: never used",
                    code="V102",
                    args=tuple(unused),
                )


def _unused_rows(figures: Figures, d: Dispatch, sink: FindingSink) -> None:
    """Rows that vLLM's defaults never read: the symmetric-memory path off, or custom_ar's row without it."""
    if not d.symm_mem_on and (figures.symm_mem or figures.custom_ar):
        sink.add(
            figures.line(SYMM_MEM) or figures.line(CUSTOM_AR),
            "*",
            f"VLLM_ALLREDUCE_USE_SYMM_MEM is off by default in {d.release}: neither {SYMM_MEM} nor {CUSTOM_AR} "
            f"is used with default settings (custom_ar keeps its {format_size(d.custom_ar_max)} default)",
            code="V103",
            args=(d.custom_ar_max,),
        )
        return
    lonely = [
        f"{arch} ws={ws}"
        for arch, rows in (figures.custom_ar or {}).items()
        for ws in rows
        if ws in d.custom_ar_sizes() and not d.symm_up(arch, ws) and d.custom_ar_needs_symm
    ]
    if lonely:
        sink.add(
            figures.line(CUSTOM_AR, lonely[0].split()[0]),
            "*",
            f"{CUSTOM_AR} rows never used: a row applies only where torch symmetric memory starts, and "
            f"{SYMM_MEM} has no row for {', '.join(lonely)} (custom_ar keeps {format_size(d.custom_ar_max)} there)",
            code="V103",
            args=(*lonely, d.custom_ar_max),
        )


def _capped(figures: Figures, d: Dispatch, sink: FindingSink) -> None:
    capped = [
        (arch, ws, row)
        for arch, rows in (figures.custom_ar or {}).items()
        for ws, row in rows.items()
        if row > d.custom_ar_max and ws in d.custom_ar_sizes() and (d.symm_up(arch, ws) or not d.custom_ar_needs_symm)
    ]
    if capped:
        arch, ws, _row = capped[0]
        rows = ", ".join(f"{a} ws={w}: {format_size(r)}" for a, w, r in capped)
        sink.add(
            figures.line(CUSTOM_AR, arch, ws),
            "*",
            f"custom_ar rows above {format_size(d.custom_ar_max)} are capped by CustomAllreduce's default max_size "
            f"({rows}): sizes from {format_size(d.custom_ar_max)} go to the next path",
            code="E301",
            args=(d.custom_ar_max, rows),
        )


def _no_path(figures: Figures, d: Dispatch, where: str, sink: FindingSink) -> None:
    """World sizes where no path runs: vLLM sends every size to nccl there, silently."""
    archs = planned_archs(d)
    top = max([16, *(ws for arch in archs for ws in world_sizes(d, arch))])
    missing = {arch: [ws for ws in range(2, top + 1) if ws not in world_sizes(d, arch)] for arch in archs}
    if not any(missing.values()):
        return
    common = sorted(set.intersection(*(set(m) for m in missing.values())))
    rest = {arch: [ws for ws in m if ws not in common] for arch, m in missing.items()}
    others = "; ".join(f"{_ranges(m)} on {arch}" for arch, m in rest.items() if m)
    text = f"world sizes {_ranges(common)} have no path on any arch" if common else "some world sizes have no path"
    sink.add(
        where,
        "*",
        f"{text}{f' (also {others})' if others else ''}: vLLM sends every size to nccl there, silently",
        code="E201",
        world_sizes=common,
        args=(others,),
    )


def _never_run(figures: Figures, d: Dispatch, sink: FindingSink) -> None:
    """Rows whose every size an earlier path takes first: under vLLM's defaults they never run."""
    dead: dict[tuple[str, str], list[str]] = {}
    for arch in planned_archs(d):
        for ws in world_sizes(d, arch):
            rules = paths(d, arch, ws).run
            seen: set[str] = set()
            for index, by in shadowed_rules(rules):
                name = rules[index].algorithm
                if name in seen:
                    continue
                seen.add(name)
                group = "symm_mem" if name in SYMM_NAMES else name
                dead.setdefault((group, " and ".join(by)), {}).setdefault(arch, []).append(ws)
    for (name, by), places in dead.items():
        table = {"custom_ar": CUSTOM_AR, "symm_mem": SYMM_MEM}.get(name, name)
        where = "; ".join(f"{arch} ws {', '.join(map(str, sizes))}" for arch, sizes in places.items())
        sink.add(
            figures.line(table, next(iter(places))),
            "*",
            f"{table} rows that never run with vLLM's defaults: {by} takes every size they hold first, for the 2-D "
            f"fp16/bf16/fp32 inputs it takes ({where})",
            code="V104",
            args=(table, by, where),
        )


def _fi_findings(figures: Figures, d: Dispatch, sink: FindingSink) -> None:
    for arch, rows in (figures.fi_oneshot or {}).items():
        for ws, mb in rows.items():
            cap = FI_ONESHOT_CAP_MB / ws
            if mb > cap:
                sink.add(
                    figures.line(FI_ONESHOT, arch, ws),
                    arch,
                    f"FlashInfer one-shot bound {mb} MB is above FlashInfer's 64MB / world size = {cap:g} MB: "
                    "clipped by its workspace",
                    ws,
                    code="E301",
                    args=(mb, cap),
                )
    if figures.fi_world_sizes is not None:
        for arch, rows in (figures.fi_fusion or {}).items():
            for ws in rows:
                if ws not in figures.fi_world_sizes:
                    sink.add(
                        figures.line(FI_FUSION, arch, ws),
                        arch,
                        f"{FI_FUSION} row for world size {ws} is never used: FI_SUPPORTED_WORLD_SIZES = "
                        f"{figures.fi_world_sizes}",
                        ws,
                        code="V105",
                        args=tuple(figures.fi_world_sizes),
                    )
    orphans = [
        (arch, ws, nodes)
        for (arch, ws, nodes) in figures.fi_mnnvl or {}
        if not (figures.fi_fusion or {}).get(arch, {}).get(ws)
    ]
    if orphans:
        arch, ws, nodes = orphans[0]
        keys = ", ".join(f"({a}, ws={w}, nodes={n})" for a, w, n in orphans)
        sink.add(
            figures.line(FI_MNNVL, arch, ws, nodes),
            "*",
            f"{FI_MNNVL} rows never used: FlashInfer's all-reduce starts only where {FI_FUSION} has a row "
            f"for the arch and world size ({keys})",
            code="V105",
            args=(keys,),
        )


def _rack_findings(figures: Figures, d: Dispatch, sink: FindingSink) -> None:
    """Across hosts: where each arch has a multi-node path (N101), tuned multi-node rows without a one-host
    row at their world size (N102), and world sizes where the release raises over a network (N103)."""
    for arch in planned_archs(d):
        runs = {
            (ws, hosts): sorted({r.algorithm for r in paths(d, arch, ws, True, hosts).run})
            for ws, hosts in rack_topologies(d, arch)
        }
        grouped: dict[tuple[int, tuple[str, ...]], list[int]] = {}
        for (ws, hosts), names in runs.items():
            if names:
                grouped.setdefault((ws, tuple(names)), []).append(hosts)
        if grouped:
            listed = "; ".join(
                f"ws={ws} on {', '.join(map(str, hosts))} hosts: {', '.join(names)}"
                for (ws, names), hosts in grouped.items()
            )
            sink.add(
                figures.line(FI_MNNVL, arch) or figures.line(SYMM_MEM, arch) or figures.line(CUSTOM_AR, arch),
                arch,
                f"across hosts in one NVLink domain (nvlink=rack) {d.release} starts {listed}; every other world "
                "size and node count across hosts, and every one across hosts joined over a network, runs nccl",
                severity="note",
                code="N101",
                # where and on how many hosts: a release that runs other algorithms there is no new note
                args=tuple(f"ws={ws} on {', '.join(map(str, hosts))} hosts" for (ws, _n), hosts in grouped.items()),
            )
        sizes = network_errors(d, arch)
        if sizes:
            message = network_error(d, sizes)
            sink.add(figures.line(SYMM_MEM, arch), arch, message, severity="error", code="N103", world_sizes=sizes)
    for arch, ws, nodes in figures.fi_mnnvl or {}:
        if nodes > 1 and (arch, ws, 1) not in (figures.fi_mnnvl or {}):
            fusion = (figures.fi_fusion or {}).get(arch, {}).get(ws)
            one_host = f"{FI_FUSION}'s {_mb(fusion)}" if fusion else "no FlashInfer path"
            sink.add(
                figures.line(FI_MNNVL, arch, ws, nodes),
                arch,
                f"{FI_MNNVL} has a multi-node row ({_int_arch(arch)}, {ws}, {nodes}) but no one-host row "
                f"({_int_arch(arch)}, {ws}, 1): on one host ws={ws} runs {one_host}, tuned for neither",
                ws,
                code="N102",
                hosts=nodes,
                args=(nodes, one_host),
            )


def _int_arch(arch: str) -> str:
    major, _, minor = arch.partition(".")
    return f"{major}{minor}"
