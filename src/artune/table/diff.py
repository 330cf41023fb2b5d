"""Where two tables decide differently: ``artune diff``, the reviewer's view of a table change.

For one ``(world_size, mode)``, each table's plan is resolved by the rules of
``artune.table.decide`` (nearest smaller world size, the other mode), and the
size axis is cut at every bound of either plan. On each piece a table's
*route* is what it would run there: the band's candidates that have the
parameters their spec requires, in order, then the plan's fallback, less the
candidates an earlier one shadows (it can run wherever they can, by the
catalog's static conditions, so they never win). Pieces
where the routes differ are reported, adjacent ones merged. Comparing routes
rather than one decision keeps run-time availability (dtype, multicast) out
of the comparison: two tables are the same when they would choose the same
for every size under every availability.

Multicast is the exception: a plan may be for machines with or without
NVLink multicast only (``Plan.multicast``), and then the tables are compared
for each such machine too. The plans for any machine are compared as ever;
for a machine with (or without) multicast, only the ``(world_size, mode)``
where either table decides by a plan for that machine, and only the ranges
that differ otherwise than for any machine, so a difference both share is
reported once.

Plans across hosts are compared per topology either table has: each number
of hosts and NVLink domain (``Difference.hosts``, ``Difference.nvlink``), so a
multi-node row moves in its own rows, never mixed with one host's.

Tables that decide by shape (``Table.by_shape``: TensorRT-LLM's) are compared
along the token axis instead (``diff_shapes``), in each cell of world sizes x
hidden sizes x fused op where both tables read one plan each (the ranges of
both tables' shape plans, and their caps, cut the axes), each side deciding as
``decide`` does for a bf16 message of that shape, so a changed workspace cap
shows as a token range too.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from artune.catalog import SPECS
from artune.table.check import runs_wherever
from artune.table.decide import decide
from artune.table.types import MODES, NVLinkDomain, Plan, Provenance, Table, TokenShape


@dataclass(frozen=True)
class Difference:
    """Sizes ``lo..hi`` (inclusive; ``hi`` None: no end) where ``a`` and ``b`` route differently."""

    world_size: int
    mode: str
    lo: int
    hi: int | None
    a: tuple[str, ...]
    b: tuple[str, ...]
    a_provenance: Provenance
    b_provenance: Provenance
    multicast: bool | None = None  # the machine compared: with/without NVLink multicast, None: any
    hosts: int = 1  # the topology compared: the hosts the ranks span...
    nvlink: NVLinkDomain = NVLinkDomain.HOST  # ...and, across hosts, their NVLink domain
    hidden: int = 0  # a shape difference (lo, hi count tokens): the hidden size and fused op compared
    fusion: str = ""
    #: a shape difference: the world sizes and hidden sizes it holds for ("ws=4..7 hidden=4096..8191")
    cell: str = ""

    @property
    def where(self) -> str:
        """``ws=8 mode=eager``, with `` multicast=off`` for a difference on one kind of machine only,
        `` hosts=4 nvlink=rack`` across hosts, and ``ws=8 hidden=4096 fusion=NONE`` for a shape difference."""
        if self.hidden:
            return f"{self.cell or f'ws={self.world_size} hidden={self.hidden}'} fusion={self.fusion}"
        machine = "" if self.multicast is None else f" multicast={'on' if self.multicast else 'off'}"
        topology = f" hosts={self.hosts} nvlink={self.nvlink.value}" if self.hosts > 1 else ""
        return f"ws={self.world_size}{topology} mode={self.mode}{machine}"


Topology = tuple[int, NVLinkDomain]  # (hosts, NVLink domain)
ONE_HOST: Topology = (1, NVLinkDomain.HOST)


def _plan(
    table: Table, world_size: int, mode: str, multicast: bool | None = None, topology: Topology = ONE_HOST
) -> tuple[Plan | None, str]:
    """The plan ``decide`` uses and the fallback it applies when there is none."""
    hosts, nvlink = topology
    decision = decide(table, 0, world_size, mode, frozenset(), hosts, multicast, nvlink)
    plan = (
        table.plan(decision.world_size, decision.mode, decision.hosts, decision.multicast, decision.nvlink)
        if decision.mode
        else None
    )
    return plan, decision.algorithm if plan is None else plan.fallback


def _usable(plan: Plan, name: str) -> bool:
    spec = SPECS.get(name)
    have = plan.params_for(name)
    return spec is None or all(have.get(key) is not None for key in spec.required_params)


def _pieces(plan: Plan | None, fallback: str) -> list[tuple[int, tuple[str, ...]]]:
    """``(first size, route)`` per span of the plan, in order; the last piece runs to infinity."""
    if plan is None:
        return [(0, (fallback,))]
    out: list[tuple[int, tuple[str, ...]]] = []
    for lower, _upto, candidates in plan.spans():
        # the fallback runs wherever it is listed, so what follows it never runs: an engine's early return
        # to its process group (vLLM's ``nccl`` before ``custom_ar``) is a band that starts with the fallback
        listed = candidates[: candidates.index(plan.fallback)] if plan.fallback in candidates else candidates
        names = [n for n in listed if _usable(plan, n)]
        out.append((lower, _reachable((*names, plan.fallback))))
    return out


def _reachable(route: tuple[str, ...]) -> tuple[str, ...]:
    """``route`` without the names an earlier name shadows (the fallback always stays)."""
    kept: list[str] = []
    for i, name in enumerate(route):
        last = i == len(route) - 1
        if last or not any(runs_wherever(earlier, name) for earlier in kept):
            kept.append(name)
    return tuple(kept)


def _route(pieces: list[tuple[int, tuple[str, ...]]], nbytes: int) -> tuple[str, ...]:
    route = pieces[0][1]
    for start, names in pieces:
        if start > nbytes:
            break
        route = names
    return route


def _provenance(table: Table, plan: Plan | None) -> Provenance:
    return plan.provenance if plan is not None and plan.provenance is not None else table.provenance


def diff_plans(
    a: Table, b: Table, world_size: int, mode: str, multicast: bool | None = None, topology: Topology = ONE_HOST
) -> list[Difference]:
    """The size ranges where ``a`` and ``b`` route differently at ``(world_size, mode)`` on a machine with
    ``multicast`` (``None``: any machine; see ``artune.table.decide``) in ``topology`` (hosts, NVLink domain)."""
    plan_a, fall_a = _plan(a, world_size, mode, multicast, topology)
    plan_b, fall_b = _plan(b, world_size, mode, multicast, topology)
    where = (multicast, *topology)
    pieces_a, pieces_b = _pieces(plan_a, fall_a), _pieces(plan_b, fall_b)
    cuts = sorted({start for start, _ in pieces_a} | {start for start, _ in pieces_b})
    out: list[Difference] = []
    prov_a, prov_b = _provenance(a, plan_a), _provenance(b, plan_b)
    for start, stop in pairwise([*cuts, None]):
        ra, rb = _route(pieces_a, start), _route(pieces_b, start)
        if ra == rb:
            continue
        hi = None if stop is None else stop - 1
        last = out[-1] if out else None
        if last is not None and last.hi is not None and last.hi + 1 == start and (last.a, last.b) == (ra, rb):
            out[-1] = Difference(world_size, mode, last.lo, hi, ra, rb, prov_a, prov_b, *where)
        else:
            out.append(Difference(world_size, mode, start, hi, ra, rb, prov_a, prov_b, *where))
    return out


def topologies_of(table: Table) -> set[Topology]:
    """One host, and every ``(hosts, NVLink domain)`` ``table`` has plans for."""
    return {ONE_HOST} | {(p.hosts, p.nvlink) for p in table.plans}


BF16 = 2  # the element size a shape difference is taken at (the workspace cap counts bytes)


def diff_shapes(
    a: Table, b: Table, world_size: int, hidden: int, fusion: str, tokens: int | None = None, cell: str = ""
) -> list[Difference]:
    """The token ranges (or the one ``tokens``) where ``a`` and ``b`` decide differently for a bf16 message of
    ``hidden`` elements a token, fused with ``fusion``, at ``world_size`` (``cell``: the ranges it stands for)."""
    cuts = {1} if tokens is None else {tokens}
    if tokens is None:
        for table in (a, b):
            plan = table.shape_plan(world_size, hidden, fusion)
            for band in plan.bands if plan is not None else ():
                if band.upto is not None:
                    cuts.add(band.upto + 1)
            cap = table.cap(world_size)
            if cap:
                cuts.add(cap // (hidden * BF16) + 1)
    out: list[Difference] = []
    points = sorted(cuts)
    for start, stop in pairwise([*points, None]):
        shape = TokenShape(start, hidden, fusion)
        da = decide(a, start * hidden * BF16, world_size, shape=shape)
        db = decide(b, start * hidden * BF16, world_size, shape=shape)
        if da.algorithm == db.algorithm:
            continue
        hi = start if tokens is not None else (None if stop is None else stop - 1)
        last = out[-1] if out else None
        ra, rb = (da.algorithm,), (db.algorithm,)
        lo = (
            last.lo
            if last is not None and last.hi is not None and last.hi + 1 == start and (last.a, last.b) == (ra, rb)
            else start
        )
        found = Difference(
            world_size,
            "eager",
            lo,
            hi,
            ra,
            rb,
            a.provenance,
            b.provenance,
            None,
            hidden=hidden,
            fusion=fusion,
            cell=cell,
        )
        if lo != start:
            out[-1] = found
        else:
            out.append(found)
    return out


def _cuts(tables: tuple[Table, ...], axis: str) -> list[int]:
    """Where the world-size (or hidden) ranges of the tables' shape plans, and of their caps, begin."""
    cuts = {1}
    for table in tables:
        for plan in table.shape_plans:
            lo, hi = (plan.world_size, plan.world_size_upto) if axis == "ws" else (plan.hidden, plan.hidden_upto)
            cuts.add(lo)
            if hi is not None:
                cuts.add(hi + 1)
        if axis == "ws":
            cuts.update(most + 1 for most, _bytes in table.caps if most is not None)
    return sorted(cuts)


