"""Build a ``Review`` from two table sources: what moves, the questions, the evidence, the verdict.

Each side is opened as every command opens a table source
(``artune.sources.open_source``); ``--base REV`` reads the base side
from git (``artune.formats.gitrev``) with the same reader. What moves is
``artune.table.diff`` per arch: routes, so that run-time availability stays
out of the comparison, and the engine's own rules (its caps, clips, world
sizes with no config, arches without a row). The questions are what ``artune
check`` prints for each side, matched between the sides without their file
and line (lines shift between revisions). The evidence weighs the moved
rows with the cost model (``artune.review.regret``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from artune import catalog
from artune.catalog import SPECS
from artune.errors import ArtuneError, TableError
from artune.review.asks import across_hosts, covering, evidence_questions, modelled_losses, moved_spans, under_switch
from artune.review.causes import cause, few, function_changes, row_changes
from artune.review.evidence import read_sweeps, score_sweeps
from artune.review.measured import log_sweep, measured_losses
from artune.review.questions import AnswerContext, ranked, world_sizes_named
from artune.review.regret import measured_regret, modelled_regret
from artune.review.switches import Reader, engine_reader, switched
from artune.review.switches import key as switch_key
from artune.review.types import (
    ArchChange,
    Coverage,
    EvidenceQuestion,
    Move,
    ParamChange,
    Question,
    RegretEvidence,
    Review,
    Side,
    world_sizes,
)
from artune.review.verdict import verdict
from artune.sources import Source, open_source, source_findings
from artune.table.check import Finding
from artune.table.decide import decide
from artune.table.diff import Difference, diff_tables
from artune.table.family import conservative_default
from artune.table.types import MODES, Table

#: world sizes the coverage row always looks at: a node of up to 16 GPUs (SGLang plans 16)
COVERED = range(2, 17)


@dataclass(frozen=True)
class Opened:
    """One side, read: its source, the text it was given as, and how to name its temporary paths."""

    spec: str
    source: Source
    label: str
    rename: Callable[[str], str] = field(default=lambda text: text)
    engine: str = ""  # the engine whose tables these are ("vllm", "sglang"), or "" for artune's own
    #: the engine's files read again (under its switches, for its functions); None for artune's own tables
    reader: Reader | None = None


def engine_of(spec: str) -> str:
    """The engine a table source is of: ``vllm:PATH``, ``vllm==0.33.0``, ``reference:vllm`` give "vllm"; else ""."""
    from artune.formats import ENGINES
    from artune.formats.releases import release_spec

    head = spec.rpartition("@")[0] if "@" in spec else spec
    try:
        release = release_spec(head)
    except TableError:
        release = None
    if release is not None:
        return release[0]
    name, sep, rest = head.partition(":")
    if sep and name in ENGINES:
        return name
    if sep and name == "reference":
        return next((e for e in ENGINES if rest.startswith(e)), "")
    return ""


def open_side(role: str, spec: str, base: str | None = None) -> Opened:
    """Read one side; with ``base``, ``spec`` (``ENGINE:PATH``) as it is at git revision ``base``.

    ``TableError`` names the side and the problem when it cannot be read.
    """
    try:
        if base is None:
            return Opened(spec, open_source(spec), spec, engine=engine_of(spec), reader=_reader(spec))
        from artune.formats import ENGINES
        from artune.formats.gitrev import engine_members, revision_tree

        engine, sep, path = spec.partition(":")
        if not sep or engine not in ENGINES or not path:
            raise TableError(f"--base reads an engine's git work tree: give {' or '.join(ENGINES)}:PATH, not {spec}")
        with revision_tree(path, base, engine_members(engine)) as tree:
            source = open_source(f"{engine}:{tree.path}")
            reader = engine_reader(engine, str(tree.path))
            reader = reader.fill() if reader is not None else None  # the revision's files go with the block
        return Opened(f"{spec} at {base}", source, f"commit {tree.commit[:12]}", tree.rename, engine, reader)
    except ArtuneError as err:
        from artune.errors import ReleaseUnavailable

        kind = ReleaseUnavailable if isinstance(err, ReleaseUnavailable) else TableError
        raise kind(f"{role} side {spec}{f' at {base}' if base else ''} cannot be read: {err}") from None


def differences(before: Source, after: Source) -> list[tuple[str, Difference]]:
    """Every difference of what the two sources run, per arch either has (``pairs``)."""
    return [(arch, d) for arch, ta, tb in pairs(before, after) for d in diff_tables(ta, tb)]


def _causes(
    before: Reader | None, after: Reader | None, switched_causes: Mapping[tuple, tuple[str, ...]]
) -> Callable[[str, Difference], tuple[str, ...]]:
    """A difference's cause (``artune.review.causes``): a switch's new default where the switches name it, else
    the rows at its arch and world size, else the functions that changed."""
    rows: dict | None = None
    functions: list[str] | None = None

    def of(arch: str, d: Difference) -> tuple[str, ...]:
        nonlocal rows, functions
        if rows is None:
            rows, functions = row_changes(before, after), function_changes(before, after)
        return cause([(arch, d.world_size)], switched_causes.get(switch_key(arch, d), ()), rows, functions or [])

    return of


def _ask_causes(ask: EvidenceQuestion, found: Sequence[Move]) -> tuple[str, ...]:
    """The causes of the moves an ask holds (same arch, world size, topology, switch)."""
    topology = (ask.hosts, ask.nvlink) if ask.hosts > 1 else (1, "host")
    return tuple(
        dict.fromkeys(
            part
            for m in found
            if m.switch == ask.switch
            and ask.arch in m.arch.split(", ")
            and ask.world_size in m.world_sizes
            and topology in m.topologies
            for part in m.cause
        )
    )


def _concerns_with_causes(concerns: Sequence[Question], found: Sequence[Move]) -> tuple[Question, ...]:
    """A loss the model predicts (X113) or a kernel the evidence lacks (X114) at moved ranges, with what moved
    them: the causes of the moves at its arch and world sizes (the others as they are)."""
    out = []
    for q in concerns:
        parts = [
            part
            for m in found
            if q.code in ("X113", "X114")
            and set(q.arch.split(", ")) & set(m.arch.split(", "))
            and set(q.world_sizes) & set(m.world_sizes)
            for part in m.cause
        ]
        parts = list(dict.fromkeys(parts))
        out.append(replace(q, message=f"{q.message}; moved by {few(parts)}") if parts else q)
    return tuple(out)


def _reader(spec: str) -> Reader | None:
    """The engine's files of ``spec`` read again (``artune.review.switches``), where ``spec`` is an engine's."""
    from artune.formats import engine_source

    head = spec.rpartition("@")[0] if "@" in spec and not spec.startswith("@") else spec
    try:
        found = engine_source(head)
    except ArtuneError:
        return None
    return engine_reader(*found) if found is not None else None


# ------------------------------------------------------------------ pairs of tables


def _set_tables(source: Source) -> dict[str, Table]:
    """Arch -> table, in the order the source lists them; a set's default as "default"."""
    if source.table_set is None:
        return {t.platform.arch: t for t in source.tables}
    tables = dict(source.table_set.tables)
    if source.table_set.default is not None:
        tables["default"] = source.table_set.default
    return tables


