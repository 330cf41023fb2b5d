"""Read vLLM's all-reduce tables from a checkout (``artune import vllm PATH``, ``vllm:PATH``).

``artune.formats.vllm_figures`` reads the files' tables as data; this
module turns them into artune tables and the reviewers' findings. The tables
decide as vLLM does with its default environment: ``custom_ar``
below its limit, then torch symmetric memory (``symm_mem_multimem`` for the
multimem world sizes, else ``symm_mem_two_shot``), then ``nccl``; the
figures are kept as written, like ``reference:vllm``. NCCL symmetric memory
and FlashInfer are opt-in (``VLLM_USE_NCCL_SYMM_MEM``,
``VLLM_ALLREDUCE_USE_FLASHINFER``): they are read, validated and checked,
not planned. Where the file makes vLLM raise or clip, a finding says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from artune.formats.engine import EngineImport, FindingSink
from artune.formats.source import SourceFile, describe, find_files, read_source
from artune.formats.vllm_figures import (
    CUSTOM_AR,
    FI_FUSION,
    FI_ONESHOT,
    FILES,
    MULTIMEM,
    SYMM_MEM,
    Figures,
    read_figures,
)
from artune.sizes import format_size
from artune.table.check import copied_archs
from artune.table.family import TableSet
from artune.table.model import MODES, Plan, Platform, Provenance, Table
from artune.table.references.rules import Rule, bands_from_rules, below, upto

CUSTOM_AR_DEFAULT = 8192 * 1024  # CustomAllreduce(max_size=8192 * 1024): it clips the table
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)
FI_ONESHOT_CAP_MB = 64  # "OneShot max size is at most 64MB / world size (FlashInfer restriction)"
FALLBACK = "nccl"


def _multimem(figures: Figures, arch: str) -> list[int] | None:
    if figures.multimem is None:  # symm_mem.py not read: vLLM's multimem sizes are not known
        return None
    return figures.multimem.get(arch)


def arch_rules(figures: Figures, arch: str, world_size: int) -> list[Rule]:
    """vLLM's first-match rules for one arch and world size, the figures as written."""
    rules: list[Rule] = []
    if arch in figures.custom_ar:
        limit = figures.custom_ar[arch].get(world_size)
        if limit is not None:
            rules.append(below("custom_ar", limit))
    elif world_size in CUSTOM_AR_WORLD_SIZES:
        rules.append(below("custom_ar", CUSTOM_AR_DEFAULT))
    symm = figures.symm_mem.get(arch, {}).get(world_size)
    multimem = _multimem(figures, arch)
    if symm is not None and (multimem is not None or figures.multimem is None):
        name = "symm_mem_multimem" if multimem and world_size in multimem else "symm_mem_two_shot"
        rules.append(upto(name, symm) if figures.symm_inclusive else below(name, symm))
    return rules


def _world_sizes(figures: Figures, arch: str) -> list[int]:
    sizes = set(figures.custom_ar.get(arch, {})) | set(figures.symm_mem.get(arch, {}))
    if arch not in figures.custom_ar:
        sizes |= set(CUSTOM_AR_WORLD_SIZES)
    return sorted(sizes)


def _plans(rules_for: Mapping[int, list[Rule]]) -> tuple[Plan, ...]:
    return tuple(
        Plan(ws, mode, bands_from_rules(rules, FALLBACK), FALLBACK)
        for ws, rules in sorted(rules_for.items())
        for mode in MODES
    )


def _row_tables(figures: Figures) -> dict[str, Mapping[str, object]]:
    tables: dict[str, Mapping[str, object]] = {CUSTOM_AR: figures.custom_ar}
    if figures.symm_mem:
        tables[SYMM_MEM] = figures.symm_mem
    if figures.multimem is not None:
        tables[MULTIMEM] = {k: sorted(v) for k, v in figures.multimem.items()}
    return tables  # the dispatch path's tables; FlashInfer's are a separate, opt-in feature


