"""Read vLLM's all-reduce tables from a checkout (``artune import vllm PATH``, ``vllm:PATH``).

vLLM's tables are data, so they are read as data: each file is parsed with
``ast`` and only constant expressions are evaluated (numbers, ``+ - * / //``,
names bound earlier such as ``MiB``, dict/list/tuple literals), by
``artune.formats.pyeval`` in its restricted mode. vLLM is never imported.

Files (any subset; ``all_reduce_utils.py`` is required):

- ``all_reduce_utils.py``: ``CUSTOM_ALL_REDUCE_MAX_SIZES`` and
  ``SYMM_MEM_ALL_REDUCE_MAX_SIZES`` (``"M.m"`` -> world size -> bytes), and
  ``NCCL_SYMM_MEM_ALL_REDUCE_CONFIG`` (old ``thresholds`` or new
  ``custom_ar_preferred_ranges``);
- ``symm_mem.py``: ``SymmMemCommunicator._WORLD_SIZES_MULTIMEM`` and whether
  ``should_use_symm_mem`` compares ``<=`` (newest) or ``<`` (older);
- the FlashInfer fusion file: ``FI_ALLREDUCE_FUSION_MAX_SIZE_MB`` and
  ``_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB`` (int arch ``major*10+minor``, MB
  floats), or the older world-size-only ``_FI_MAX_SIZES``.

The tables decide as vLLM does with its default environment: ``custom_ar``
below its limit, then torch symmetric memory (``symm_mem_multimem`` for the
multimem world sizes, else ``symm_mem_two_shot``), then ``nccl``; the
figures are kept as written, like ``reference:vllm``. NCCL symmetric memory
and FlashInfer are opt-in (``VLLM_USE_NCCL_SYMM_MEM``,
``VLLM_ALLREDUCE_USE_FLASHINFER``): they are read, validated and checked,
not planned. Where the file makes vLLM raise or clip, a finding says so.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from artune.errors import TableError
from artune.formats.engine import EngineImport, FindingSink, key_lines
from artune.formats.pyeval import constants
from artune.formats.source import SourceFile, describe, find_files, read_source
from artune.sizes import format_size
from artune.table.check import copied_archs
from artune.table.family import TableSet
from artune.table.model import MODES, Plan, Platform, Provenance, Table
from artune.table.references.rules import Rule, bands_from_rules, below, upto

KiB = 1024
MiB = 1024 * KiB
FILES = (
    "vllm/distributed/device_communicators/all_reduce_utils.py",
    "vllm/distributed/device_communicators/symm_mem.py",
    "vllm/compilation/passes/fusion/allreduce_rms_fusion.py",
    "vllm/compilation/collective_fusion.py",
)
CUSTOM_AR = "CUSTOM_ALL_REDUCE_MAX_SIZES"
SYMM_MEM = "SYMM_MEM_ALL_REDUCE_MAX_SIZES"
MULTIMEM = "_WORLD_SIZES_MULTIMEM"
NCCL_SYMM = "NCCL_SYMM_MEM_ALL_REDUCE_CONFIG"
FI_FUSION = "FI_ALLREDUCE_FUSION_MAX_SIZE_MB"
FI_ONESHOT = "_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB"
FI_OLD = "_FI_MAX_SIZES"
CUSTOM_AR_DEFAULT = 8192 * 1024  # CustomAllreduce(max_size=8192 * 1024): it clips the table
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)
FI_ONESHOT_CAP_MB = 64  # "OneShot max size is at most 64MB / world size (FlashInfer restriction)"
FALLBACK = "nccl"
_ARCH = re.compile(r"^\d+\.\d+$")


@dataclass
class Figures:
    """Every vLLM table found, as evaluated, with where each row is written."""

    custom_ar: dict[str, dict[int, int]]
    symm_mem: dict[str, dict[int, int]] = field(default_factory=dict)
    multimem: dict[str, list[int]] | None = None
    nccl_symm: dict[str, Any] | None = None
    fi_fusion: dict[str, dict[int, float]] | None = None
    fi_oneshot: dict[str, dict[int, float]] | None = None
    fi_old: dict[int, int] | None = None
    fi_world_sizes: list[int] | None = None
    symm_inclusive: bool = False
    where: dict[tuple[Any, ...], str] = field(default_factory=dict)  # (table, arch[, ws]) -> "file:line"

    def line(self, *key: Any) -> str:
        """``file:line`` of a row, of its arch, or of its table, the most precise known."""
        for n in range(len(key), 0, -1):
            if key[:n] in self.where:
                return self.where[key[:n]]
        return ""


def _int_arch(key: int) -> str:
    return f"{key // 10}.{key % 10}"


class _Reader:
    def __init__(self, files: list[SourceFile]) -> None:
        self.files = files
        self.values: dict[str, Any] = {}
        self.nodes: dict[str, tuple[SourceFile, ast.expr | None, int]] = {}
        self.symm_inclusive = False
        for source in files:
            values, _lines, tree = constants(source.text, source.path)
            for prefix, stmt in _assignments(tree):
                for short in _names(stmt):
                    name = prefix + short
                    if short in self.nodes:
                        continue
                    self.nodes[short] = (source, stmt.value, stmt.lineno)
                    if name in values:
                        self.values[short] = values[name]
            if _compares_inclusive(tree):
                self.symm_inclusive = True

    def get(self, name: str, required: bool = False) -> Any:
        if name not in self.nodes:
            if required:
                found = ", ".join(f.path for f in self.files)
                raise TableError(f"{found}: no {name} here; is this vLLM's all_reduce_utils.py?")
            return None
        source, node, line = self.nodes[name]
        if name not in self.values:
            text = ast.unparse(node)[:60] if node is not None else ""
            raise TableError(
                f"{source.path}:{line}: {name} = {text}... is not a constant expression this reader understands "
                "(numbers, + - * / //, names bound earlier, dict/list/tuple literals)"
            )
        return self.values[name]

    def where(self, name: str) -> str:
        source, _node, line = self.nodes[name]
        return f"{source.path}:{line}"

    def lines(self, name: str, figures: Figures, arch_of: Any = str) -> None:
        source, node, line = self.nodes[name]
        figures.where[(name,)] = f"{source.path}:{line}"
        for key, row in key_lines(node).items():
            arch = arch_of(key[0]) if arch_of is not str else key[0]
            figures.where[(name, arch, *key[1:])] = f"{source.path}:{row}"

    def fail(self, name: str, expected: str, got: Any) -> TableError:
        return TableError(f"{self.where(name)}: {name}: expected {expected}, got {_short(got)}")

    def size_table(self, name: str, required: bool = False) -> dict[str, dict[int, int]] | None:
        value = self.get(name, required)
        if value is None:
            return None
        expected = '{"M.m": {world_size: bytes}}'
        if not isinstance(value, dict):
            raise self.fail(name, expected, value)
        for arch, rows in value.items():
            if not isinstance(arch, str) or not _ARCH.match(arch) or not isinstance(rows, dict):
                raise self.fail(name, expected, {arch: rows})
            for ws, limit in rows.items():
                if type(ws) is not int or type(limit) is not int or ws < 1 or limit < 0:
                    raise self.fail(name, f"{expected} with int world sizes and int bytes", {ws: limit})
        return value

    def mb_table(self, name: str) -> dict[str, dict[int, float]] | None:
        value = self.get(name)
        if value is None:
            return None
        expected = "{major*10+minor: {world_size: MB}}"
        if not isinstance(value, dict):
            raise self.fail(name, expected, value)
        out: dict[str, dict[int, float]] = {}
        for arch, rows in value.items():
            if type(arch) is not int or not isinstance(rows, dict):
                raise self.fail(name, expected, {arch: rows})
            for ws, mb in rows.items():
                if type(ws) is not int or isinstance(mb, bool) or not isinstance(mb, (int, float)) or mb < 0:
                    raise self.fail(name, expected, {ws: mb})
            out[_int_arch(arch)] = rows
        return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


def _assignments(tree: ast.Module) -> list[tuple[str, ast.Assign | ast.AnnAssign]]:
    """Top-level and class-level assignments, with ``Class.`` as the prefix of the latter."""
    out: list[tuple[str, ast.Assign | ast.AnnAssign]] = []
    for stmt in tree.body:
        body = stmt.body if isinstance(stmt, ast.ClassDef) else [stmt]
        prefix = f"{stmt.name}." if isinstance(stmt, ast.ClassDef) else ""
        out += [(prefix, s) for s in body if isinstance(s, (ast.Assign, ast.AnnAssign))]
    return out


def _names(stmt: ast.Assign | ast.AnnAssign) -> list[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _compares_inclusive(tree: ast.Module) -> bool:
    """Whether ``should_use_symm_mem`` compares ``nbytes <= self.max_size`` (newest vLLM)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "should_use_symm_mem":
            for cmp in ast.walk(node):
                if isinstance(cmp, ast.Compare) and "max_size" in ast.unparse(cmp.comparators[-1]):
                    return isinstance(cmp.ops[-1], ast.LtE)
    return False