def _resolve(source: Source, arch: str) -> Table:
    """What ``source`` runs on ``arch``: its row, the set's own rule for an arch without one, or its table."""
    if source.table_set is not None:
        if arch == "default" and source.table_set.default is not None:
            return source.table_set.default
        return source.table_set.resolve(arch, quiet=True)  # the review names what is borrowed
    found = [t for t in source.tables if t.platform.arch == arch]
    return found[0] if found else source.tables[0]


def _single(source: Source) -> bool:
    return source.table_set is None


def pairs(before: Source, after: Source) -> list[tuple[str, Table, Table]]:
    """``(arch, before's table, after's table)`` for every arch either side has a row for.

    A side without a row for an arch gives what it runs there (an engine's
    own fallback, artune's family chain). A side that is one table (a TOML)
    is compared at its own arch only, with what the other side runs there.
    """
    if _single(before) and _single(after):
        ta, tb = before.tables[0], after.tables[0]
        arch = ta.platform.arch
        return [(arch if arch == tb.platform.arch else f"{arch} -> {tb.platform.arch}", ta, tb)]
    if _single(before) or _single(after):
        arch = (before if _single(before) else after).tables[0].platform.arch
        return [(arch, _resolve(before, arch), _resolve(after, arch))]
    a, b = _set_tables(before), _set_tables(after)
    keys = sorted(dict.fromkeys([*a, *b]), key=lambda arch: arch == "default")  # the engine's default last
    return [(arch, a.get(arch) or _resolve(before, arch), b.get(arch) or _resolve(after, arch)) for arch in keys]


