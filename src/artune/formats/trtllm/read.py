"""``trtllm:PATH``: TensorRT-LLM's all-reduce lookup as artune tables that decide as the header's own code does.

``PATH`` is a TensorRT-LLM checkout (or any folder laid out like one) or its
``customAllReduceUtils.h``. The header is parsed (``header``), the enums read
from the checkout's ``customAllReduceKernels.h`` (or beside the header), and
the PyTorch flow's autotuner gate from ``tensorrt_llm/_torch/distributed/ops.py``
when the checkout has it.

``selectStrategyLookUpTable`` is not pattern-matched: it is run
(``evaluate``) and its inputs are cut into the ranges it treats alike
(``partition``), so a revision's early return, bounds test or SM mapping
decides as written. Each SM range becomes one table (named for the SM
version of ``AllReduceBestStrategyTable`` in it: SM 90 is arch ``9.0``), and
every other arch runs the table of the SM range it falls in
(``TableSet.engine_arch``), with a note naming why. Each table holds
``ShapePlan`` s (world sizes x hidden sizes x fused ops, bands counting
tokens) and ``Table.caps``, ``getMaxRequiredWorkspaceSize`` run with the
default environment: ``AllreduceOp`` (``cpp/tensorrt_llm/thop/allreduceOp.cpp``,
``ifFallbackToNCCL``) sends a larger message to NCCL before it asks the
table. A statement artune cannot run is skipped and becomes a ``Caveat`` on
every table, naming the function, the line and what artune assumed; a
function unlike every revision the compiled header verified is one too
(``artune.formats.fingerprints``). Only a file that has neither function is
an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from artune.errors import TableError, Unsupported
from artune.formats.engine import EngineImport
from artune.formats.files import SourceFile, present, read_source
from artune.formats.fingerprints import Evaluated, evaluated_text, unfamiliar
from artune.formats.trtllm import syntax
from artune.formats.trtllm.caller import FILE as CALLER_FILE
from artune.formats.trtllm.caller import read_caller
from artune.formats.trtllm.checks import header_findings
from artune.formats.trtllm.enums import ALGORITHMS, Enums, parse_enums
from artune.formats.trtllm.enums import FILE as ENUM_FILE
from artune.formats.trtllm.evaluate import CxxFunction, Runner
from artune.formats.trtllm.header import SELECT, WORKSPACE, LookupHeader, Workspace, parse_header, workspace_env
from artune.formats.trtllm.partition import FUSION, HIDDEN, SM, TOKENS, TP, Cutter, Found
from artune.formats.trtllm.tables import Gap, shape_plans
from artune.table.family import TableSet
from artune.table.types import Caveat, CaveatKind, Platform, Provenance, ShapePlan, Table

HEADER = "cpp/tensorrt_llm/common/customAllReduceUtils.h"
OPS = "tensorrt_llm/_torch/distributed/ops.py"
FILES = (HEADER, ENUM_FILE, OPS, CALLER_FILE)
AUTOTUNE_ENV = "TLLM_DISABLE_ALLREDUCE_AUTOTUNE"
ENGINE = "trtllm"
SM_MAPPING = f"{SELECT}: SM mapping"


def arch_of(sm: int) -> str:
    """``"9.0"`` for SM 90, ``"10.3"`` for SM 103."""
    return f"{sm // 10}.{sm % 10}"


def sm_of(arch: str) -> int | None:
    """``103`` for ``"10.3"``; ``None`` for an arch that is not ``MAJOR.MINOR``."""
    found = re.fullmatch(r"(\d+)\.(\d)", arch)
    return int(found.group(1)) * 10 + int(found.group(2)) if found else None


@dataclass
class Reading:
    """One revision read: a table per SM range, the caveats, the functions evaluated, the gaps."""

    header: LookupHeader
    enums: Enums
    ranges: list[tuple[int, int | None, str]] = field(default_factory=list)  # SM range -> arch of its table
    tables: dict[str, Table] = field(default_factory=dict)
    default: Table | None = None
    caveats: list[Caveat] = field(default_factory=list)
    evaluated: list[Evaluated] = field(default_factory=list)
    gaps: dict[str, list[Gap]] = field(default_factory=dict)  # arch -> calls without an answer


def read_trtllm(path: str) -> EngineImport:
    """TensorRT-LLM's tables from a checkout or its ``customAllReduceUtils.h``; ``TableError`` when it cannot."""
    header_path, enum_path, ops_path, caller_path = _locate(path)
    root = Path(path).parent.parent if Path(path).is_file() else Path(path)  # the header's checkout
    header_file = read_source(header_path, root=header_path if Path(path).is_file() else root)
    enum_file = read_source(enum_path, root=root)
    files = [header_file, enum_file]
    gate = None
    if ops_path is not None:
        ops = read_source(ops_path, root=root)
        files.append(ops)
        gate = autotune_gate(ops)
    caller = read_source(caller_path, root=root) if caller_path is not None else None
    files += [caller] if caller is not None else []
    try:
        reading = read_files(header_file, enum_file, gate, caller)
    except RecursionError:  # the parser and the brace reader recurse: deeper than Python's stack is not a table
        names = " or ".join(f.path for f in (header_file, caller) if f is not None)
        raise Unsupported(f"{names}: nested too deeply to read; is this TensorRT-LLM's header?") from None
    label = f"trtllm:{header_file.label}"
    table_set = TableSet(
        label,
        "cuda",
        reading.tables,
        default=reading.default,
        rules=ENGINE,
        engine_arch=lambda a: engine_arch(reading, a),
    )
    findings = header_findings(reading.header, reading.enums, reading.gaps, gate)
    return EngineImport(ENGINE, table_set, tuple(findings), tuple(files))


