"""``artune check``: lints that find what is wrong or missing in a table.

Each finding is one line, ``TABLE: arch=.. ws=.. mode=..: message``. The
lints: bands that cover no size (out of order or overlapping), unknown
algorithm names, algorithms missing a parameter they need, algorithms whose
engine never runs them at the plan's world size, world sizes with no plan,
modes present for one world size and missing for another, CPU plans in graph
mode, and figures that were not measured on this arch (inherited). Modelled
figures (``artune plan``) are reported as *notes*: they say what the model
predicts and how sure it is, and do not count as findings.

For tables read from an engine's own files (``artune.formats``) the readers
add the reviewers' questions, with the file and line of each: arches whose
rows equal another arch's (``copied_archs``), rules that can never be reached
(``shadowed_rules``, ``unaligned_rules``), world sizes that raise or fall
through, and bounds a workspace cap clips. The pure parts live here.

Topology: plans are per number of hosts, so world sizes missing between the
smallest and largest planned one for a number of hosts are holes too, and an
algorithm that cannot run on the plan's topology (shared memory across
hosts, ``hier_shm`` on one host) is flagged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from artune.catalog import SPECS, Conditions
from artune.findings import KINDS
from artune.sizes import format_bound
from artune.table.priority import SizeRule
from artune.table.types import MODES, Band, Mode, Plan, Provenance, ShapePlan, Table


@dataclass(frozen=True)
class Finding:
    """One problem in a table: its code, its place (table, arch, world size, mode, hosts, machine, ``source``),
    the data whoever acts on it reads (``world_sizes``, ``args``), and ``message``, written for a person from
    that data and never parsed back (``tests/test_layers.py`` holds that)."""

    table: str
    arch: str
    message: str
    world_size: int | None = None
    mode: str | None = None
    source: str = ""  # "file:line" in an engine's own file, when the finding comes from one
    #: "error" (the engine raises, or runs a silently wrong path), "warning" (a question for the author),
    #: "note" (information, such as modelled figures: not a problem)
    severity: str = "warning"
    hosts: int = 1
    multicast: bool | None = None  # the plan's machine (Plan.multicast); None: any
    #: the finding's kind, stable across releases, as a linter's rule codes are (``check --ignore CODE``);
    #: required, and one that ``artune.findings.KINDS`` holds, with its docs text
    code: str = field(kw_only=True)
    #: the world sizes the finding is about on every arch it names, as its message states them ("raises at world
    #: sizes 2, 4, 6, 8", "world sizes 9-15 have no config"), for whoever acts on them; () where it names none
    world_sizes: tuple[int, ...] = field(default=(), kw_only=True)
    #: the values its message is written from beyond its place and world sizes (the arch an arch copies, the
    #: sizes a cap clips, the algorithms a rule never reaches), never a release's version nor a file's line:
    #: with the code and the place, what makes it the same finding in another release (``artune review``)
    args: tuple[str | int | float, ...] = field(default=(), kw_only=True)

    def __post_init__(self) -> None:
        if self.code not in KINDS:  # a finding without a code, or one without its entry in the registry, is a bug
            raise ValueError(f"finding code {self.code!r} is not in artune.findings.KINDS")

    @property
    def note(self) -> bool:
        """Information, not a problem: it does not count as a finding."""
        return self.severity == "note"

    def __str__(self) -> str:
        where = f"arch={self.arch}"
        if self.world_size is not None:
            where += f" ws={self.world_size}"
        if self.hosts > 1:
            where += f" hosts={self.hosts}"
        if self.multicast is not None:
            where += f" multicast={'on' if self.multicast else 'off'}"
        if self.mode is not None:
            where += f" mode={self.mode}"
        # a finding in an engine's file names the file and line instead of the table; the code after the severity
        return f"{self.source or self.table}: {self.severity} {self.code}: {where}: {self.message}"


def raises_at(
    findings: Sequence[Finding], arch: str, world_size: int, multicast: bool | None = None, mode: str | None = None
) -> Finding | None:
    """The finding (E203) that says an engine's own code raises on one host at ``world_size`` on ``arch`` (a
    table's arch; ``default`` stands for every arch no table names), for a machine with or without
    ``multicast`` in ``mode`` (``None``: any), or ``None`` where none says so."""
    for found in findings:
        if found.code != "E203" or found.world_size != world_size or arch not in found.arch.split(", "):
            continue
        if multicast is not None and found.multicast is not None and found.multicast != multicast:
            continue
        if mode is None or found.mode is None or found.mode == mode:
            return found
    return None


def modelled_summary(provenance: Provenance) -> str:
    """``modelled by TOOL, not measured (predicted regret ...)`` for a modelled provenance."""
    regret = [part for part in provenance.notes.split("; ") if "predicted regret" in part]
    tool = f" by {provenance.tool}" if provenance.tool else ""
    return f"modelled{tool}, not measured" + (f" ({regret[0]})" if regret else "")


def check_table(table: Table, max_world_size: int | None = None) -> list[Finding]:
    """Every finding for ``table``; an empty list means clean.

    World sizes from 2 up to the largest planned one (or ``max_world_size``
    when given) must each have a plan in every mode the table uses, in a
    table with artune's rules (an engine's runs NCCL where it has none).
    """
    findings: list[Finding] = []

    def add(
        code: str, message: str, args: Args = (), plan: Plan | None = None, note: bool = False, sizes: Sizes = ()
    ) -> None:
        ws, mode = (plan.world_size, plan.mode) if plan else (None, None)
        findings.append(
            Finding(
                table.name,
                table.platform.arch,
                message,
                ws,
                mode,
                severity="note" if note else "warning",
                hosts=plan.hosts if plan else 1,
                multicast=plan.multicast if plan else None,
                code=code,
                args=args,
                world_sizes=sizes,
            )
        )

    # an engine's table: its reader reports copied rows and world sizes without a path, with file and line,
    # and artune's gap rules (nearest world size, other mode) are not the engine's
    own = table.rules == "artune"
    source = table.provenance
    if own and source.source == "inherited":
        origin = f" from arch {source.inherited_from}" if source.inherited_from else ""
        message = f"figures inherited{origin}, not measured on this arch; run 'artune tune' on this hardware"
        add("T301", message, (source.inherited_from or "",))
    elif source.source == "modelled":
        add(
            "M101",
            f"{modelled_summary(source)}; 'artune verify' or 'artune tune' on this hardware measures it",
            (modelled_summary(source),),
            note=True,
        )
    for plan in table.plans:
        if plan.provenance is not None and plan.provenance.source == "modelled":
            add("M101", f"plan {modelled_summary(plan.provenance)}", (modelled_summary(plan.provenance),), plan, True)
        for code, message, args in _plan_findings(table, plan):
            add(code, message, args, plan)
    for shape in table.shape_plans:
        for code, message, args in _shape_plan_findings(shape):
            add(code, message, args)
    # an engine's table has no plan where the engine runs its process group (its rules say so, and its
    # reader reports those world sizes once, with the file and line): not a hole in the table
    for code, message, args, sizes in _coverage_findings(table, max_world_size) if own and not table.by_shape else ():
        add(code, message, args, sizes=sizes)
    return findings


#: what a finding's message is written from (``Finding.args``), and the world sizes it names
Args = tuple[str | int | float, ...]
Sizes = tuple[int, ...]


def _plan_findings(table: Table, plan: Plan) -> list[tuple[str, str, Args]]:
    """``(code, message, args)`` per finding in one plan."""
    out: list[tuple[str, str, Args]] = []
    if table.platform.kind == "cpu" and plan.mode != "eager":
        out.append(("T108", f"mode {Mode(plan.mode).value!r} on a CPU table; CPU has only 'eager'", (plan.mode,)))
    if plan.provenance is not None and plan.provenance.source == "inherited":
        out.append(("T301", f"plan figures are {plan.provenance.source}, not measured", ()))
    out += _band_findings(plan.bands, format_bound)
    for name in plan.algorithms:
        spec = SPECS.get(name)
        if spec is None:
            out.append(("T103", f"unknown algorithm {name!r}; known: {', '.join(sorted(SPECS))}", (name,)))
            continue
        have = plan.params_for(name)
        for key in spec.required_params:
            if key not in have:
                out.append(("T104", f"{name} needs parameter {key!r} and has none (it will be skipped)", (name, key)))
        allowed = spec.conditions.world_sizes
        if allowed is not None and plan.world_size not in allowed:
            message = f"{name} never runs at world_size={plan.world_size} (only {sorted(allowed)})"
            out.append(("T105", message, (name, *sorted(allowed))))
        if (why := spec.topology_unmet(plan.hosts)) is not None:
            out.append(("T106", f"{name} {why} (it will never be available for this plan)", (name, why)))
        if (why := spec.kind_unmet(table.platform.kind)) is not None:
            out.append(("T109", f"{name} {why} (a {table.platform} table: it will never be available)", (name, why)))
    for name, _values in plan.params:
        if name not in SPECS:
            out.append(("T107", f"params for unknown algorithm {name!r}", (name,)))
    return out


def _band_findings(bands: tuple[Band, ...], bound: Callable[[int], str]) -> list[tuple[str, str, Args]]:
    """T101 (a band that covers nothing) and T102 (an algorithm twice in a band); ``bound`` writes a bound."""
    out: list[tuple[str, str, Args]] = []
    previous = -1
    for i, band in enumerate(bands, start=1):
        if band.upto is not None:  # an open-ended band (only the last) always extends the one before
            if band.upto <= previous:
                out.append(
                    (
                        "T101",
                        f"band {i} (upto {bound(band.upto)}) does not extend band {i - 1} "
                        f"(upto {bound(previous)}): bands out of order or overlapping, it covers no size",
                        (i, band.upto, previous),
                    )
                )
            previous = max(previous, band.upto)
        if len(set(band.candidates)) != len(band.candidates):
            out.append(("T102", f"band {i} lists an algorithm twice: {list(band.candidates)}", (i, *band.candidates)))
    return out


def _shape_plan_findings(plan: ShapePlan) -> list[tuple[str, str, Args]]:
    """``(code, message, args)`` per finding in one shape plan (its bands count tokens)."""
    out = [
        (code, f"{plan.label}: {message}", (plan.label, *args))
        for code, message, args in _band_findings(plan.bands, str)
    ]
    for name in plan.algorithms:
        if name not in SPECS:
            message = f"{plan.label}: unknown algorithm {name!r}; known: {', '.join(sorted(SPECS))}"
            out.append(("T103", message, (plan.label, name)))
    return out


def _coverage_findings(table: Table, max_world_size: int | None) -> list[tuple[str, str, Args, Sizes]]:
    """``(code, message, args, world sizes)`` per world size or mode a table of artune's rules leaves without a
    plan."""
    out: list[tuple[str, str, Args, Sizes]] = []
    single = [p for p in table.plans if p.hosts == 1]
    for hosts in sorted({p.hosts for p in table.plans} - {1}):
        have = {p.world_size for p in table.plans if p.hosts == hosts}
        holes = [ws for ws in range(min(have), max(have) + 1) if ws not in have]
        if holes:
            out.append(
                (
                    "T201",
                    f"hosts={hosts}: no plan for world sizes {_ranges(holes)} (between {min(have)} and {max(have)})",
                    (hosts,),
                    tuple(holes),
                )
            )
    if not single:
        return [("T203", "table has no single-host plans" if table.plans else "table has no plans", (), ())]
    modes = [m for m in MODES if any(p.mode == m for p in single)]
    sizes = {p.world_size for p in single}
    top = max(max(sizes), max_world_size or 0)
    for mode in modes:
        have = {p.world_size for p in single if p.mode == mode}
        holes = [ws for ws in range(2, top + 1) if ws not in have]
        if holes:
            message = f"mode={mode}: no plan for world sizes {_ranges(holes)} (up to {top})"
            out.append(("T201", message, (mode,), tuple(holes)))
        lacking = sorted(sizes - have)
        if lacking and len(modes) > 1:
            message = f"mode={mode} missing for world sizes {_ranges(lacking)} that other modes plan"
            out.append(("T202", message, (mode,), tuple(lacking)))
    return out


def _ranges(values: list[int]) -> str:
    """``[3, 5, 9, 10, 11]`` -> ``"3, 5, 9-11"``."""
    parts: list[str] = []
    start = prev = values[0]
    for v in [*values[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(parts)


# ------------------------------------------------------------------ engine tables


def copied_archs(tables: Mapping[str, Mapping[str, object]]) -> list[tuple[str, str, int, int]]:
    """Arches whose rows equal an earlier arch's in every table that lists them.

    ``tables`` maps a table's name to its rows per arch, in file order.
    Returns ``(arch, copied_from, equal, total)``: ``arch``'s rows equal
    ``copied_from``'s in ``equal`` of the ``total`` tables that list
    ``arch``, and ``equal == total``.
    """
    order = list(dict.fromkeys(arch for rows in tables.values() for arch in rows))
    out: list[tuple[str, str, int, int]] = []
    for i, arch in enumerate(order):
        listing = [rows for rows in tables.values() if arch in rows]
        for earlier in order[:i]:
            equal = sum(1 for rows in listing if earlier in rows and rows[earlier] == rows[arch])
            if listing and equal == len(listing):
                out.append((arch, earlier, equal, len(listing)))
                break
    return out


def runs_wherever(earlier: str, later: str) -> bool:
    """Whether ``earlier`` can run wherever ``later`` can (so ``later`` never wins where both cover)."""
    a = SPECS[earlier].conditions if earlier in SPECS else Conditions()
    b = SPECS[later].conditions if later in SPECS else Conditions()
    if a.multicast and not b.multicast:
        return False
    if b.align % a.align:
        return False
    if a.dtypes is not None and (b.dtypes is None or not b.dtypes <= a.dtypes):
        return False
    return a.world_sizes is None or (b.world_sizes is not None and b.world_sizes <= a.world_sizes)


def _uncovered(rule: SizeRule, earlier: Sequence[SizeRule]) -> list[tuple[int, int]]:
    """The parts of ``rule`` that no rule of ``earlier`` covers."""
    parts = [(rule.lo, rule.hi)]
    for other in earlier:
        nxt: list[tuple[int, int]] = []
        for lo, hi in parts:
            if other.hi < lo or other.lo > hi:
                nxt.append((lo, hi))
                continue
            if lo < other.lo:
                nxt.append((lo, other.lo - 1))
            if other.hi < hi:
                nxt.append((other.hi + 1, hi))
        parts = nxt
    return parts


def _earlier_covering(rules: Sequence[SizeRule], index: int) -> list[SizeRule]:
    """The non-empty rules before ``rules[index]`` that can run wherever it can: they take its sizes."""
    later = rules[index].algorithm
    return [r for r in rules[:index] if not r.empty and runs_wherever(r.algorithm, later)]


def shadowed_rules(rules: Sequence[SizeRule]) -> list[tuple[int, tuple[str, ...]]]:
    """First-match rules that never win: every size they cover is taken by earlier rules that can run there too.

    Returns ``(index, names of the shadowing rules)`` per shadowed, non-empty rule.
    """
    out: list[tuple[int, tuple[str, ...]]] = []
    for i, rule in enumerate(rules):
        if rule.empty:
            continue
        earlier = _earlier_covering(rules, i)
        if not _uncovered(rule, earlier):
            names = tuple(dict.fromkeys(r.algorithm for r in earlier if r.lo <= rule.hi and r.hi >= rule.lo))
            out.append((i, names))
    return out


def unaligned_rules(rules: Sequence[SizeRule]) -> list[tuple[int, int, int]]:
    """Rules whose only sizes left after earlier rules hold no multiple of the algorithm's alignment.

    The engine never sends such a size, so the rule is unreachable. Returns
    ``(index, lo, hi)`` of the widest leftover part of each.
    """
    out: list[tuple[int, int, int]] = []
    for i, rule in enumerate(rules):
        if rule.empty or rule.algorithm not in SPECS:
            continue
        align = SPECS[rule.algorithm].conditions.align
        parts = _uncovered(rule, _earlier_covering(rules, i))
        if align > 1 and parts and all((lo + align - 1) // align * align > hi for lo, hi in parts):
            lo, hi = max(parts, key=lambda p: p[1] - p[0])
            out.append((i, lo, hi))
    return out