# ------------------------------------------------------------------ what moves


def _group(items: Iterable[tuple[tuple, int, str]]) -> list[tuple[tuple, tuple[int, ...], tuple[str, ...]]]:
    """Rows keyed by ``key`` with the (world size, mode) pairs they hold: one row per key and world-size set.

    A key whose world sizes are the same in every mode gives one row for all
    its modes; otherwise one row per mode.
    """
    found: dict[tuple, dict[str, set[int]]] = {}
    for key, ws, mode in items:
        found.setdefault(key, {}).setdefault(mode, set()).add(ws)
    out: list[tuple[tuple, tuple[int, ...], tuple[str, ...]]] = []
    for key, by_mode in found.items():
        sets = {frozenset(s) for s in by_mode.values()}
        if len(sets) == 1:
            out.append((key, tuple(sorted(next(iter(sets)))), tuple(m for m in MODES if m in by_mode)))
        else:
            out += [(key, tuple(sorted(by_mode[m])), (m,)) for m in MODES if m in by_mode]
    return out


def _shape(d: Difference) -> str:
    return f"hidden {d.hidden} {d.fusion}" if d.hidden else ""


def moves(
    found: Sequence[tuple[str, Difference]],
    cause_of: Callable[[str, Difference], tuple[str, ...]] | None = None,
    switch: str = "",
) -> tuple[Move, ...]:
    """The differences grouped over topologies, world sizes and modes, by arch, then by size.

    A difference that repeats at one world size and mode across host counts
    is one move naming its topologies; then world sizes and modes with the
    same topologies share a move, and arches that move alike share one.
    ``cause_of`` names each difference's cause, which keeps apart
    differences of different causes; ``switch`` is the setting they move under.
    """
    topologies: dict[tuple[tuple, int, str], set[tuple[int, str]]] = {}
    for arch, d in found:
        why = cause_of(arch, d) if cause_of is not None else ()
        key = (arch, d.lo, d.hi, d.a, d.b, d.multicast, _shape(d), why)
        topologies.setdefault((key, d.world_size, d.mode), set()).add((d.hosts, d.nvlink.value))
    rows = _group(((*key, tuple(sorted(topos))), ws, mode) for (key, ws, mode), topos in topologies.items())
    archs: dict[tuple, list[str]] = {}
    for (arch, lo, hi, a, b, multicast, shape, why, topos), ws, modes in rows:
        archs.setdefault((ws, modes, lo, hi, a, b, multicast, topos, shape, why), []).append(arch)
    out = [Move(", ".join(names), *key, switch) for key, names in archs.items()]
    order = {arch: i for i, arch in enumerate(dict.fromkeys(arch for arch, _ in found))}
    first = lambda m: order[m.arch.split(", ")[0]]  # noqa: E731
    # the moves on one host first (what is weighed), then those only across hosts
    return tuple(sorted(out, key=lambda m: (not m.on_one_host, first(m), m.world_sizes, m.lo, MODES.index(m.modes[0]))))