def build(figures: Figures, files: list[SourceFile]) -> EngineImport:
    """The tables and findings of vLLM ``figures`` read from ``files``."""
    origin = f"vllm:{files[0].label}"
    copies = {arch: (parent, equal, total) for arch, parent, equal, total in copied_archs(_row_tables(figures))}
    read = describe(files)
    compare = "<=" if figures.symm_inclusive else "<"
    tables: dict[str, Table] = {}
    for arch in dict.fromkeys([*figures.custom_ar, *figures.symm_mem]):
        if arch in copies:
            parent, equal, total = copies[arch]
            provenance = Provenance(
                source="inherited",
                inherited_from=parent,
                tool="vllm",
                notes=f"vLLM's {arch} rows equal {parent}'s in {equal} of {total} tables ({read})",
            )
        else:
            provenance = Provenance(
                source="published",
                tool="vllm",
                notes=(
                    f"vLLM's custom all-reduce (<) and torch symmetric-memory ({compare}) limits for {arch}, "
                    f"read from {read}"
                ),
            )
        rules = {ws: arch_rules(figures, arch, ws) for ws in _world_sizes(figures, arch)}
        tables[arch] = Table(Platform("cuda", arch), provenance, _plans(rules), origin=origin)
    default_rules = {ws: [below("custom_ar", CUSTOM_AR_DEFAULT)] for ws in CUSTOM_AR_WORLD_SIZES}
    default = Table(
        Platform("cuda", "default"),
        Provenance(
            source="published",
            tool="vllm",
            notes=f"vLLM on an arch missing from its tables: custom all-reduce below 8 MiB ({read})",
        ),
        _plans(default_rules),
        origin=origin,
    )
    sink = FindingSink(origin)
    _findings(figures, copies, sink)
    return EngineImport("vllm", TableSet(origin, "cuda", MappingProxyType(tables), default), sink.done(), tuple(files))


def _findings(figures: Figures, copies: dict[str, tuple[str, int, int]], sink: FindingSink) -> None:
    for arch, (parent, equal, total) in copies.items():
        sink.copied(figures.line(CUSTOM_AR, arch), arch, parent, equal, total)
    for arch, rows in figures.custom_ar.items():
        for ws in CUSTOM_AR_WORLD_SIZES:
            if ws not in rows:
                sink.add(
                    figures.line(CUSTOM_AR, arch),
                    arch,
                    f"{CUSTOM_AR}[{arch!r}] has no world size {ws}: CustomAllreduce raises KeyError at start-up "
                    "(every listed arch must list 2, 4, 6 and 8)",
                    ws,
                )
        for ws, limit in rows.items():
            if limit > CUSTOM_AR_DEFAULT:
                sink.add(
                    figures.line(CUSTOM_AR, arch, ws),
                    arch,
                    f"custom_ar bound {format_size(limit)} is clipped to {format_size(CUSTOM_AR_DEFAULT)} by "
                    "CustomAllreduce's default max_size (8192 * 1024): sizes from 8MiB go to the next rule",
                    ws,
                )
    if figures.multimem is not None:
        for arch in figures.symm_mem:
            if arch not in figures.multimem:
                sink.add(
                    figures.line(SYMM_MEM, arch),
                    arch,
                    f"{arch} is in {SYMM_MEM} but not in {MULTIMEM}: SymmMemCommunicator raises KeyError "
                    "(the two tables must stay in step)",
                )
        for arch, sizes in figures.multimem.items():
            if arch not in figures.symm_mem:
                sink.add(
                    figures.line(MULTIMEM, arch),
                    arch,
                    f"{arch} is in {MULTIMEM} but not in {SYMM_MEM}: torch symmetric memory is disabled at "
                    f"start-up on {arch}, so the multimem list is never used (the two tables must stay in step)",
                )
                continue
            unused = [ws for ws in sizes if ws not in figures.symm_mem[arch]]
            if unused:
                sink.add(
                    figures.line(MULTIMEM, arch),
                    arch,
                    f"{MULTIMEM}[{arch!r}] lists world sizes {unused} that {SYMM_MEM} does not: never used",
                )
    planned = {ws for rows in (*figures.custom_ar.values(), *figures.symm_mem.values()) for ws in rows}
    through = [ws for ws in range(2, max(planned | {8}) + 1) if ws not in planned]
    if through:
        sink.add(
            figures.line(CUSTOM_AR),
            "*",
            f"world sizes {', '.join(map(str, through))} are in no table: vLLM sends every size to nccl there, "
            "silently",
        )
    for arch in dict.fromkeys([*figures.custom_ar, *figures.symm_mem]):
        for ws in _world_sizes(figures, arch):
            sink.rules(figures.line(CUSTOM_AR, arch, ws), arch, ws, None, arch_rules(figures, arch, ws))
    _fi_findings(figures, sink)


def _fi_findings(figures: Figures, sink: FindingSink) -> None:
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
                    )


def read_vllm(path: str) -> EngineImport:
    """vLLM's tables from a checkout or one of its files."""
    base, found = find_files(path, FILES, "vLLM")
    if base.is_file():
        siblings = [base.parent / Path(rel).name for rel in FILES[1:2]]
        found += [p for p in siblings if p.is_file() and p != base]
    files = [read_source(p) for p in found]
    return build(read_figures(files), files)
