"""``artune import``, ``export`` and ``diff``: the engines' own files in and out, and table changes."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from artune.cli import arch_option
from artune.errors import TableError
from artune.formats.registry import READABLE, WRITABLE, engine
from artune.sizes import format_span
from artune.sources import SOURCES, Source, open_source
from artune.table.diff import diff_tables
from artune.table.io import dump_table, dumps_table
from artune.table.types import MODES, Table

TARGETS = WRITABLE


def register(commands: Any) -> None:
    """Add the import, export and diff sub-commands to the parser."""
    imp = commands.add_parser("import", help="read an engine's table file into artune TOML (provenance: published)")
    imp.add_argument("engine", choices=READABLE)
    imp.add_argument("path", metavar="PATH", help="the engine's checkout, or its table file")
    imp.add_argument("--out", metavar="DIR", help="write one TOML per arch here (default: print them)")
    imp.set_defaults(run=run_import)

    exp = commands.add_parser("export", help="print a table in an engine's format, ready to paste")
    exp.add_argument("table", metavar=SOURCES)
    exp.add_argument("--to", required=True, choices=TARGETS)
    exp.add_argument(
        "--arch", type=arch_option, help="the arch to export (a set's arch, or the SGLang key for a CPU table)"
    )
    exp.add_argument("--standalone", action="store_true", help="sglang: a whole configs file, not only the function")
    exp.set_defaults(run=run_export)

    diff = commands.add_parser("diff", help="where two tables decide differently; exit 1 when they differ")
    diff.add_argument("a", metavar="A")
    diff.add_argument("b", metavar="B")
    diff.add_argument("--world-size", type=int, default=None)
    diff.add_argument("--mode", choices=MODES, default=None)
    diff.add_argument("--arch", type=arch_option, help="compare the two sets at this arch only")
    diff.add_argument("--hidden", type=int, help="tables that decide by shape: compare at this hidden size only")
    diff.add_argument("--tokens", type=int, help="tables that decide by shape: compare at this token count only")
    diff.set_defaults(run=run_diff)


def _command(args: argparse.Namespace) -> str:
    return "artune " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else f"artune {args.command}"


# ------------------------------------------------------------------ import


def run_import(args: argparse.Namespace) -> int:
    """Read the engine's file; print (or write) one TOML per arch, and the findings to stderr."""
    from artune.formats import read_engine

    imported = read_engine(args.engine, args.path)
    tables = dict(imported.tables.tables)
    if imported.tables.default is not None:
        tables["default"] = imported.tables.default
    for finding in imported.findings:
        print(finding, file=sys.stderr)
    if args.out:
        for arch, table in tables.items():
            path = Path(args.out) / f"{args.engine}-{arch.replace('/', '-')}.toml"
            dump_table(table, path)
            print(path)
        return 0
    for arch, table in tables.items():
        print(f"# ---- {imported.label} arch={arch}")
        print(dumps_table(table))
    return 0


# ------------------------------------------------------------------ export


def _export_tables(source: Source, arch: str | None, target: str) -> list[Table]:
    if len(source.tables) == 1:
        return source.tables
    if arch:
        assert source.table_set is not None
        return [source.table_set.resolve(arch)]
    if engine(target).writes_sets and source.table_set is not None:
        return list(source.table_set.tables.values())
    raise TableError(f"the source holds {len(source.tables)} tables; pick one with --arch (or SOURCE@ARCH)")


def run_export(args: argparse.Namespace) -> int:
    """Print the paste-ready text; what the format cannot hold goes to stderr."""
    source = open_source(args.table)
    tables = _export_tables(source, args.arch, args.to)
    command = _command(args)
    write = engine(args.to).write
    assert write is not None  # --to's choices are the engines that write
    out = write(tables, command, args.arch, args.standalone)
    print(out.text, end="")
    for note in out.dropped:
        print(f"artune export: projection: {note}", file=sys.stderr)
    return 0


# ------------------------------------------------------------------ diff


