"""``trtllm:PATH``: TensorRT-LLM's all-reduce lookup tables as artune tables that decide as the header does.

``PATH`` is a TensorRT-LLM checkout (or any folder laid out like one) or its
``customAllReduceUtils.h``. The header is read by ``artune.formats.trtllm.header``,
the enums by ``artune.formats.trtllm.enums`` (from the checkout's
``customAllReduceKernels.h``, or beside the header), and the PyTorch flow's
autotuner gate from ``tensorrt_llm/_torch/distributed/ops.py`` when the
checkout has it.

One artune table per SM version in ``AllReduceBestStrategyTable`` (SM 90 is
arch ``9.0``, SM 100 arch ``10.0``); every other arch runs the table the
header's SM mapping gives it (``TableSet.engine_arch``), with a note naming
the rule's line. Each table holds one *shape plan* per (TP row, fused-op
plane, hidden row): ``Plan.hidden`` is the row's smallest hidden size,
``Plan.fusions`` the fused ops ``mapFusionOpToIndex`` sends to the plane,
and the bands count tokens, one token column ``[2**k, 2**(k+1) - 1]`` per
cell, equal neighbours merged. Tokens beyond the row and rows the table
lacks run the revision's own out-of-range strategy (the plans' fallback),
and ``Table.caps`` is ``getMaxRequiredWorkspaceSize`` by the call's world
size (its default, without the environment override): ``AllreduceOp`` sends
a larger message to NCCL before it looks at the table. The truncated indexing
is the gap policy's (``artune.table.gaps.TRTLLM``).
"""

from __future__ import annotations

import re
from pathlib import Path

from artune.errors import TableError
from artune.formats.engine import EngineImport
from artune.formats.files import SourceFile, read_source
from artune.formats.trtllm.enums import ALGORITHMS, Enums, parse_enums
from artune.formats.trtllm.enums import FILE as ENUM_FILE
from artune.formats.trtllm.header import LookupHeader, parse_header
from artune.table.family import TableSet
from artune.table.types import Band, Plan, Platform, Provenance, Table

HEADER = "cpp/tensorrt_llm/common/customAllReduceUtils.h"
OPS = "tensorrt_llm/_torch/distributed/ops.py"
FILES = (HEADER, ENUM_FILE, OPS)
AUTOTUNE_ENV = "TLLM_DISABLE_ALLREDUCE_AUTOTUNE"


def arch_of(sm: int) -> str:
    """``"9.0"`` for SM 90, ``"10.3"`` for SM 103."""
    return f"{sm // 10}.{sm % 10}"


def sm_of(arch: str) -> int | None:
    """``103`` for ``"10.3"``; ``None`` for an arch that is not ``MAJOR.MINOR``."""
    found = re.fullmatch(r"(\d+)\.(\d)", arch)
    return int(found.group(1)) * 10 + int(found.group(2)) if found else None


def read_trtllm(path: str) -> EngineImport:
    """TensorRT-LLM's tables from a checkout or its ``customAllReduceUtils.h``; ``TableError`` when it cannot."""
    from artune.formats.trtllm.checks import header_findings

    header_path, enum_path, ops_path = _locate(path)
    header = parse_header(read_source(header_path))
    enums = parse_enums(read_source(enum_path))
    files = [header.file, enums.file]
    gate = None
    if ops_path is not None:
        ops = read_source(ops_path)
        files.append(ops)
        gate = autotune_gate(ops)
    tables = build_tables(header, enums, gate)
    label = f"trtllm:{header.file.label}"

    def engine_arch(arch: str) -> Table | None:
        sm = sm_of(arch)
        if sm is None:
            return None
        mapped = header.table_sm(sm)
        table = tables.get(arch_of(mapped))
        if table is None:
            return None
        rules = [r for r in header.sm_rules if r.applies(sm)]
        how = f" ({header.where(rules[-1].line)}: sm_version {rules[-1].op} {rules[-1].threshold})" if rules else ""
        return table.with_changes(borrowed=(f"arch {arch} (SM {sm}) runs the SM{mapped} table{how}",))

    table_set = TableSet(label, "cuda", tables, rules="trtllm", engine_arch=engine_arch)
    findings = header_findings(header, enums, tables, gate)
    return EngineImport("trtllm", table_set, tuple(findings), tuple(files))


