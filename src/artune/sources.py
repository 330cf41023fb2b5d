"""Table sources: what a table name on the command line, in a review or in CI stands for.

A source is a TOML file, ``reference:NAME`` (an engine's published tables),
``bundled:cpu``, an engine's files (``vllm:PATH``, ``sglang:PATH``) or its
release (``vllm==0.33.0``), with ``@ARCH`` to pick one arch of a set. It opens
to its tables, the set they form and, for an engine's files, the findings its
reader made (file and line). ``source_findings`` is what ``artune check``
prints for one. The CLI and ``artune.review`` both open tables here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from artune import settings
from artune.arch import parse_arch
from artune.errors import TableError
from artune.formats import engine_reader, engine_source, read_engine
from artune.formats.references import reference_findings, reference_set
from artune.progress import waiting
from artune.table.bundled import cpu_default
from artune.table.check import Finding, check_table
from artune.table.family import TableSet
from artune.table.io import load_table
from artune.table.selection import compose, select_table
from artune.table.types import Caveat, CaveatKind, Table

REFERENCE_PREFIX = "reference:"
BUNDLED_PREFIX = "bundled:"
SOURCES = "FILE|reference:NAME|bundled:cpu|vllm:PATH|sglang:PATH|trtllm:PATH[@ARCH]"


@dataclass(frozen=True)
class Source:
    """What a command-line table name stands for: its tables, the set they form, an engine file's findings."""

    tables: list[Table]
    table_set: TableSet | None = None
    findings: tuple[Finding, ...] = ()


_ARCH_SUFFIX = re.compile(r"^[A-Za-z0-9_.]+$")


def open_source(spec: str) -> Source:
    """A file, ``reference:NAME``, ``bundled:cpu``, ``vllm:PATH`` or ``sglang:PATH``; ``@ARCH`` picks one arch."""
    head, at, arch = spec.rpartition("@")
    if not (at and head and _ARCH_SUFFIX.match(arch)):
        head, arch = spec, ""
    source = _open(head)
    if not arch:
        return source
    if source.table_set is None:
        raise TableError(f"{spec}: @{arch} picks an arch from a set of tables (reference:, vllm:, sglang:)")
    arch = parse_arch(arch)
    if arch in source.table_set.tables:
        return Source([source.table_set.tables[arch]], source.table_set, source.findings)
    return Source([source.table_set.resolve(arch)], source.table_set, source.findings)


def _open(spec: str) -> Source:
    with waiting(f"reading {spec} (a release: downloaded once, then cached)"):
        engine = engine_source(spec)
        imported = read_engine(*engine) if engine is not None else None
    if imported is not None:
        tables = imported.tables
        findings = imported.findings
        other_dtypes = engine_reader(engine[0]).dtype_findings  # its code read for the other dtypes it tells apart
        if other_dtypes is not None:
            findings = (*findings, *other_dtypes(engine[1]))
        return Source([*tables.tables.values(), *([tables.default] if tables.default else [])], tables, findings)
    if spec.startswith(REFERENCE_PREFIX):
        name = spec[len(REFERENCE_PREFIX) :]
        tables = reference_set(name)
        found = reference_findings(name)
        return Source([*tables.tables.values(), *([tables.default] if tables.default else [])], tables, found)
    if spec.startswith(BUNDLED_PREFIX):
        if spec != "bundled:cpu":
            raise TableError(f"{spec}: unknown bundled table; there is bundled:cpu")
        return Source([cpu_default()])
    return Source([load_table(spec)])


def open_tables(spec: str) -> list[Table]:
    """Every table a command-line name stands for (see ``open_source``)."""
    return open_source(spec).tables


def selected_source() -> Source:
    """The table a Communicator here would use, composed with the tables below it (``artune.table.selection``)."""
    return Source([select_table(None, settings.from_env())])


def coverage_notes(table: Table) -> list[Finding]:
    """Notes on what an artune table does not cover, and which table answers there instead.

    On a composed table, its plans taken from a later table; on a CPU table
    by itself, what the bundled default would answer for it.
    """
    if table.rules != "artune":
        return []
    if not any(p.origin for p in table.plans) and table.platform.kind == "cpu":
        table = compose([("this table", table), (f"the bundled default ({cpu_default().name})", cpu_default())])
    return [
        Finding(
            table.name,
            table.platform.arch,
            plan.origin,
            plan.world_size,
            plan.mode,
            severity="note",
            hosts=plan.hosts,
            code="T401",
            args=(plan.origin,),
        )
        for plan in table.plans
        if plan.origin
    ]


def caveat_findings(tables: list[Table]) -> list[Finding]:
    """One finding per caveat of an engine reading (``Table.caveats``): code E401 for dispatch code artune
    cannot evaluate, E402 for a dispatch function unlike any verified release; the archs it holds for in one."""
    archs: dict[Caveat, list[str]] = {}
    for table in tables:
        for caveat in table.caveats:
            archs.setdefault(caveat, []).append(table.platform.arch)
    return [
        Finding(
            tables[0].origin or tables[0].name,
            ", ".join(dict.fromkeys(where)),
            caveat.describe(),
            caveat.world_sizes[0] if len(caveat.world_sizes) == 1 else None,
            source=caveat.where,
            code="E401" if caveat.kind is CaveatKind.UNEVALUATED else "E402",
            args=(caveat.function, caveat.detail, caveat.assumed),
        )
        for caveat, where in archs.items()
    ]


def source_findings(source: Source, max_world_size: int | None = None) -> list[Finding]:
    """What ``artune check`` prints for one source: an engine file's own findings (arch copies, holes,
    clips, shadowed rows) and what its reading cannot vouch for, then each table's lints and coverage notes."""
    found = [*source.findings, *caveat_findings(source.tables)]
    for table in source.tables:
        found += [*check_table(table, max_world_size), *coverage_notes(table)]
    return found
