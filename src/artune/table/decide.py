"""The decision: which algorithm runs one all-reduce, and why.

``decide(table, ...)`` is the one function the Communicator, ``artune
explain`` and the tuner call. Each plan is compiled once into a sorted list of
band bounds, so the hot path is a dict lookup, a bisect and a cached
``Decision``.

Rules, in order (the ``reason`` of every decision names the ones applied):

1. A user override that forces an algorithm wins (``Table.forced``).
2. The plans for the call's machine (``multicast``): for each
   ``(world_size, hosts, mode)`` the plan for exactly that ``multicast``, else
   the plan for any machine (``Plan.multicast`` None). A call that does not
   say (``multicast=None``) is for any machine, so only plans for any machine
   apply to it: a plan written for one kind of machine never decides a call
   that may run on the other. Then the plan for ``(world_size, hosts, mode)``
   among them, and across hosts for the call's NVLink domain (``nvlink``:
   ``rack``, one domain for every host; ``host``, each host its own, joined
   over a network, which is what a call that does not say means, and its
   reason says so): a plan for one domain never decides a call in the other. A table with an engine's
   rules (``Table.rules``, ``artune.table.gaps``) stops here: without that
   exact plan the engine's fallback runs every size, and the reason says why
   in the engine's terms. artune's own rules go on: only plans for the same
   number of hosts apply (ranks on one board and ranks spanning hosts have
   different crossovers); with none, plans for the nearest smaller number of
   hosts above one, and with none of those either, the platform's process
   group (``gloo`` on CPU) for every size. Among them, a world size without a
   plan uses the plan of the nearest smaller world size with one; if there is
   none, the nearest larger plan's fallback for every size. A mode without any
   plan uses the other mode's plans by the same rule.
3. The band covering ``nbytes`` (an open-ended last band covers every larger
   size); its first candidate that is available and has the parameters its
   spec requires wins; otherwise (and above a bounded last band) the plan's
   fallback.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from artune.catalog import SPECS
from artune.sizes import format_span
from artune.table.family import process_group
from artune.table.gaps import GapPolicy, gap_policy
from artune.table.types import MODES, Mode, NVLinkDomain, ParamValue, Plan, ShapePlan, Table, TokenShape


@dataclass(frozen=True)
class Decision:
    """The chosen algorithm for one message, with its parameters and the reason."""

    algorithm: str
    params: Mapping[str, ParamValue] = field(hash=False)
    reason: str
    steps: tuple[str, ...] = ()  # the reason, one step of the rules per item
    lower: int = 0  # the band's bounds, inclusive; upper None = no upper bound
    upper: int | None = None
    world_size: int = 0  # the plan's world size (may differ from the call's: see reason); 0: no plan
    mode: str = Mode.EAGER
    hosts: int = 1  # the plan's number of hosts
    multicast: bool | None = None  # the plan's machine: with/without NVLink multicast, None: any
    nvlink: NVLinkDomain = NVLinkDomain.HOST  # across hosts, the plan's NVLink domain
    unit: str = "bytes"  # what lower and upper count: "tokens" for a shape plan's band
    hidden: int = 0  # a shape plan's smallest hidden size (ShapePlan.hidden); 0: a plan by bytes, or none

    def _plan_dict(self) -> dict[str, object]:
        plan: dict[str, object] = {"world_size": self.world_size, "mode": self.mode}
        if self.hosts > 1:  # a single-host plan says nothing of hosts
            plan["hosts"] = self.hosts
        if self.nvlink is NVLinkDomain.RACK:  # nor one across hosts joined over a network of its domain
            plan["nvlink_domain"] = self.nvlink.value
        if self.multicast is not None:  # nor a plan for any machine of multicast
            plan["multicast"] = self.multicast
        return plan

    def as_dict(self) -> dict[str, object]:
        """Plain data for JSON output (``plan`` is ``None`` when no plan applied, never world size 0)."""
        return {
            "algorithm": self.algorithm,
            "params": dict(self.params),
            "reason": self.reason,
            "steps": list(self.steps),
            "band": {"from": self.lower, "upto": self.upper, **({"unit": self.unit} if self.unit != "bytes" else {})},
            "plan": self._plan_dict() if self.world_size else None,
        }


def _missing_param(plan: Plan | ShapePlan, name: str) -> str | None:
    spec = SPECS.get(name)
    if spec is None or not isinstance(plan, Plan):  # a shape plan names the engine's kernels, with no parameters
        return None
    have = plan.params_for(name)
    for key in spec.required_params:
        if key not in have or have[key] is None:
            return key
    return None


class _CompiledPlan:
    """One plan as sorted bounds plus a cache of decisions per (band, available)."""

    def __init__(self, table: Table, plan: Plan | ShapePlan | None, fallback: str, rule_note: str) -> None:
        self.table = table
        self.plan = plan
        self.fallback = fallback
        self.rule_note = rule_note
        self.bounds: list[float] = []  # each band's last size, inf for an open-ended last band
        self.bands: list[tuple[int, int | None, tuple[str, ...]]] = []  # (lower, upto, candidates)
        if plan is not None:
            # bands out of order cover no size and are left out (artune check reports them)
            spans = plan.spans()
            self.bands = spans if plan.open_ended else spans[:-1]  # not the fallback above a bounded band
            self.bounds = [math.inf if upto is None else upto for _, upto, _ in self.bands]
        self.cache: dict[tuple[int, frozenset[str] | None], Decision] = {}
        self.forced = bool(table.forced)

    unit = "bytes"

    def span(self, lower: int, upper: int | None) -> str:
        """How messages write the sizes ``lower..upper`` of a band."""
        return format_span(lower, upper)

    def decision(self, index: int, available: frozenset[str] | None) -> Decision:
        key = (index, available)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = self._build(index, available)
        return found

    def _build(self, index: int, available: frozenset[str] | None) -> Decision:
        plan = self.plan
        notes: list[str] = []
        if index < len(self.bands):
            lower, upper, candidates = self.bands[index]
            where: str = f"band {index + 1} {self.span(lower, upper)}"
        else:
            last = self.bands[-1][1] if self.bands else None
            lower = last + 1 if last is not None else 0
            upper, candidates = None, ()
            where = f"above the last band {self.span(lower, None)}" if self.bands else "no bands"
        chosen = ""
        for name in candidates:
            if available is not None and name not in available:
                notes.append(f"{name} skipped: not available here")
                continue
            missing = _missing_param(plan, name) if plan is not None else None
            if missing:
                notes.append(f"{name} skipped: plan has no '{missing}' parameter")
                continue
            chosen = name
            break
        if not chosen:
            chosen = self.fallback
            notes.append(f"fallback {chosen}" + (" (no candidate available)" if candidates else ""))
        elif len(candidates) > 1:
            notes.append(f"first available of {list(candidates)}")
        table = self.table
        header = f"{table.name} [{table.platform}]"
        parts = [header, *table.borrowed, *([self.rule_note] if self.rule_note else [])]
        parts += [f"{self.plan_text()}: {where} -> {chosen}", *notes]
        if isinstance(plan, Plan) and plan.written:
            parts += _as_written(plan, lower, upper, candidates or (self.fallback,))
        provenance = plan.provenance if plan is not None and plan.provenance else table.provenance
        parts.append(f"provenance: {provenance}")
        if table.overrides:
            parts.append("user overrides applied: " + "; ".join(table.overrides))
        params = plan.params_for(chosen) if isinstance(plan, Plan) else {}
        return Decision(
            algorithm=chosen,
            params=MappingProxyType(params),
            reason="; ".join(parts),
            steps=tuple(parts),
            lower=lower,
            upper=upper,
            unit=self.unit,
            **self.identity(),
        )

    def plan_text(self) -> str:
        """How the reason names the plan."""
        plan = self.plan
        if not isinstance(plan, Plan):
            return "no plan"
        return f"plan {plan.topology} mode={plan.mode}" + (f" ({plan.origin})" if plan.origin else "")

    def identity(self) -> dict[str, object]:
        """The plan's fields of a ``Decision`` (world size 0: no plan)."""
        plan = self.plan
        if not isinstance(plan, Plan):
            return {"mode": ""}
        return {
            "world_size": plan.world_size,
            "mode": plan.mode,
            "hosts": plan.hosts,
            "multicast": plan.multicast,
            "nvlink": plan.nvlink,
        }