def _pairs(a: Source, b: Source, arch: str | None) -> list[tuple[str, Table, Table]]:
    if arch:
        pick = [s.table_set.resolve(arch) if s.table_set is not None else s.tables[0] for s in (a, b)]
        return [(arch, pick[0], pick[1])]
    if len(a.tables) == 1 and len(b.tables) == 1:
        return [(a.tables[0].platform.arch, a.tables[0], b.tables[0])]
    if len(a.tables) == 1 or len(b.tables) == 1:
        one, many = (a, b) if len(a.tables) == 1 else (b, a)
        key = one.tables[0].platform.arch
        assert many.table_set is not None
        other = many.table_set.resolve(key)
        return [(key, one.tables[0], other) if one is a else (key, other, one.tables[0])]
    assert a.table_set is not None and b.table_set is not None
    keys = list(dict.fromkeys([*a.table_set.tables, *b.table_set.tables]))
    pairs = [(k, a.table_set.resolve(k), b.table_set.resolve(k)) for k in keys]
    if a.table_set.default is not None or b.table_set.default is not None:
        da = a.table_set.default or a.table_set.resolve("default")
        db = b.table_set.default or b.table_set.resolve("default")
        pairs.append(("default", da, db))
    return pairs


def _route(names: tuple[str, ...]) -> str:
    return " > ".join(names)


def run_diff(args: argparse.Namespace) -> int:
    """Print the differing byte ranges per (arch, world size, mode); 0 same, 1 different."""
    import logging

    a, b = open_source(args.a), open_source(args.b)
    family = logging.getLogger("artune.table.family")
    level = family.level
    family.setLevel(logging.ERROR)  # borrowing is named in the output; the level is restored for the caller
    try:
        return _print_diff(a, b, args)
    finally:
        family.setLevel(level)


def _arrivals(a: Source, b: Source) -> list[str]:
    """The arches with a table of their own in B only (they arrive) or in A only (they leave)."""
    if a.table_set is None or b.table_set is None:
        return []
    mine, theirs = set(a.table_set.tables), set(b.table_set.tables)
    arrive = [k for k in b.table_set.tables if k not in mine]
    leave = [k for k in a.table_set.tables if k not in theirs]
    return [f"arch {k} arrives in B" for k in arrive] + [f"arch {k} leaves in B" for k in leave]


def _print_diff(a: Source, b: Source, args: argparse.Namespace) -> int:
    """One line over every arch first (what differs where, what is identical, which arches arrive or leave),
    then each arch's ranges."""
    found = [
        (arch, ta, tb, diff_tables(ta, tb, args.world_size, args.mode, hidden=args.hidden, tokens=args.tokens))
        for arch, ta, tb in _pairs(a, b, args.arch)
    ]
    differ = sum(len(d) for *_, d in found)
    moved = ", ".join(f"{arch} ({len(d)})" for arch, _, _, d in found if d)
    same = ", ".join(arch for arch, _, _, d in found if not d)
    parts = [f"{differ} range(s) differ on arch {moved}" if differ else "identical on every arch compared"]
    parts += [f"identical on arch {same}"] if differ and same else []
    parts += _arrivals(a, b) if not args.arch else []
    print(f"{args.a} -> {args.b}: " + "; ".join(parts))
    for arch, ta, tb, ranges in found:
        header = f"arch={arch}: A {ta.name} [{ta.platform}]; B {tb.name} [{tb.platform}]"
        if not ranges:
            print(f"{header}: identical")
            print(f"  A provenance: {ta.provenance}")
            print(f"  B provenance: {tb.provenance}")
            continue
        print(f"{header}: {len(ranges)} range(s) differ")
        for d in ranges:
            span = format_span(d.lo, d.hi) if not d.hidden else f"tokens {d.lo}" + (f"..{d.hi}" if d.hi != d.lo else "")
            span = span if d.hi is not None or not d.hidden else f"tokens {d.lo}+"
            print(f"  {d.where} {span}: A {_route(d.a)} | B {_route(d.b)}")
        print(f"  A provenance: {ta.provenance}" + "".join(f"; {n}" for n in ta.borrowed))
        print(f"  B provenance: {tb.provenance}" + "".join(f"; {n}" for n in tb.borrowed))
    return 1 if differ else 0


__all__ = ["register", "run_diff", "run_export", "run_import"]