def arch_changes(before: Opened, after: Opened) -> tuple[ArchChange, ...]:
    """Arches with rows on one side only, and what the other side runs there."""
    if _single(before.source) or _single(after.source):
        return ()  # a single table is compared at its own arch, whatever the other side holds
    a, b = _set_tables(before.source), _set_tables(after.source)
    out: list[ArchChange] = []
    for arch in b.keys() - a.keys():
        out.append(ArchChange(arch, "new", before.rename(_runs(_resolve(before.source, arch)))))
    for arch in a.keys() - b.keys():
        out.append(ArchChange(arch, "removed", after.rename(_runs(_resolve(after.source, arch)))))
    order = sorted(dict.fromkeys([*a, *b]), key=lambda arch: arch == "default")
    return tuple(sorted(out, key=lambda c: order.index(c.arch)))


def _runs(table: Table) -> str:
    """What a side runs on ``arch`` without a row of its own, in words."""
    if table.borrowed:
        return "; ".join(table.borrowed)
    return f"the table of arch {table.platform.arch} ({table.name})"


def param_changes(found: Sequence[tuple[str, Table, Table]]) -> tuple[ParamChange, ...]:
    """Parameters (block counts and the like) that change between plans both sides have."""
    items: list[tuple[tuple, int, str]] = []
    for arch, ta, tb in found:
        for pa in ta.plans:
            pb = tb.plan(pa.world_size, pa.mode, pa.hosts, pa.multicast, pa.nvlink)
            if pb is None:
                continue
            for name in dict.fromkeys(n for n in pa.algorithms if n in pb.algorithms):
                have_a, have_b = pa.params_for(name), pb.params_for(name)
                keys = dict.fromkeys([*have_a, *have_b, *(SPECS[name].required_params if name in SPECS else ())])
                for key in keys:
                    va, vb = have_a.get(key), have_b.get(key)
                    if va != vb:
                        text = (None if va is None else str(va), None if vb is None else str(vb))
                        items.append(((arch, name, key, *text), pa.world_size, pa.mode))
    rows = _group(items)
    return tuple(ParamChange(k[0], ws, modes, k[1], k[2], k[3], k[4]) for k, ws, modes in rows)


def _nccl_everywhere(table: Table) -> tuple[int, ...]:
    """The world sizes at which ``table`` runs its process group for every size, mode, dtype and multicast.

    Decided as a call would be (``decide`` under the table's rules, with what
    the catalog lets run for that call), at every bound of every plan, 16
    bytes either side, and a log grid from 16 B to 1 GiB.
    """
    group = conservative_default(table.platform).plans[0].fallback
    bounds = {b.upto for p in table.plans for b in p.bands if b.upto is not None}
    probes = sorted({n for b in bounds for n in (b - 16, b, b + 16) if n >= 0} | {16 << k for k in range(27)})
    calls = [(dtype, mc) for dtype in ("bfloat16", "float16", "float32") for mc in (True, False)]
    sizes = sorted({*COVERED, *(p.world_size for p in table.plans if p.world_size > 1)})

    def only_group(ws: int) -> bool:
        return all(
            decide(table, n, ws, mode, catalog.available(ws, dtype, n, mc)).algorithm == group
            for mode in MODES
            for dtype, mc in calls
            for n in probes
        )

    return tuple(ws for ws in sizes if only_group(ws))


def coverage(found: Sequence[tuple[str, Table, Table]]) -> tuple[Coverage, ...]:
    """Per arch, the world sizes that fall to the process group for every size, on each side."""
    rows = [Coverage(arch, _nccl_everywhere(ta), _nccl_everywhere(tb)) for arch, ta, tb in found]
    return tuple(r for r in rows if r.before or r.after)


# ------------------------------------------------------------------ questions


def findings(source: Source) -> list[Finding]:
    """What ``artune check`` prints for the source (``artune.sources.source_findings``)."""
    return source_findings(source)


def _key(finding: Finding) -> tuple:
    """A finding by its code, its place (arch, world size, hosts, mode, machine) and its data (the world sizes
    it names and the values it is written from: ``Finding.args``), so that a finding is the same finding across
    releases: not by its words, its file and line (lines shift, files move) or a release's version."""
    place = (finding.arch, finding.world_size, finding.hosts, finding.mode, finding.multicast)
    return (finding.code, *place, finding.world_sizes, finding.args)