@lru_cache(maxsize=16)
def read_files(
    header_file: SourceFile, enum_file: SourceFile, gate: str | None = None, caller: SourceFile | None = None
) -> Reading:
    """A revision's tables from its header and enum files, and its ``allreduceOp.cpp`` when there is one (read
    once per content: reading runs the function a few thousand times; the ``Reading`` is shared, not to be
    changed)."""
    enums = parse_enums(enum_file)
    header = parse_header(header_file, enums.by_type)
    reading = Reading(header, enums)
    caps = _workspace(reading)
    reading.evaluated = _evaluated(header)
    if header.select is None:
        reading.caveats.append(
            Caveat(
                CaveatKind.UNEVALUATED,
                SELECT,
                f"{header.file.label}:1",
                f"this revision has no {SELECT}: AllreduceOp's AUTO strategy decides by rules in "
                "cpp/tensorrt_llm/thop/allreduceOp.cpp, which artune does not read",
                "no shape plans: every call is answered by the out-of-range rule (nccl)",
            )
        )
        plans = {}
    else:
        plans = _cut(reading)
    reading.caveats += _globals_caveats(header)
    reading.caveats += unfamiliar(ENGINE, reading.evaluated)
    rule, caveats = read_caller(caller) if caller is not None else (None, [])
    reading.caveats += caveats
    notes = _notes(header, gate, rule.note() if rule else "" if caveats else _NO_CALLER)
    for arch, arch_plans in plans.items():
        sm = sm_of(arch) or 0
        provenance = Provenance("published", tool=f"TensorRT-LLM {header.file.label}", notes="; ".join(notes(sm)))
        reading.tables[arch] = Table(
            Platform("cuda", arch),
            provenance,
            (),
            rules=ENGINE,
            origin=f"trtllm:{header.file.label}@{arch}",
            caps=caps,
            caveats=tuple(reading.caveats),
            shape_plans=tuple(arch_plans),
        )
    if not reading.tables:
        provenance = Provenance("published", tool=f"TensorRT-LLM {header.file.label}", notes="; ".join(notes(0)))
        reading.default = Table(
            Platform("cuda", "any"),
            provenance,
            (),
            rules=ENGINE,
            origin=f"trtllm:{header.file.label}",
            caps=caps,
            caveats=tuple(reading.caveats),
        )
    return reading


def _cut(reading: Reading) -> dict[str, list[ShapePlan]]:
    """Run ``selectStrategyLookUpTable`` over its inputs: the shape plans per SM range's table (by arch), the
    caveats of what it skipped, the gaps."""
    header = reading.header
    assert header.select is not None
    machine = Runner(header.select, header.globals, reading.enums.by_type)
    cutter = Cutter(machine, (SM, FUSION, TP, HIDDEN, TOKENS), reading.enums.fusion.values())
    try:
        boxes, found = cutter.cut()
    except Unsupported as err:
        reading.caveats.append(
            Caveat(CaveatKind.UNEVALUATED, SELECT, header.select.where, str(err), "no shape plans: nccl for every call")
        )
        return {}
    reading.caveats += _skipped(header, header.select, found)
    fallback = ALGORITHMS.get(header.fallback, "nccl") if header.fallback else "nccl"
    keys = _map_keys(header)
    out: dict[str, list[ShapePlan]] = {}
    for box in boxes:
        anchor = next((k for k in keys if box.lo <= k and (box.hi is None or k <= box.hi)), box.lo)
        arch = arch_of(anchor)
        reading.ranges.append((box.lo, box.hi, arch))
        out[arch], reading.gaps[arch] = shape_plans(box.below, reading.enums, fallback)
        planned = {f for plan in out[arch] for f in plan.fusions}
        reading.caveats += _gap_caveats(header.select, arch, reading.gaps[arch], planned)
    return out