def _locate(path: str) -> tuple[Path, Path, Path | None]:
    base = Path(path)
    if base.is_file():
        near = base.parent.parent / "kernels" / Path(ENUM_FILE).name
        if not near.is_file():
            raise TableError(
                f"{path}: the strategy enum is not beside it ({near}); give the TensorRT-LLM checkout "
                f"(trtllm:PATH with {HEADER} and {ENUM_FILE} under it)"
            )
        return base, near, None
    if not base.is_dir():
        raise TableError(f"{path}: no such file or directory; give a TensorRT-LLM checkout or its {HEADER}")
    missing = [rel for rel in (HEADER, ENUM_FILE) if not (base / rel).is_file()]
    if missing:
        raise TableError(f"{path}: not a TensorRT-LLM checkout: {', '.join(missing)} not there")
    return base / HEADER, base / ENUM_FILE, (base / OPS) if (base / OPS).is_file() else None


def autotune_gate(ops: SourceFile) -> str:
    """Where the PyTorch flow reads ``TLLM_DISABLE_ALLREDUCE_AUTOTUNE`` (``file:line``), ``""`` if it does not."""
    for number, line in enumerate(ops.text.splitlines(), start=1):
        if f'"{AUTOTUNE_ENV}"' in line or f"'{AUTOTUNE_ENV}'" in line:
            return f"{ops.label}:{number}"
    return ""


def build_tables(header: LookupHeader, enums: Enums, gate: str | None) -> dict[str, Table]:
    """One table per SM version of the header's map, with one shape plan per row."""
    fallback = _algorithm(header, enums, enums.strategy.get(header.fallback), header.fallback_line)
    planes: dict[int, tuple[str, ...]] = {}
    for op, index in header.fusion_index.items():
        planes[index] = (*planes.get(index, ()), op)
    tables: dict[str, Table] = {}
    for sm, grid in header.grids.items():
        plans: list[Plan] = []
        for indices, row in grid.rows().items():
            at = dict(zip(header.order[:3], indices, strict=True))
            fusions = planes.get(at["fusion"], ())
            if not fusions:
                continue  # a plane no fused op reads: artune check reports it
            ws = header.indices["tp"].row(at["tp"])
            cells = [_algorithm(header, enums, value, row.line) for value in row.items]
            plans.append(
                Plan(
                    world_size=ws,
                    mode="eager",
                    bands=_token_bands(header, cells, fallback),
                    fallback=fallback,
                    hidden=header.indices["hidden"].row(at["hidden"]),
                    fusions=fusions,
                )
            )
        notes = [f"{grid.name} ({header.where(grid.line)})", f"out of range: {header.fallback}"]
        if header.workspace is not None:
            env = f", or ${header.workspace.env}" if header.workspace.env else ""
            notes.append(f"workspace cap getMaxRequiredWorkspaceSize ({header.where(header.workspace.line)}{env})")
        if gate is not None:
            notes.append(
                f"under AUTO the PyTorch flow asks its autotuner unless {AUTOTUNE_ENV}=1"
                + (f" ({gate})" if gate else "")
                + ": this table decides with the autotuner off, and in the C++ flow"
            )
        provenance = Provenance("published", tool=f"TensorRT-LLM {header.file.label}", notes="; ".join(notes))
        arch = arch_of(sm)
        origin = f"trtllm:{header.file.label}@{arch}"
        caps = header.workspace.caps() if header.workspace else ()
        tables[arch] = Table(Platform("cuda", arch), provenance, tuple(plans), rules="trtllm", origin=origin, caps=caps)
    return tables


def _algorithm(header: LookupHeader, enums: Enums, value: int | None, line: int) -> str:
    name = enums.strategy_name(value) if value is not None else None
    if name is None:
        raise TableError(
            f"{header.where(line)}: strategy {value!r} is not an AllReduceStrategyType of {enums.file.label}"
        )
    return ALGORITHMS.get(name, f"trtllm_{name.lower()}")


def _token_bands(header: LookupHeader, cells: list[str], fallback: str) -> tuple[Band, ...]:
    """Column ``k`` covers tokens ``[2**k, 2**(k+1) - 1]`` (the truncated log2); equal neighbours merge."""
    tokens = header.indices["tokens"]
    # tokens below the first column read a negative index, which the cast wraps out of range
    bands: list[Band] = [Band(tokens.row(0) - 1, (fallback,))] if tokens.offset else []
    for k, name in enumerate(cells):
        upto = tokens.row(k + 1) - 1
        if bands and bands[-1].candidates == (name,):
            bands[-1] = Band(upto, (name,))
        else:
            bands.append(Band(upto, (name,)))
    return tuple(bands)