class _ShapePlan(_CompiledPlan):
    """A shape plan: bands count tokens, and a message over the table's cap runs ``over_cap``."""

    unit = "tokens"

    def __init__(
        self, table: Table, plan: ShapePlan | None, fallback: str, rule_note: str, over_cap: str, cap: int, mode: str
    ) -> None:
        super().__init__(table, plan, fallback, rule_note)
        self.shape = plan
        self.over_cap = over_cap
        self.cap = cap
        self.mode = mode
        self.capped: dict[frozenset[str] | None, Decision] = {}

    def span(self, lower: int, upper: int | None) -> str:
        first = max(lower, 1)  # a message has at least one token
        return f"tokens {first}+" if upper is None else f"tokens {first}..{upper}"

    def plan_text(self) -> str:
        return f"plan {self.shape.label}" if self.shape is not None else "no plan"

    def identity(self) -> dict[str, object]:
        plan = self.shape
        return {"world_size": plan.world_size, "mode": self.mode, "hidden": plan.hidden} if plan else {"mode": ""}

    def over(self, available: frozenset[str] | None) -> Decision:
        """The decision for a message over the workspace cap: ``over_cap``, whatever the band."""
        found = self.capped.get(available)
        if found is None:
            note = (
                f"the message is over the workspace cap of {self.cap} bytes -> {self.over_cap} (the engine "
                "sends every message larger than its workspace there, before it reads its table)"
            )
            steps = tuple(
                filter(None, (f"{self.table.name} [{self.table.platform}]", *self.table.borrowed, self.rule_note, note))
            )
            found = self.capped[available] = Decision(
                self.over_cap, MappingProxyType({}), "; ".join(steps), steps, self.cap + 1, None, **self.identity()
            )
        return found


