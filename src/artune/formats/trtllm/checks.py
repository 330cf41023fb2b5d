"""What a reviewer of TensorRT-LLM's lookup tables acts on: findings ``R101``-``R110``, each at its file and line.

- ``R101`` an arch that runs another SM version's table (the SM mapping: B300
  and Rubin run B200's), so nobody measured it there;
- ``R102`` a world size of real deployments (TP 3, 6, 16) read from another
  row by the truncated ``log2``, or out of range;
- ``R103`` a hidden size of real models (5120, 6144, 7168, 12288) read from
  another row, and hidden sizes beyond the table;
- ``R104`` token counts beyond the table (the out-of-range strategy runs);
- ``R105`` a fused-op plane that is all NCCL (the fused kernels never run);
- ``R106`` a ``k...Choice`` constant that disagrees with the table it sizes;
- ``R107`` flips along the token axis: a strategy that comes back after
  another took over, which a per-cell argmin over one noisy run writes and no
  evidence in the file supports (``artune review`` with measurements says
  which the measurements back);
- ``R108`` cells the workspace cap overrides (bf16): the row says a custom
  kernel, ``AllreduceOp`` sends the message to NCCL;
- ``R109`` (note) the PyTorch flow's autotuner gate: under AUTO this table
  decides only with ``TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1``;
- ``R110`` calls the engine's own code has no answer for: it throws, or its
  behaviour is undefined (a fused op ``mapFusionOpToIndex`` lacks, dereferenced).

R101-R108 read the header's tables, indices and SM rules where the revision
writes them in TensorRT-LLM's shape (``LookupHeader``); a revision that does
not simply has fewer of them (its decisions are read all the same).
"""

from __future__ import annotations

from collections.abc import Mapping

from artune.formats.trtllm.enums import ALGORITHMS, Enums
from artune.formats.trtllm.header import LookupHeader, StrategyGrid
from artune.formats.trtllm.tables import Gap
from artune.table.check import Finding

#: archs a reviewer asks about, with the GPU each is
ARCHS = {
    "8.0": "A100",
    "8.9": "L40S",
    "9.0": "H100/H200",
    "10.0": "B200",
    "10.3": "B300",
    "10.7": "Rubin",
    "12.0": "RTX PRO 6000",
}
WORLD_SIZES = (3, 6, 16)
HIDDEN_SIZES = {5120: "", 6144: "", 7168: " (DeepSeek-V3)", 12288: "", 16384: ""}
BF16 = 2


def header_findings(
    header: LookupHeader, enums: Enums, gaps: Mapping[str, list[Gap]], gate: str | None
) -> list[Finding]:
    """Every R1xx finding of one revision's header; ``gaps`` the calls its code has no answer for, by arch."""
    name = f"trtllm:{header.file.label}"
    out = _mapped_sms(header, name)
    full = {"tp", "hidden", "tokens"} <= set(header.indices)
    for sm, grid in header.grids.items() if full else ():
        arch = f"{sm // 10}.{sm % 10}"
        out += _rows_read_elsewhere(header, name, arch, grid)
        out += _planes(header, enums, name, arch, grid)
        out += _flips(header, enums, name, arch, grid)
        out += _capped(header, enums, name, arch, grid)
        out += _constants(header, name, arch, grid)
    for arch, found in gaps.items():
        out += _gaps(header, name, arch, found)
    if gate is not None:
        where = gate or header.where(header.select_line)
        out.append(
            Finding(
                name,
                "any",
                "under AllReduceStrategy.AUTO the PyTorch flow asks its autotuner "
                "(tunable_allreduce) unless TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1: these tables decide only "
                "with it off, and in the C++ flow",
                source=where,
                severity="note",
                code="R109",
            )
        )
    return out


def _gaps(header: LookupHeader, name: str, arch: str, gaps: list[Gap]) -> list[Finding]:
    """R110: per fused-op group and reason, the calls the engine's own code has no answer for."""
    grouped: dict[tuple[tuple[str, ...], str], list[Gap]] = {}
    for gap in gaps:
        grouped.setdefault((gap.fusions, f"{gap.kind}: {gap.why}"), []).append(gap)
    where = header.where(header.select_line)
    out = []
    for (fusions, why), found in grouped.items():
        ranges = sorted({(g.world_sizes, g.hidden) for g in found})
        shown = "; ".join(f"ws {_range(ws)} hidden {_range(h)}" for ws, h in ranges[:3])
        more = f"; and {len(ranges) - 3} more" if len(ranges) > 3 else ""
        message = (
            f"{'/'.join(fusions)}: the engine's own code has no strategy ({why}) at {shown}{more}: artune has no "
            "plan there; does the caller ever ask it?"
        )
        out.append(
            Finding(name, arch, message, source=where, code="R110", args=("/".join(fusions), why, *map(str, ranges)))
        )
    return out