def _cells(tables: tuple[Table, ...], axis: str, given: int | None) -> list[tuple[int, str]]:
    """Each cell of the axis as ``(first value, "lo..hi")``; the ``given`` value alone when there is one."""
    if given is not None:
        return [(given, str(given))]
    cuts = _cuts(tables, axis)
    return [
        (lo, f"{lo}+" if hi is None else (str(lo) if hi == lo + 1 else f"{lo}..{hi - 1}"))
        for lo, hi in pairwise([*cuts, None])
    ]


def _diff_shape_tables(
    a: Table, b: Table, world_size: int | None, hidden: int | None, tokens: int | None
) -> list[Difference]:
    """Every token range where ``a`` and ``b`` decide differently, per cell of world sizes x hidden sizes x fused
    op that both tables' plans cut the axes into (or at the ``world_size`` and ``hidden`` given)."""
    fusions = sorted(set(a.fusions) | set(b.fusions))
    out: list[Difference] = []
    for ws, ws_text in _cells((a, b), "ws", world_size):
        for h, h_text in _cells((a, b), "hidden", hidden):
            for fusion in fusions:
                out += diff_shapes(a, b, ws, h, fusion, tokens, f"ws={ws_text} hidden={h_text}")
    return out


def diff_tables(
    a: Table,
    b: Table,
    world_size: int | None = None,
    mode: str | None = None,
    topologies: set[Topology] | None = None,
    hidden: int | None = None,
    tokens: int | None = None,
) -> list[Difference]:
    """Every difference between ``a`` and ``b``, over the world sizes either plans (or the one given), in
    ``topologies`` (default: one host and every topology either plans); for shape tables per cell of world
    sizes x hidden sizes x fused op (or at the ``world_size``, ``hidden`` and ``tokens`` given)."""
    if a.by_shape or b.by_shape:
        return _diff_shape_tables(a, b, world_size, hidden, tokens)
    sizes = [world_size] if world_size is not None else sorted({p.world_size for t in (a, b) for p in t.plans})
    modes = [mode] if mode is not None else list(MODES)
    machines = sorted({p.multicast for t in (a, b) for p in t.plans} - {None})
    topologies = sorted(topologies if topologies is not None else topologies_of(a) | topologies_of(b))
    out: list[Difference] = []
    for topology in topologies:
        planned = {p.world_size for t in (a, b) for p in t.plans if (p.hosts, p.nvlink) == topology}
        if topology != ONE_HOST:
            planned = {ws for ws in planned if ws % topology[0] == 0}
        sizes = [world_size] if world_size is not None else sorted(planned)
        for ws in sizes:
            if ws < topology[0]:
                continue
            for m in modes:
                anywhere = diff_plans(a, b, ws, m, None, topology)
                out += anywhere
                shared = {(d.lo, d.hi, d.a, d.b) for d in anywhere}
                for machine in machines:
                    if any(_plan(t, ws, m, machine, topology)[0] != _plan(t, ws, m, None, topology)[0] for t in (a, b)):
                        found = diff_plans(a, b, ws, m, machine, topology)
                        out += [d for d in found if (d.lo, d.hi, d.a, d.b) not in shared]
    return out