def _as_written(plan: Plan, lower: int, upper: int | None, runs: tuple[str, ...]) -> list[str]:
    """What the engine's file writes for the sizes ``lower..upper``, where it differs from what runs, and why."""
    top = math.inf if upper is None else upper
    pieces = [
        (max(lo, lower), upper if hi is None or hi > top else hi, candidates)
        for lo, hi, candidates in plan.spans(as_written=True)
        if lo <= top and (hi is None or hi >= lower)
    ]
    if all(candidates == runs for _lo, _hi, candidates in pieces):
        return []
    text = ", ".join(f"{'/'.join(candidates)} {format_span(lo, hi)}" for lo, hi, candidates in pieces)
    return [f"as written: {text}", *plan.notes]


def decide(
    table: Table,
    nbytes: int,
    world_size: int,
    mode: str = Mode.EAGER,
    available: frozenset[str] | set[str] | None = None,
    hosts: int = 1,
    multicast: bool | None = None,
    nvlink: NVLinkDomain | str | None = None,
    shape: TokenShape | None = None,
) -> Decision:
    """Choose the algorithm for one all-reduce of ``nbytes`` bytes by ``table``.

    ``shape`` is the message's tokens x hidden x fused op, for a table that
    decides by shape (``Table.by_shape``: TensorRT-LLM's): its plan is the
    ``ShapePlan`` whose world-size and hidden ranges hold the call and which
    answers its fused op (none: the table's gap policy), its bands count
    tokens, and ``nbytes`` is held against the table's workspace ``cap``.

    ``available`` is the set of algorithm names that can run now (``None``:
    all); ``hosts`` is how many hosts the ranks span; ``multicast`` whether
    the machine has NVLink multicast (``None``: not said, so only the plans
    for any machine apply; pass the same value ``available`` was computed
    with); ``nvlink`` whether hosts share one NVLink domain (``"rack"``) or
    are joined over a network (``"host"``; ``None``: not said, read as host,
    and across hosts the reason says so). Never returns ``None``
    and never raises for a valid size: a topology or mode without a plan
    follows the table's rules (above), and the decision's ``reason`` says which.
    """
    decider = table.memo.get(Decider)
    if decider is None:
        decider = table.memo[Decider] = Decider(table)
    if shape is not None:
        return decider.decide_shape(nbytes, world_size, mode, available, shape)
    return decider.decide(nbytes, world_size, mode, available, hosts, multicast, nvlink)


