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
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from artune.catalog import SPECS
from artune.table.check import runs_wherever
from artune.table.decide import decide
from artune.table.model import MODES, Plan, Provenance, Table


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


def _plan(table: Table, world_size: int, mode: str) -> tuple[Plan | None, str]:
    """The plan ``decide`` uses and the fallback it applies when there is none."""
    decision = decide(table, 0, world_size, mode, frozenset())
    plan = table.plan(decision.world_size, decision.mode) if decision.mode else None
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
        names = [n for n in candidates if _usable(plan, n) and n != plan.fallback]
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


def diff_plans(a: Table, b: Table, world_size: int, mode: str) -> list[Difference]:
    """The size ranges where ``a`` and ``b`` route differently at ``(world_size, mode)``."""
    plan_a, fall_a = _plan(a, world_size, mode)
    plan_b, fall_b = _plan(b, world_size, mode)
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
            out[-1] = Difference(world_size, mode, last.lo, hi, ra, rb, prov_a, prov_b)
        else:
            out.append(Difference(world_size, mode, start, hi, ra, rb, prov_a, prov_b))
    return out


def diff_tables(a: Table, b: Table, world_size: int | None = None, mode: str | None = None) -> list[Difference]:
    """Every difference between ``a`` and ``b``, over the world sizes either plans (or the one given)."""
    sizes = [world_size] if world_size is not None else sorted({p.world_size for t in (a, b) for p in t.plans})
    modes = [mode] if mode is not None else list(MODES)
    return [d for ws in sizes for m in modes for d in diff_plans(a, b, ws, m)]