def _range(bounds: tuple[int, int | None]) -> str:
    lo, hi = bounds
    return f"{lo}+" if hi is None else (str(lo) if lo == hi else f"{lo}..{hi}")


def _finding(
    header: LookupHeader,
    name: str,
    code: str,
    arch: str,
    message: str,
    line: int,
    ws: int | None = None,
    args: tuple[str | int, ...] = (),
) -> Finding:
    return Finding(name, arch, message, ws, None, header.where(line), "warning", code=code, args=args)


def _mapped_sms(header: LookupHeader, name: str) -> list[Finding]:
    """R101: the archs whose SM the header maps to another SM's table."""
    out: list[Finding] = []
    for arch, gpu in ARCHS.items():
        sm = int(arch.split(".")[0]) * 10 + int(arch.split(".")[1])
        mapped = header.table_sm(sm)
        if mapped != sm and mapped in header.grids:
            rule = [r for r in header.sm_rules if r.applies(sm)][-1]
            message = f"{gpu} (SM {sm}) runs the SM{mapped} table: measured on {gpu}, or inherited?"
            out.append(_finding(header, name, "R101", arch, message, rule.line, args=(sm, mapped)))
    return out


def _rows_read_elsewhere(header: LookupHeader, name: str, arch: str, grid: StrategyGrid) -> list[Finding]:
    """R102-R104: the world sizes, hidden sizes and token counts that read another row or none."""
    tp, hidden, tokens = header.indices["tp"], header.indices["hidden"], header.indices["tokens"]
    out: list[Finding] = []
    rows = len(grid.root.items)
    for ws in WORLD_SIZES:
        index = tp.of(ws)
        if index is None or index >= rows:
            message = (
                f"TP {ws} is out of range (the table has TP rows up to {tp.row(rows - 1)}): "
                f"every message runs {header.fallback}"
            )
            out.append(_finding(header, name, "R102", arch, message, tp.line, ws, (tp.row(rows - 1),)))
        elif tp.row(index) != ws:
            message = f"TP {ws} reads the TP={tp.row(index)} row (truncated log2): measured at TP {ws}?"
            out.append(_finding(header, name, "R102", arch, message, tp.line, ws, (tp.row(index),)))
    plane = grid.root.items[0]
    count = len(plane.items[0].items) if hasattr(plane, "items") and plane.items else 0  # type: ignore[union-attr]
    for size, model in HIDDEN_SIZES.items():
        index = hidden.of(size)
        if index is None or index >= count:
            message = (
                f"hidden {size}{model} is out of range (rows up to {hidden.row(count - 1)}): "
                f"every message runs {header.fallback}"
            )
            out.append(_finding(header, name, "R103", arch, message, hidden.line, args=(size, hidden.row(count - 1))))
        elif hidden.row(index) != size:
            message = f"hidden {size}{model} reads the {hidden.row(index)} row (truncated log2)"
            out.append(_finding(header, name, "R103", arch, message, hidden.line, args=(size, hidden.row(index))))
    lengths = {len(row.items) for row in grid.rows().values()}
    message = (
        f"tokens from {tokens.row(min(lengths))} up are beyond the table: {header.fallback} "
        "for every message of that many tokens, whatever its size"
    )
    out.append(_finding(header, name, "R104", arch, message, tokens.line, args=(tokens.row(min(lengths)),)))
    return out


def _strategy(enums: Enums, value: int) -> str:
    return enums.strategy_name(value) or str(value)


def _fusion_names(header: LookupHeader, index: int) -> str:
    return "/".join(op for op, i in header.fusion_index.items() if i == index) or f"plane {index}"


def _planes(header: LookupHeader, enums: Enums, name: str, arch: str, grid: StrategyGrid) -> list[Finding]:
    out: list[Finding] = []
    nccl = enums.strategy.get("NCCL")
    by_plane: dict[int, list[int]] = {}
    lines: dict[int, int] = {}
    for (a, b, _c), row in grid.rows().items():
        if all(v == nccl for v in row.items):
            by_plane.setdefault(b, []).append(a)
            lines.setdefault(b, row.line)
    rows_per_plane = {b: sum(1 for (_a, b2, _c) in grid.rows() if b2 == b) for b in by_plane}
    for b, tps in sorted(by_plane.items()):
        if len(tps) == rows_per_plane[b]:
            tp_rows = sorted({header.indices["tp"].row(a) for a in tps})
            why = "measured, or never benchmarked?"
            if "NVFP4" in _fusion_names(header, b) and grid.sm < 100:
                why = (
                    "tests/microbenchmarks/all_reduce.py (03d89c48) does not benchmark NVFP4 below SM 100: "
                    "nothing measured it"
                )
            out.append(
                Finding(
                    name,
                    arch,
                    f"the {_fusion_names(header, b)} plane is all NCCL at TP "
                    f"{', '.join(map(str, tp_rows))}: the fused kernels never run for it; {why}",
                    source=header.where(lines[b]),
                    code="R105",
                    args=(_fusion_names(header, b), *tp_rows),
                )
            )
    return out