def _gap_caveats(function: CxxFunction, arch: str, gaps: list[Gap], planned: set[str]) -> list[Caveat]:
    """A caveat per call range the function gives no strategy for, except a fused op it is undefined for
    everywhere (a fused op the map lacks: it simply has no plan, and check says so, R110)."""

    def everywhere(fusions: tuple[str, ...]) -> bool:
        mine = [g for g in gaps if g.fusions == fusions]
        return not planned & set(fusions) and all(
            g.kind == "undefined" and (g.hidden, g.tokens) == ((1, None), (1, None)) for g in mine
        )

    whole = {fusions for fusions in {g.fusions for g in gaps} if everywhere(fusions)}
    out = []
    for gap in gaps:
        if gap.fusions in whole:
            continue
        lo, hi = gap.world_sizes
        sizes = tuple(range(lo, hi + 1)) if hi is not None and hi - lo < 64 else ()
        where = f"arch {arch}, ws {_span(gap.world_sizes)}, hidden {_span(gap.hidden)}, tokens {_span(gap.tokens)}"
        detail = f"{gap.kind} for {'/'.join(gap.fusions)} at {where}: {gap.why}"
        out.append(Caveat(CaveatKind.UNEVALUATED, function.name, function.where, detail, "no plan there", sizes))
    return out


def _span(bounds: tuple[int, int | None]) -> str:
    lo, hi = bounds
    return f"{lo}+" if hi is None else (str(lo) if lo == hi else f"{lo}..{hi}")


def _map_keys(header: LookupHeader) -> list[int]:
    """The SM versions ``AllReduceBestStrategyTable`` holds a table for (``[]``: none the header defines)."""
    found = header.globals("AllReduceBestStrategyTable")
    return sorted(k for k in found.value if isinstance(k, int)) if found is not None and found.kind == "map" else []


def _workspace(reading: Reading) -> tuple[tuple[int | None, int], ...]:
    """``getMaxRequiredWorkspaceSize`` by world size, run with the default environment, as ``Table.caps``."""
    header = reading.header
    function = header.workspace_function
    if function is None:
        return ()
    machine = Runner(function, header.globals, reading.enums.by_type)
    try:
        boxes, found = Cutter(machine, (TP,)).cut()
    except Unsupported as err:
        boxes, found = [], Found()
        reading.caveats.append(Caveat(CaveatKind.UNEVALUATED, WORKSPACE, function.where, str(err), "no cap"))
    reading.caveats += _skipped(header, function, found)
    caps: list[tuple[int | None, int]] = []
    for box in boxes:
        kind, value = box.below
        if kind != "value" or not isinstance(value, int):
            reading.caveats.append(
                Caveat(
                    CaveatKind.UNEVALUATED,
                    WORKSPACE,
                    function.where,
                    f"at world sizes {box.lo}..{box.hi or ''}: {value}",
                    "no cap there",
                )
            )
            continue
        caps.append((box.hi, value))
    if caps:
        header.workspace = Workspace(tuple(caps), workspace_env(function), int(function.where.rsplit(":", 1)[1]))
    return tuple(caps)


def _skipped(header: LookupHeader, function: CxxFunction, found: Found) -> list[Caveat]:
    """A caveat per statement of ``function`` artune skipped in a run or could not parse at all."""
    skipped = dict(found.skipped)
    for stmt in _all_statements(function.body):
        if isinstance(stmt, syntax.UnknownStmt):
            skipped.setdefault(stmt.line, (stmt.text, stmt.why))
    out = []
    for line, (text, why) in sorted(skipped.items()):
        assumed = (
            "its test is false: the branch is not taken"
            if text.startswith("if (")
            else "the statement has no effect on the choice"
        )
        out.append(
            Caveat(
                CaveatKind.UNEVALUATED,
                function.name,
                header.where(line),
                f"{text[:120]!r} not evaluated ({why})",
                assumed,
            )
        )
    return out


def _all_statements(body: tuple[syntax.Stmt, ...]) -> list[syntax.Stmt]:
    out: list[syntax.Stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, syntax.If):
            out += _all_statements(stmt.then) + _all_statements(stmt.other)
    return out