def _questions(items: Sequence[Finding], rename: Callable[[str], str]) -> tuple[Question, ...]:
    """One question per message and place, its world sizes and modes merged; arches with the same merged."""
    rows = _group(
        (
            (f.severity, rename(f.source or f.table), f.arch, f.hosts, rename(f.message), f.code, f.world_sizes),
            f.world_size or 0,
            f.mode or "",
        )
        for f in items
    )
    by_arch: dict[tuple, list[str]] = {}
    for (severity, where, arch, hosts, message, code, named), sizes, modes in rows:
        scope = f"ws {world_sizes(s for s in sizes if s)}" if any(sizes) else ""
        scope += f" across {hosts} hosts" if hosts > 1 else ""
        scope += f" ({', '.join(m for m in modes if m)})" if any(modes) else ""
        at = (tuple(s for s in sizes if s), tuple(m for m in modes if m))
        by_arch.setdefault((severity, where, scope.strip(), message, code, at, named), []).append(arch)
    out = [
        Question(sev, where, ", ".join(archs), scope, message, code, *at, named=named)
        for (sev, where, scope, message, code, at, named), archs in by_arch.items()
    ]
    return tuple(sorted(out, key=lambda q: (_SEVERITY.get(q.severity, 3), q.where, q.arch)))


_SEVERITY = {"error": 0, "warning": 1, "note": 2}


def split_findings(
    before: Opened, after: Opened
) -> tuple[tuple[Question, ...], tuple[Question, ...], tuple[Question, ...], tuple[Question, ...]]:
    """``(new questions, not introduced here, resolved, new notes)``: AFTER's findings against BEFORE's."""
    had = {_key(f) for f in findings(before.source)}
    now = findings(after.source)
    has = {_key(f) for f in now}
    new = [f for f in now if _key(f) not in had]
    old = [f for f in now if _key(f) in had and not f.note]
    gone = [f for f in findings(before.source) if _key(f) not in has and not f.note]

    listed = _questions
    return (
        listed([f for f in new if not f.note], after.rename),
        listed(old, after.rename),
        listed(gone, before.rename),
        listed([f for f in new if f.note], after.rename),
    )


def about_moves(
    questions: Sequence[Question], moved: Sequence[Move]
) -> tuple[tuple[Question, ...], tuple[Question, ...]]:
    """``(asked, unmoved)``: a new finding about world sizes whose decisions this change does not move at any of
    its arches is no question for this change (SGLang 0.5.19's "world sizes 9-15 have no config" at 10.0, where
    nccl ran before too); a finding that names no world size, or a moved one, is asked."""
    at = {(arch, ws) for m in moved for arch in m.arch.split(", ") for ws in m.world_sizes}
    every = {arch for arch, _ in at}
    asked: list[Question] = []
    unmoved: list[Question] = []
    for q in questions:
        sizes = world_sizes_named(q)
        mine = every if q.arch in ("*", "") else set(q.arch.split(", "))
        if sizes and q.severity != "error" and not any((arch, ws) in at for arch in mine for ws in sizes):
            unmoved.append(q)
        else:
            asked.append(q)
    return tuple(asked), tuple(unmoved)


#: the moves of one unknown test a question names before it counts the rest
_UNKNOWN_SHOWN = 6