class Decider:
    """Compiles a table's plans lazily and answers ``decide`` calls."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.compiled: dict[tuple[int, str, int, bool | None, object], _CompiledPlan] = {}
        self.shaped: dict[tuple[int, str, int, str], _ShapePlan] = {}

    def decide(
        self,
        nbytes: int,
        world_size: int,
        mode: str,
        available: frozenset[str] | set[str] | None,
        hosts: int = 1,
        multicast: bool | None = None,
        nvlink: NVLinkDomain | str | None = None,
    ) -> Decision:
        # the hot path: keep it to a dict lookup, a bisect and a cached Decision
        compiled = self.compiled.get((world_size, mode, hosts, multicast, nvlink))
        if compiled is None:
            compiled = self._compile(world_size, mode, hosts, multicast, nvlink)
            self.compiled[(world_size, mode, hosts, multicast, nvlink)] = compiled
        if nbytes < 0:
            raise ValueError(f"decide(): nbytes must be a non-negative integer, got {nbytes!r}")
        if available is not None and type(available) is not frozenset:
            available = frozenset(available)
        key = (-1 if compiled.forced else bisect.bisect_left(compiled.bounds, nbytes), available)
        found = compiled.cache.get(key)
        return found if found is not None else compiled.decision(*key)

    def decide_shape(
        self, nbytes: int, world_size: int, mode: str, available: frozenset[str] | set[str] | None, shape: TokenShape
    ) -> Decision:
        """``decide`` for a message of ``shape`` (tokens x hidden x fused op)."""
        if self.table.forced:  # a user override wins over any plan, by shape or by bytes
            return self.decide(nbytes, world_size, mode, available)
        key = (world_size, mode, shape.hidden, shape.fusion)
        compiled = self.shaped.get(key)
        if compiled is None:
            compiled = self.shaped[key] = self._compile_shape(world_size, mode, shape)
        if nbytes < 0 or shape.tokens < 1:
            raise ValueError(f"decide(): nbytes >= 0 and tokens >= 1, got nbytes={nbytes!r}, tokens={shape.tokens!r}")
        if available is not None and type(available) is not frozenset:
            available = frozenset(available)
        if compiled.cap and nbytes > compiled.cap:
            return compiled.over(available)
        return compiled.decision(bisect.bisect_left(compiled.bounds, shape.tokens), available)

    def _compile_shape(self, world_size: int, mode: str, shape: TokenShape) -> _ShapePlan:
        if mode not in MODES:
            raise ValueError(f"decide(): mode must be one of {MODES}, got {mode!r}")
        if world_size < 1 or shape.hidden < 1:
            raise ValueError(f"decide(): world_size and hidden must be >= 1, got {world_size!r}, {shape.hidden!r}")
        table = self.table
        policy = gap_policy(table.rules)
        over_cap = policy.fallback or _platform_default(table)
        plan = table.shape_plan(world_size, shape.hidden, shape.fusion)
        cap = table.cap(world_size)
        if plan is not None:
            return _ShapePlan(table, plan, plan.fallback, "", over_cap, cap, mode)
        shaped = table.shape_plans
        fallback = shaped[0].fallback if policy.plans_fallback and shaped else over_cap
        why = policy.out_of_range.format(world_size=world_size, hidden=shape.hidden, fusion=shape.fusion)
        why = why or f"no plan for world size {world_size}, hidden {shape.hidden}, fused op {shape.fusion}"
        return _ShapePlan(table, None, fallback, f"{why}: {fallback}", over_cap, cap, mode)

    def _compile(
        self,
        world_size: int,
        mode: str,
        hosts: int = 1,
        multicast: bool | None = None,
        nvlink: NVLinkDomain | str | None = None,
    ) -> _CompiledPlan:
        """The plan a call decides by, one function per rule of the module docstring."""
        _check_call(world_size, mode, hosts, multicast)
        domain, said = _domain(nvlink, hosts)
        table = self.table
        if table.forced:
            return _forced(table, world_size, mode, hosts, multicast, domain)
        policy = gap_policy(table.rules)
        if not policy.nearest:
            return _engine_plan(table, policy, world_size, mode, hosts, multicast, domain, said)
        mine = table.for_machine(multicast)
        topology, note = _for_hosts(mine, hosts, domain)
        plans, note = _for_mode(topology, mode, _join(said, note))
        if not plans:
            fallback = _platform_default(table)
            why = note or f"table has {'no single-host plans' if mine else 'no plans'}"
            return _CompiledPlan(table, None, fallback, f"{why}; {fallback} for every size")
        return _for_world_size(table, plans, world_size, note)


def _check_call(world_size: int, mode: str, hosts: int, multicast: bool | None) -> None:
    """``ValueError`` naming the first argument of a call that no table can answer."""
    if mode not in MODES:
        raise ValueError(f"decide(): mode must be one of {MODES}, got {mode!r}")
    if world_size < 1 or isinstance(world_size, bool):
        raise ValueError(f"decide(): world_size must be a positive integer, got {world_size!r}")
    if isinstance(hosts, bool) or not isinstance(hosts, int) or not 1 <= hosts <= world_size:
        raise ValueError(f"decide(): hosts must be an integer from 1 to world_size, got {hosts!r}")
    if multicast not in (None, True, False):
        raise ValueError(f"decide(): multicast must be True, False or None, got {multicast!r}")


def _domain(nvlink: NVLinkDomain | str | None, hosts: int) -> tuple[NVLinkDomain, str]:
    """The call's NVLink domain, and the note that says it was not given (across hosts only)."""
    if nvlink is None:
        said = (
            "NVLink domain not given: host (each host its own NVLink domain, the hosts joined over a network)"
            if hosts > 1
            else ""
        )
        return NVLinkDomain.HOST, said
    try:
        domain = NVLinkDomain(nvlink)
    except ValueError:
        raise ValueError(f"decide(): nvlink must be 'host', 'rack' or None, got {nvlink!r}") from None
    return (domain if hosts > 1 else NVLinkDomain.HOST), ""