def _globals_caveats(header: LookupHeader) -> list[Caveat]:
    """A caveat per global the functions use whose definition artune could not read whole."""
    return [
        Caveat(
            CaveatKind.UNEVALUATED,
            name,
            header.where(line),
            f"{name}: {why}",
            "the statements that use it are skipped" if header.globals.values.get(name) is None else "",
        )
        for name, (line, why) in header.globals.problems.items()
    ]


def _evaluated(header: LookupHeader) -> list[Evaluated]:
    """The functions artune evaluates, fingerprinted: the lookup, its SM mapping, the workspace."""
    out = []
    for function in (header.select, header.workspace_function):
        if function is not None:
            out.append(evaluated_text(function.name, function.text, function.where))
    if header.select is not None:
        mapping = [
            s.text for s in _all_statements(header.select.body) if "sm_version" in s.text or "getSMVersion" in s.text
        ]
        if mapping:
            out.append(evaluated_text(SM_MAPPING, "\n".join(mapping), header.select.where))
    return out


_NO_CALLER = (
    f"the caller ({CALLER_FILE}) is not in this checkout: artune takes AllreduceOp's rule, a message over the "
    "workspace runs NCCL"
)


def _notes(header: LookupHeader, gate: str | None, caller: str) -> Callable[[int], list[str]]:
    """The provenance notes of the table for SM ``sm``; ``caller`` the caller's workspace rule, in words."""

    def notes(sm: int) -> list[str]:
        grid = header.grids.get(sm)
        out = [f"{grid.name} ({header.where(grid.line)})"] if grid is not None else []
        if header.select is not None:
            out.append(f"decided by running {SELECT} ({header.select.where})")
        if header.fallback:
            out.append(f"out of range: {header.fallback}")
        if header.workspace is not None:
            env = f", or ${header.workspace.env}" if header.workspace.env else ""
            out.append(f"workspace cap {WORKSPACE} ({header.where(header.workspace.line)}{env})")
            out += [caller] if caller else []
        if gate is not None:
            out.append(
                f"under AUTO the PyTorch flow asks its autotuner unless {AUTOTUNE_ENV}=1"
                + (f" ({gate})" if gate else "")
                + ": this table decides with the autotuner off, and in the C++ flow"
            )
        return out

    return notes


def engine_arch(reading: Reading, arch: str) -> Table | None:
    """The table the revision runs on ``arch``: the one of the SM range its SM version falls in."""
    sm = sm_of(arch)
    if sm is None or not reading.ranges:
        return None
    found = next((r for r in reading.ranges if r[0] <= sm and (r[1] is None or sm <= r[1])), None)
    if found is None or found[2] not in reading.tables:
        return None
    lo, hi, table_arch = found
    header = reading.header
    rules = [r for r in header.sm_rules if r.applies(sm)]
    mapped = sm_of(table_arch)
    if rules:
        how = f"{header.where(rules[-1].line)}: sm_version {rules[-1].op} {rules[-1].threshold}"
    else:
        how = f"{SELECT} treats SM {lo}..{'' if hi is None else hi} alike"
    note = f"arch {arch} (SM {sm}) runs the SM{mapped} table ({how})"
    return reading.tables[table_arch].with_changes(borrowed=(note,))


def _locate(path: str) -> tuple[Path, Path, Path | None, Path | None]:
    base = Path(path)
    if base.is_file():
        near = base.parent.parent / "kernels" / Path(ENUM_FILE).name
        if not near.is_file():
            raise TableError(
                f"{path}: the strategy enum is not beside it ({near}); give the TensorRT-LLM checkout "
                f"(trtllm:PATH with {HEADER} and {ENUM_FILE} under it)"
            )
        return base, near, None, None
    if not base.is_dir():
        raise TableError(f"{path}: no such file or directory; give a TensorRT-LLM checkout or its {HEADER}")
    missing = [rel for rel in (HEADER, ENUM_FILE) if not present(base / rel)]
    if missing:
        raise TableError(f"{path}: not a TensorRT-LLM checkout: {', '.join(missing)} not there")
    optional = [(base / rel) if present(base / rel) else None for rel in (OPS, CALLER_FILE)]
    return base / HEADER, base / ENUM_FILE, *optional  # type: ignore[return-value]


def autotune_gate(ops: SourceFile) -> str:
    """Where the PyTorch flow reads ``TLLM_DISABLE_ALLREDUCE_AUTOTUNE`` (``file:line``), ``""`` if it does not."""
    for number, line in enumerate(ops.text.splitlines(), start=1):
        if f'"{AUTOTUNE_ENV}"' in line or f"'{AUTOTUNE_ENV}'" in line:
            return f"{ops.label}:{number}"
    return ""


__all__ = ["FILES", "HEADER", "Reading", "arch_of", "read_files", "read_trtllm", "sm_of"]