def unknown_outcomes(
    questions: Sequence[Question], unmoved: Sequence[Question], after: Opened
) -> tuple[tuple[Question, ...], tuple[Question, ...]]:
    """``(asked, unmoved)`` with each question about an ``if`` test AFTER's evaluator cannot know (E401, taken
    as false) saying what that decision decides: AFTER read again with the test taken as true, and the ranges
    where the two readings run otherwise, each with the answer under both outcomes (at most
    ``_UNKNOWN_SHOWN``, on one host first, then counted), or that either outcome runs the same everywhere. One
    that decides some range is asked, even where this change moves nothing there: never the false outcome
    alone, unsaid."""
    if after.reader is None or not any(q.code == "E401" for q in (*questions, *unmoved)):
        return tuple(questions), tuple(unmoved)
    readings = {after.rename(where): found for where, found in after.reader.unknowns().items()}
    asked: list[Question] = []
    rest: list[Question] = []
    for q, was_asked in [*((q, True) for q in questions), *((q, False) for q in unmoved)]:
        other = readings.get(q.where) if q.code == "E401" else None
        found = moves(differences(after.source, other)) if other is not None else ()
        if other is not None and not found:
            q = replace(q, message=f"{q.message}; either outcome runs the same at every size (read both ways)")
        elif found:
            shown = "; ".join(_outcomes(m) for m in found[:_UNKNOWN_SHOWN])
            more = f"; and {len(found) - _UNKNOWN_SHOWN} more range(s)" if len(found) > _UNKNOWN_SHOWN else ""
            sizes = tuple(sorted({ws for m in found for ws in m.world_sizes}))
            message = f"{q.message}; AFTER read both ways, the test decides at {shown}{more}"
            q = replace(q, message=message, world_sizes=q.world_sizes or sizes)
        (asked if was_asked or found else rest).append(q)
    return tuple(asked), tuple(rest)


def _outcomes(m: Move) -> str:
    """``9.0 ws 6 (16MiB, 32MiB] (graph, eager): nccl if it is false, symm_mem_multimem > nccl if it holds``."""
    from artune.sizes import format_span

    hosts = sorted({h for h, _ in m.topologies if h > 1})
    where = f" across {world_sizes(hosts)} hosts" if hosts and not m.on_one_host else ""
    machine = "" if m.multicast is None else f", multicast {'on' if m.multicast else 'off'}"
    return (
        f"{m.arch} ws {world_sizes(m.world_sizes)}{where} {format_span(m.lo, m.hi)} ({', '.join(m.modes)}{machine}): "
        f"{' > '.join(m.before)} if it is false, {' > '.join(m.after)} if it holds"
    )


# ------------------------------------------------------------------ evidence


def side(opened: Opened) -> Side:
    """A side's provenance per arch (what each table says of where its figures came from)."""
    rows: list[tuple[str, str]] = []
    for arch, table in _set_tables(opened.source).items():
        text = str(table.provenance) + "".join(f"; {note}" for note in table.borrowed)
        rows.append((arch, opened.rename(text)))
    return Side(opened.spec, opened.label, tuple(rows))


def copies(source: Source) -> tuple[str, ...]:
    """Per arch, the earlier arch whose plans (bands, parameters, fallback) it repeats most, where any."""
    tables = {arch: t for arch, t in _set_tables(source).items() if arch != "default"}
    plans = {arch: {p.key: (p.bands, p.params, p.fallback) for p in t.plans} for arch, t in tables.items()}
    out: list[str] = []
    for i, arch in enumerate(plans):
        mine = plans[arch]
        equal = {other: sum(plans[other].get(k) == v for k, v in mine.items()) for other in list(plans)[:i]}
        best = max(equal, key=equal.__getitem__, default=None)
        if best is not None and equal[best]:
            out.append(f"{arch} = {best} in {equal[best]} of {len(mine)} plans")
    return tuple(out)


def regrets(
    found: Sequence[tuple[str, Table, Table]], moved: Sequence[Move], logs: Sequence[str]
) -> tuple[tuple[RegretEvidence, ...], tuple[str, ...]]:
    """The regret of both sides' rows over the moved sizes, measured (``logs``) and modelled (the presets).

    Returns the rows, and per arch that moved with nothing to weigh it, why.
    """
    tables = {arch: (ta, tb) for arch, ta, tb in found}
    spans: dict[tuple[str, int, str], list[tuple[int, int | None]]] = {}
    for move in moved:
        for arch in move.arch.split(", "):
            for ws in move.world_sizes:
                for mode in move.modes:
                    spans.setdefault((arch, ws, mode), []).append((move.lo, move.hi))
    out: list[RegretEvidence] = []
    why: dict[str, list[str]] = {}
    for (arch, ws, mode), ranges in spans.items():
        ta, tb = tables[arch]
        out += measured_regret(logs, arch, ta, tb, ws, mode, ranges)
        modelled = modelled_regret(arch, ta, tb, ws, mode, ranges)
        if isinstance(modelled, RegretEvidence):
            out.append(modelled)
        else:
            why.setdefault(arch, []).append(modelled)
    weighed = {r.arch for r in out}
    missing = [
        f"arch {arch}: {'; '.join(dict.fromkeys(reasons))}" for arch, reasons in why.items() if arch not in weighed
    ]
    return tuple(out), tuple(missing)


