"""Read vLLM's all-reduce dispatch from a checkout or a release (``artune import vllm PATH``, ``vllm==0.33.0``).

``artune.formats.vllm.figures`` reads the files' tables and the facts of
their code; ``artune.formats.vllm.rules`` says what vLLM runs with them by
default, and this module turns that into artune tables and the reviewers'
findings. A release whose code turns on a path artune does not plan is
refused with a message naming it, never guessed. Where the files make vLLM
raise, clip a row or never use one, a finding says so, one line per problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from artune.errors import TableError
from artune.formats.engine import EngineImport, FindingSink
from artune.formats.files import SourceFile, describe, find_files, read_source
from artune.formats.vllm.figures import (
    CUSTOM_AR,
    CUSTOM_AR_FILE,
    FI_FUSION,
    FI_MNNVL,
    FI_ONESHOT,
    FILES,
    MULTIMEM,
    SYMM_MEM,
    UTILS,
    Figures,
    read_figures,
)
from artune.formats.vllm.rack import network_error, network_errors, rack_plans, rack_topologies
from artune.formats.vllm.rules import SYMM_NAMES, Dispatch, default_path, paths, planned_archs, table_set, world_sizes
from artune.sizes import format_size
from artune.table.check import Finding, _ranges, copied_archs, shadowed_rules
from artune.table.types import Provenance

CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)  # vLLM's _SUPPORTED_WORLD_SIZES where its file is not read
FI_ONESHOT_CAP_MB = 64  # "OneShot max size is at most 64MB / world size (FlashInfer restriction)"
#: the switches of the newest releases read (0.29-0.33), assumed where a checkout's envs.py is not given
NEWEST_DEFAULTS = {
    "VLLM_ALLREDUCE_USE_SYMM_MEM": True,
    "VLLM_ALLREDUCE_USE_FLASHINFER": True,
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "auto",
}
#: paths that are off by default on CUDA; a release that turns one on by default is refused
UNPLANNED = {
    "VLLM_USE_NCCL_SYMM_MEM": "NCCL symmetric memory",
    "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": "FlashInfer's PCIe IPC all-reduce",
    "VLLM_BATCH_INVARIANT": "batch-invariant mode",
}


def release_name(files: list[SourceFile]) -> str:
    """``vLLM 0.33.0`` for a cached release's files, ``vllm:PATH`` otherwise."""
    head = files[0].path.split("/", 1)[0]
    return f"vLLM {head.partition('==')[2]}" if head.startswith("vllm==") else f"vllm:{files[0].label}"


def dispatch(figures: Figures, release: str) -> tuple[Dispatch, list[str]]:
    """What ``figures`` run by default, and what had to be assumed because a file was not read."""
    code, assumed = figures.code, []
    env = code.env
    if env is None:
        env = NEWEST_DEFAULTS
        assumed.append("envs.py not read: vLLM 0.29-0.33's defaults (symmetric memory and FlashInfer's all-reduce on)")
    for name, what in UNPLANNED.items():
        if env.get(name):
            raise TableError(f"{release}: {name} defaults to on, so {what} runs by default; artune does not plan it")
    order = code.order or ("flashinfer_ar", "custom_ar", "symm_mem")
    flashinfer = bool(env.get("VLLM_ALLREDUCE_USE_FLASHINFER")) and "flashinfer_ar" in order
    if flashinfer and code.fi_inclusive is None:
        raise TableError(
            f"{release}: FlashInfer's all-reduce is on by default, and should_use_fi_ar's size test "
            "is not 'nbytes > self.max_workspace_size': artune does not know what it takes"
        )
    if code.custom_ar_world_sizes is None:
        assumed.append("custom_all_reduce.py not read: CustomAllreduce's 8 MiB default at world sizes 2, 4, 6, 8")
    sizes = code.custom_ar_world_sizes or CUSTOM_AR_WORLD_SIZES
    if code.custom_ar_ws_limit is not None:
        sizes = tuple(ws for ws in sizes if ws <= code.custom_ar_ws_limit)
    d = Dispatch(
        release=release,
        custom_ar=figures.custom_ar or {},
        symm_mem=figures.symm_mem,
        multimem=figures.multimem,
        fi_sizes_mb=figures.fi_fusion or {},
        fi_tuned_mb=figures.fi_mnnvl or {},
        custom_ar_on=code.custom_ar_enabled is not False,
        custom_ar_max=code.custom_ar_max or 8192 * 1024,
        custom_ar_world_sizes=sizes,
        custom_ar_inclusive=code.custom_ar_inclusive,
        custom_ar_needs_symm=code.custom_ar_needs_symm,
        custom_ar_checks_ws=code.custom_ar_checks_ws,
        symm_mem_on=bool(env.get("VLLM_ALLREDUCE_USE_SYMM_MEM")),
        symm_inclusive=figures.symm_inclusive,
        flashinfer_on=flashinfer,
        fi_tuned_on=env.get("VLLM_FLASHINFER_ALLREDUCE_BACKEND", "auto") in ("auto", "mnnvl"),
        fi_inclusive=bool(code.fi_inclusive),
        fi_tuned_offset=code.fi_tuned_offset,
        order=order,
        fi_multinode_cc=code.fi_multinode_cc,
        custom_ar_mnnvl_cc=code.custom_ar_mnnvl_cc,
        symm_rendezvous_caught=code.symm_rendezvous_caught,
    )
    return d, assumed