def read_figures(files: list[SourceFile]) -> Figures:
    """Evaluate every vLLM table in ``files``; ``TableError`` naming the construct it cannot read."""
    reader = _Reader(files)
    custom_ar = reader.size_table(CUSTOM_AR, required=True)
    assert custom_ar is not None
    figures = Figures(custom_ar=custom_ar, symm_inclusive=reader.symm_inclusive)
    reader.lines(CUSTOM_AR, figures)
    symm = reader.size_table(SYMM_MEM)
    if symm is not None:
        figures.symm_mem = symm
        reader.lines(SYMM_MEM, figures)
    multimem = reader.get(MULTIMEM)
    if multimem is not None:
        ok = isinstance(multimem, dict) and all(
            isinstance(k, str) and isinstance(v, (list, tuple)) and all(type(w) is int for w in v)
            for k, v in multimem.items()
        )
        if not ok:
            raise reader.fail(MULTIMEM, '{"M.m": [world sizes]}', multimem)
        figures.multimem = {k: list(v) for k, v in multimem.items()}
        reader.lines(MULTIMEM, figures)
    nccl = reader.get(NCCL_SYMM)
    if nccl is not None:
        known = {"min_world_size", "thresholds", "custom_ar_preferred_ranges", "always_use_above_world_size"}
        if not isinstance(nccl, dict) or not set(nccl) <= known:
            raise reader.fail(NCCL_SYMM, f"a dict with keys among {sorted(known)}", nccl)
        figures.nccl_symm = nccl
        reader.lines(NCCL_SYMM, figures)
    for name, attr in ((FI_FUSION, "fi_fusion"), (FI_ONESHOT, "fi_oneshot")):
        table = reader.mb_table(name)
        if table is not None:
            setattr(figures, attr, table)
            reader.lines(name, figures, arch_of=_int_arch)
    old = reader.get(FI_OLD)
    if old is not None:
        if not isinstance(old, dict) or not all(type(k) is int and type(v) is int for k, v in old.items()):
            raise reader.fail(FI_OLD, "{world_size: bytes}", old)
        figures.fi_old = old
        reader.lines(FI_OLD, figures)
    supported = reader.get("FI_SUPPORTED_WORLD_SIZES")
    if isinstance(supported, (list, tuple)):
        figures.fi_world_sizes = list(supported)
    return figures


# ------------------------------------------------------------------ tables


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
        sink.add(
            figures.line(CUSTOM_AR, arch),
            arch,
            f"{arch} = {parent} in {equal} of {total} tables: measured, or inherited?",
        )
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