# ------------------------------------------------------------------ the review


def build_review(
    before: Opened,
    after: Opened,
    logs: Sequence[str] = (),
    command: str = "",
    evidence: Sequence[str] = (),
    arch: str = "",
) -> Review:
    """The review of the change from ``before`` to ``after``.

    ``logs`` are artune measurement logs, ``evidence`` engine benchmark
    outputs (``FILE[@ARCH]``; ``arch`` for those that name none): what they
    cover answers the moves' questions. ``command`` names how it was made
    (default: ``artune review BEFORE AFTER``).
    """
    found = pairs(before.source, after.source)
    diffs = differences(before.source, after.source)
    engine = after.engine or before.engine
    extra = switched(engine, before.reader, after.reader, diffs, differences, before.source, after.source)
    why = _causes(before.reader, after.reader, extra.causes)
    shown = moves(diffs, why)
    # what moves only under a switch's other value: asked about with the switch set, never weighed
    under = tuple(m for name, found_there in extra.moves.items() for m in moves(found_there, why, name))
    # the measurements and the model weigh one host's calls: the moves across hosts are shown, not weighed
    moved = tuple(m for m in shown if m.on_one_host)
    arches = arch_changes(before, after)
    params = param_changes(found)
    questions, inherited, resolved, notes = split_findings(before, after)
    questions, unmoved = about_moves(questions, shown)
    questions, unmoved = unknown_outcomes(questions, unmoved, after)
    regret, unmodelled = regrets(found, moved, logs)
    spans = moved_spans(moved, engine)
    scored = score_sweeps(read_sweeps(evidence, arch, spans), found, moved, spans)
    sweeps = [*(log_sweep(path) for path in logs), *scored.coverage]
    answered = {spot for spot, ranges in spans.items() if all(covering(spot, r, sweeps) for r in ranges)}
    # a move across hosts is a question too: no sweep artune reads names its topology
    asks = (*evidence_questions(spans, sweeps, engine), *across_hosts(shown, engine))
    for name in extra.moves:
        mine = [m for m in under if m.switch == name]
        asked = (*evidence_questions(moved_spans([m for m in mine if m.on_one_host], engine), [], engine),)
        asks += under_switch((*asked, *across_hosts(mine, engine)), name)
    asks = tuple(replace(a, causes=_ask_causes(a, (*shown, *under))) for a in asks)
    by_default = shown
    shown = (*shown, *under)
    logged = measured_losses(regret, moved)  # the rows so far are the logs' and the model's
    regret = (*regret, *scored.regret)
    concerns = (*scored.concerns, *logged, *modelled_losses(regret, answered, engine))
    kind, line = verdict(shown, arches, params, questions, asks, concerns)
    nccl = coverage(found)
    planned = {
        a: tuple(sorted({p.world_size for p in tb.plans if p.hosts == 1 and p.world_size > 1})) for a, _, tb in found
    }
    context = AnswerContext(after.spec, engine, asks, nccl, planned)
    measured = "".join(f" --measured {log}" for log in logs) + "".join(f" --evidence {e}" for e in evidence)
    return Review(
        command=command or f"artune review {before.spec} {after.spec}{measured}",
        before=side(before),
        after=side(after),
        moves=shown,
        arches=arches,
        params=params,
        coverage=nccl,
        ranked=_concerns_with_causes(ranked(questions, concerns, asks, context), by_default),
        questions=questions,
        inherited=inherited,
        unmoved=unmoved,
        resolved=resolved,
        notes=notes,
        asks=asks,
        concerns=concerns,
        copies=copies(after.source),
        regret=regret,
        evidence=scored.report,
        unmodelled=unmodelled,
        verdict=kind,
        summary=line,
        exit_code=kind.exit_code,
    )