def _flips(header: LookupHeader, enums: Enums, name: str, arch: str, grid: StrategyGrid) -> list[Finding]:
    """Rows whose strategy comes back after another took over, one finding per (TP, plane)."""
    out: list[Finding] = []
    tokens = header.indices["tokens"]
    grouped: dict[tuple[int, int], list[tuple[int, str, int]]] = {}
    for (a, b, c), row in grid.rows().items():
        values = list(row.items)
        runs = [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]
        if len(runs) == len(set(runs)):
            continue
        seen: list[int] = []
        at = 0
        for i, v in enumerate(values):
            if i and v != values[i - 1] and v in seen:
                at = i
                break
            if v not in seen:
                seen.append(v)
        path = ">".join(_strategy(enums, v) for v in runs)
        grouped.setdefault((a, b), []).append(
            (header.indices["hidden"].row(c), f"{path} (back at tokens {tokens.row(at)})", row.line)
        )
    for (a, b), rows in sorted(grouped.items()):
        ws = header.indices["tp"].row(a)
        shown = "; ".join(f"hidden {h}: {text}" for h, text, _line in rows[:3])
        more = f"; and {len(rows) - 3} more" if len(rows) > 3 else ""
        out.append(
            Finding(
                name,
                arch,
                f"{_fusion_names(header, b)}: strategies flip along tokens in {len(rows)} "
                f"hidden rows ({shown}{more}); no evidence here supports a strategy winning back",
                ws,
                None,
                header.where(rows[0][2]),
                code="R107",
                args=(_fusion_names(header, b), *(f"hidden {h}: {text}" for h, text, _line in rows)),
            )
        )
    return out


def _capped(header: LookupHeader, enums: Enums, name: str, arch: str, grid: StrategyGrid) -> list[Finding]:
    """Cells the workspace cap overrides for bf16 messages (the header writes a kernel, NCCL runs)."""
    if header.workspace is None:
        return []  # the revision's cap could not be run
    nccl = enums.strategy.get("NCCL")
    tp, hidden, tokens = header.indices["tp"], header.indices["hidden"], header.indices["tokens"]
    hits: dict[int, list[str]] = {}
    lines: dict[int, int] = {}
    for (a, b, c), row in grid.rows().items():
        if b != 0:
            continue  # one plane is enough to show the cap; the others clip at the same sizes
        ws, h = tp.row(a), hidden.row(c)
        cap = header.workspace.cap(ws)
        for k, value in enumerate(row.items):
            if value != nccl and tokens.row(k + 1) - 1 > 0 and tokens.row(k) * h * BF16 > cap:
                hits.setdefault(ws, []).append(f"hidden {h} from {tokens.row(k)} tokens ({_strategy(enums, value)})")
                lines.setdefault(ws, row.line)
                break
    return [
        Finding(
            name,
            arch,
            f"the workspace cap ({header.workspace.cap(ws)} bytes) sends bf16 messages to NCCL "
            f"where the row names a kernel: {'; '.join(found[:3])}"
            + (f"; and {len(found) - 3} more" if len(found) > 3 else ""),
            ws,
            None,
            header.where(lines[ws]),
            code="R108",
            args=(header.workspace.cap(ws), *found),
        )
        for ws, found in sorted(hits.items())
    ]


def _constants(header: LookupHeader, name: str, arch: str, grid: StrategyGrid) -> list[Finding]:
    rows = grid.rows()
    sizes = {
        "kTpSizeChoice": {len(grid.root.items)},
        "kFusionOpChoice": {len(p.items) for p in grid.root.items},
        "kHiddenSizeChoice": {len(f.items) for p in grid.root.items for f in p.items},
        "kNumTokensChoice": {len(r.items) for r in rows.values()},
    }
    out: list[Finding] = []
    for constant, have in sizes.items():
        if constant in header.constants and (header.constants[constant][0] not in have or len(have) > 1):
            value, line = header.constants[constant]
            out.append(
                Finding(
                    name,
                    arch,
                    f"{constant} = {value}, but {grid.name}'s rows have "
                    f"{'/'.join(map(str, sorted(have)))} entries: which is right?",
                    source=header.where(line),
                    code="R106",
                    args=(constant, value, *sorted(have)),
                )
            )
    return out


__all__ = ["ALGORITHMS", "header_findings"]