def _platform_default(table: Table) -> str:
    """The platform's process group: what runs where no plan applies."""
    return process_group(table.platform.kind)


def _join(*notes: str) -> str:
    return "; ".join(filter(None, notes))


def _forced(
    table: Table, world_size: int, mode: str, hosts: int, multicast: bool | None, nvlink: NVLinkDomain
) -> _CompiledPlan:
    """Rule 1: a user override that forces an algorithm wins (the plan only lends its parameters)."""
    note = f"user override: {table.forced} forced for every size"
    return _ForcedPlan(table, table.plan(world_size, mode, hosts, multicast, nvlink), table.forced, note)


def _engine_plan(
    table: Table,
    policy: GapPolicy,
    world_size: int,
    mode: str,
    hosts: int,
    multicast: bool | None,
    nvlink: NVLinkDomain,
    said: str,
) -> _CompiledPlan:
    """Rule 2 under an engine's gap policy: the exact plan, else the engine's fallback for every size."""
    plan = table.plan(world_size, mode, hosts, multicast, nvlink)
    if plan is not None:
        return _CompiledPlan(table, plan, plan.fallback, said)
    fallback = policy.fallback or _platform_default(table)
    if table.platform.kind == "rocm":  # the engine's process group loads RCCL on an AMD GPU
        fallback = _platform_default(table)
    missing = policy.missing(world_size, mode, hosts, nvlink.value, table.platform.kind)
    return _CompiledPlan(table, None, fallback, _join(said, missing))


