"""A fourth engine, small enough to read whole: what the engine contract asks of one, and nothing more.

Its one table file (``checkout/toy_allreduce.tab``) lists, per arch and world
size, first-match lines ``upto algorithm`` (bytes, inclusive), nccl above them;
both modes run the same. ``ENGINE`` fills ``artune.formats.engine.EnginePlugin``:
a reader into artune's tables, a writer back to the file's format, and an
oracle whose engine side is the toy's own dispatch (``dispatch``), which reads
its file directly, as a tiny engine would. Tests register it with
``artune.formats.registry.register(ENGINE)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from artune.errors import TableError
from artune.formats.engine import EngineImport, EnginePlugin, FindingSink, Oracle
from artune.formats.export import Export, provenance_lines
from artune.formats.files import SourceFile
from artune.oracles import Probe, decide_all
from artune.sizes import format_size, parse_size
from artune.table.family import TableSet
from artune.table.priority import bands_from_rules, upto
from artune.table.types import MODES, Plan, Platform, Provenance, Table

FILE = "toy_allreduce.tab"
FALLBACK = "nccl"


def _path(path: str | Path) -> Path:
    """The table file: ``path`` itself, or the one in the checkout ``path``."""
    found = Path(path)
    found = found / FILE if found.is_dir() else found
    if not found.is_file():
        raise TableError(f"{path}: no {FILE} here; give the toy checkout or its table file")
    return found


def _lines(path: Path) -> list[tuple[int, str, int, int, str]]:
    """``(line number, arch, world size, upto bytes, algorithm)`` per line of the file."""
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("#")[0].split()
        if not fields:
            continue
        if len(fields) != 4:
            raise TableError(f"{path}:{number}: give 'arch world_size upto algorithm', not {line.strip()!r}")
        arch, ws, bound, algorithm = fields
        out.append((number, arch, int(ws), parse_size(bound), algorithm))
    return out


def read(path: str) -> EngineImport:
    """The toy's tables, one per arch, with the shadowed lines as findings at their file and line."""
    found = _path(path)
    source = SourceFile(str(found), found.read_text(encoding="utf-8"))
    origin = f"toy:{source.label}"
    sink = FindingSink(origin)
    rows: dict[str, dict[int, list[tuple[int, str, int]]]] = {}
    for number, arch, ws, bound, algorithm in _lines(found):
        rows.setdefault(arch, {}).setdefault(ws, []).append((number, algorithm, bound))
    tables = {}
    for arch, sizes in rows.items():
        plans = []
        for ws, lines in sizes.items():
            rules = [upto(algorithm, bound) for _, algorithm, bound in lines]
            sink.rules(f"{found}:{lines[0][0]}", arch, ws, None, rules)
            plans += [Plan(ws, mode, bands_from_rules(rules, FALLBACK), FALLBACK) for mode in MODES]
        provenance = Provenance("published", tool="toy", notes=f"the toy engine's table read from {found}")
        tables[arch] = Table(Platform("cuda", arch), provenance, tuple(plans), origin=origin)
    return EngineImport("toy", TableSet(origin, "cuda", tables), sink.done(), (source,))


def write(tables: Sequence[Table], command: str, arch: str | None, standalone: bool) -> Export:
    """Each table's plans as the file's lines (graph mode's: the toy runs one table for both modes)."""
    out = [*provenance_lines(tables[0], command), "# arch  world_size  upto  algorithm"]
    dropped = []
    for table in tables:
        for plan in table.plans:
            if plan.mode != "graph":
                continue
            for band in plan.bands:
                if band.upto is None:
                    dropped.append(f"{table.platform.arch} ws={plan.world_size}: {band.candidates[0]} above every line")
                    continue
                out.append(f"{table.platform.arch} {plan.world_size} {format_size(band.upto)} {band.candidates[0]}")
    return Export("\n".join(out) + "\n", dropped)


def dispatch(path: Path, arch: str, world_size: int, nbytes: int) -> str:
    """The toy engine's own dispatch: the first line of its file for the arch and world size that holds the
    message, else nccl."""
    for _, line_arch, ws, bound, algorithm in _lines(_path(path)):
        if (line_arch, ws) == (arch, world_size) and nbytes <= bound:
            return algorithm
    return FALLBACK


def probes(root: Path) -> list[Probe]:
    """Every arch and world size the file names, each power of two from 1 KiB to 64 MiB and 16 bytes either
    side (custom_ar runs 16-byte multiples alone, which the toy's own dispatch does not check)."""
    keys = dict.fromkeys((arch, ws) for _, arch, ws, _, _ in _lines(_path(root)))
    sizes = [n for k in range(10, 27) for n in ((1 << k) - 16, 1 << k, (1 << k) + 16)]
    return [Probe(arch, ws, "graph", False, n) for arch, ws in keys for n in sizes]


def engine_decisions(root: Path, probes: list[Probe]) -> list[str]:
    return [dispatch(root, p.arch, p.world_size, p.nbytes) for p in probes]


def artune_decisions(root: Path, probes: list[Probe]) -> list[str]:
    imported = read(str(root))
    return decide_all(imported.tables, probes, imported.findings)


ORACLE = Oracle(
    runs="the toy engine's own dispatch (its table file read line by line)",
    releases=(),
    probes=probes,
    engine_decisions=engine_decisions,
    artune_decisions=artune_decisions,
)

ENGINE = EnginePlugin(
    name="toy",
    label="Toy",
    read=read,
    files=(FILE,),
    table_file=FILE,
    write=write,
    oracle=lambda: ORACLE,
)