def _describe(files: list[SourceFile]) -> str:
    """The files read, as ``describe`` says it; a release's as ``vllm==0.33.0: a.py, b.py``."""
    heads = {f.path.split("/", 1)[0] for f in files}
    if len(heads) == 1 and next(iter(heads)).startswith("vllm=="):
        return f"{next(iter(heads))}: {', '.join(f.path.rsplit('/', 1)[-1] for f in files)}"
    return describe(files)


def _row_tables(figures: Figures) -> dict[str, Mapping[str, object]]:
    tables: dict[str, Mapping[str, object]] = {CUSTOM_AR: figures.custom_ar or {}}
    if figures.symm_mem:
        tables[SYMM_MEM] = figures.symm_mem
    if figures.multimem is not None:
        tables[MULTIMEM] = {k: sorted(v) for k, v in figures.multimem.items()}
    return tables  # the tables a new arch's rows are copied into; FlashInfer's are keyed and tuned apart


def build(figures: Figures, files: list[SourceFile]) -> EngineImport:
    """The tables and findings of vLLM ``figures`` read from ``files``."""
    origin = f"vllm:{files[0].label}"
    release = release_name(files)
    d, assumed = dispatch(figures, release)
    copies = {arch: (parent, equal, total) for arch, parent, equal, total in copied_archs(_row_tables(figures))}
    read = _describe(files)
    runs = f"what {release} runs by default"
    extra = f"; {'; '.join(assumed)}" if assumed else ""

    def provenance(arch: str) -> Provenance:
        if arch in copies:
            parent, equal, total = copies[arch]
            return Provenance(
                source="inherited",
                inherited_from=parent,
                tool="vllm",
                notes=f"vLLM's {arch} rows equal {parent}'s in {equal} of {total} tables; {runs} ({read}){extra}",
            )
        return Provenance(source="published", tool="vllm", notes=f"{runs} on {arch} ({read}){extra}")

    default = Provenance(
        source="published",
        tool="vllm",
        notes=f"{runs} on an arch missing from its tables: {default_path(d)} ({read}){extra}",
    )
    tables = table_set(d, origin, provenance, default, across_hosts=rack_plans)
    return EngineImport("vllm", tables, reader_findings(figures, d, origin, files[0].path), tuple(files))


def reader_findings(figures: Figures, d: Dispatch, origin: str, first: str) -> tuple[Finding, ...]:
    """The reviewers' findings on ``figures`` run as ``d``, for the tables named ``origin`` (``first``: the
    file a finding without a line of its own names; "" where there is no file, as for reference:vllm)."""
    copies = {arch: (parent, equal, total) for arch, parent, equal, total in copied_archs(_row_tables(figures))}
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
        )
        return
    for arch, (parent, equal, total) in copies.items():
        fi = "" if figures.fi_fusion is None else _fi_step(figures, arch, parent)
        sink.add(
            figures.line(CUSTOM_AR, arch),
            arch,
            f"{arch} = {parent} in {equal} of {total} tables: measured, or inherited?{fi}",
            code="E101",
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
        seen: set[str] = set()
        for ws in world_sizes(d, arch):
            for error in paths(d, arch, ws).errors:
                if error not in seen:  # the multimem KeyError is the arch's, not one world size's
                    seen.add(error)
                    table = MULTIMEM if MULTIMEM in error else CUSTOM_AR
                    where = ws if f"world size {ws}" in error else None
                    sink.add(figures.line(table, arch), arch, error, where, severity="error", code="E202")
    if figures.multimem is not None:
        for arch, sizes in figures.multimem.items():
            if arch not in figures.symm_mem:
                sink.add(
                    figures.line(MULTIMEM, arch),
                    arch,
                    f"{arch} is in {MULTIMEM} but not in {SYMM_MEM}: torch symmetric memory is disabled at "
                    f"start-up on {arch}, so the multimem list is never used (the two tables must stay in step)",
                    code="V102",
                )
                continue
            unused = [ws for ws in sizes if ws not in figures.symm_mem[arch]]
            if unused:
                sink.add(
                    figures.line(MULTIMEM, arch),
                    arch,
                    f"{MULTIMEM}[{arch!r}] lists world sizes {unused} that {SYMM_MEM} does not: never used",
                    code="V102",
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
            )
        sizes = network_errors(d, arch)
        if sizes:
            sink.add(figures.line(SYMM_MEM, arch), arch, network_error(d, sizes), severity="error", code="N103")
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
            )


def _int_arch(arch: str) -> str:
    major, _, minor = arch.partition(".")
    return f"{major}{minor}"


def read_vllm(path: str) -> EngineImport:
    """vLLM's tables from a checkout, a release folder or one of its files."""
    base, found = find_files(path, FILES, "vLLM")
    if base.is_file():
        siblings = [base.parent / Path(rel).name for rel in FILES[1:5]]
        found += [p for p in siblings if p.is_file() and p != base]
    elif not (base / UTILS).is_file() and not (base / CUSTOM_AR_FILE).is_file():
        raise TableError(f"{path}: neither {UTILS} nor {CUSTOM_AR_FILE} is here; is this a vLLM checkout?")
    files = [read_source(p) for p in found]
    return build(read_figures(files), files)