def _for_hosts(mine: tuple[Plan, ...], hosts: int, nvlink: NVLinkDomain) -> tuple[list[Plan], str]:
    """Rule 2, hosts: the plans for the same number of hosts in the same NVLink domain; with none, those
    for the nearest smaller number above one (never single-host plans for ranks across hosts, nor plans
    for the other domain). Returns the plans and a note."""
    same = [p for p in mine if p.hosts == hosts and p.nvlink is nvlink]
    if same or hosts == 1:
        return same, ""
    fewer = [p for p in mine if 1 < p.hosts < hosts and p.nvlink is nvlink]
    if not fewer:
        where = "in one NVLink domain" if nvlink is NVLinkDomain.RACK else "joined over a network"
        return [], f"no plans for ranks across {hosts} hosts {where} (single-host plans do not apply)"
    nearest = max(p.hosts for p in fewer)
    note = f"no plans for {hosts} hosts; using {nearest}-host plans (rule: nearest smaller number of hosts)"
    return [p for p in fewer if p.hosts == nearest], note


def _for_mode(topology: list[Plan], mode: str, note: str) -> tuple[list[Plan], str]:
    """Rule 2, mode: the plans for ``mode``; a mode without any uses the other mode's plans."""
    plans = [p for p in topology if p.mode == mode]
    if plans or not topology:
        return plans, note
    return topology, _join(note, f"no {mode}-mode plans; using {topology[0].mode}-mode plans")


def _for_world_size(table: Table, plans: list[Plan], world_size: int, note: str) -> _CompiledPlan:
    """Rule 2, world size: the exact plan, else the nearest smaller one's; with no smaller plan, the
    nearest larger plan's fallback for every size."""
    exact = [p for p in plans if p.world_size == world_size]
    if exact:
        return _CompiledPlan(table, exact[0], exact[0].fallback, note)
    smaller = [p for p in plans if p.world_size < world_size]
    if smaller:
        plan = max(smaller, key=lambda p: p.world_size)
        rule = (
            f"no plan for world_size={world_size}; using world_size={plan.world_size}'s plan "
            "(rule: nearest smaller world size)"
        )
        return _CompiledPlan(table, plan, plan.fallback, _join(note, rule))
    plan = min(plans, key=lambda p: p.world_size)
    rule = (
        f"no plan for world_size={world_size} or below; the fallback of world_size="
        f"{plan.world_size}'s plan for every size (rule: no smaller plan)"
    )
    return _CompiledPlan(table, None, plan.fallback, _join(note, rule))


class _ForcedPlan(_CompiledPlan):
    def _build(self, index: int, available: frozenset[str] | None) -> Decision:
        plan = self.plan
        params = plan.params_for(self.fallback) if plan is not None else {}
        return Decision(
            algorithm=self.fallback,
            params=MappingProxyType(params),
            reason=f"{self.table.name}: {self.rule_note} (wins over the table)",
            steps=(self.table.name, f"{self.rule_note} (wins over the table)"),
            world_size=plan.world_size if plan else 0,
            mode=plan.mode if plan else "",
            hosts=plan.hosts if plan else 1,
            multicast=plan.multicast if plan else None,
        )
