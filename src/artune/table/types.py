"""The table model: platforms, provenance, bands, plans and tables as frozen data.

A ``Table`` is for one platform and holds ``Plan`` s, one per
``(world_size, hosts, mode, multicast, nvlink)`` (``hosts``: how many hosts the
ranks span, 1 unless a plan says otherwise; ``multicast``: whether the machine
has NVLink multicast, ``None`` for any machine, where the engine's choice does
not depend on it; ``nvlink``: across hosts, whether they share one NVLink
domain, ``NVLinkDomain``). A plan is an ordered list of ``Band`` s: band ``i``
covers sizes ``(bands[i-1].upto, bands[i].upto]`` (the first starts at 0) and
names one algorithm or an ordered list of candidates (the first available at
run time wins). Above the last band, or when no candidate is available, the
plan's ``fallback`` runs.

A table names the ``rules`` it decides by where it has no plan for a call
(``artune.table.gaps``): artune's own (nearest world size, other mode) or an
engine's (its process group, as the engine does). A plan read from an
engine's file holds the bands the engine runs (its caps and workspace clips
applied) and, in ``written``, the bands as the file writes them.

This module only holds data and its invariants, and imports no other part of
``artune.table``: reading and writing files is ``artune.table.io`` (the
digest too), deciding is ``artune.table.decide``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property
from typing import Any

from artune.errors import TableError
from artune.platforms import Platform  # the low layer's, so the machine need not import the table model
from artune.sizes import MAX_SIZE

KINDS = ("cuda", "rocm", "cpu")


class Mode(str, Enum):
    """Which plan a call uses: ``graph`` inside a CUDA graph capture, ``eager`` otherwise.

    A ``str``: a member equals (and hashes as) its value, so plans keyed by
    ``"graph"`` and by ``Mode.GRAPH`` are the same plan, and TOML and JSON
    write the value.
    """

    GRAPH = "graph"
    EAGER = "eager"

    def __str__(self) -> str:
        return self.value


MODES = tuple(m.value for m in Mode)  # ("graph", "eager"): the values, for choices and messages
SOURCES = ("measured", "published", "inherited", "modelled")
SCHEMA = 1

ParamValue = int | float | str | bool
Params = tuple[tuple[str, ParamValue], ...]  # sorted (key, value) pairs: hashable


class NVLinkDomain(str, Enum):
    """How the hosts of a plan or call reach each other (only meaningful for ranks across hosts).

    ``host``: each host is its own NVLink domain and the hosts are joined over
    a network, which is what every plan and call across hosts means unless it
    says otherwise; ``rack``: all the hosts are in one NVLink domain
    (multi-node NVLink, as in a GB200/GB300 NVL72), so an engine's NVLink
    paths can span them.
    """

    HOST = "host"
    RACK = "rack"

    @classmethod
    def parse(cls, value: object, where: str = "nvlink_domain") -> NVLinkDomain:
        """``value`` as a domain; ``TableError`` naming the choices otherwise."""
        try:
            return cls(value)
        except ValueError:
            raise TableError(f"{where} must be one of {', '.join(d.value for d in cls)}, got {value!r}") from None


NVLINK_DOMAINS = tuple(d.value for d in NVLinkDomain)


def freeze_params(params: Mapping[str, Mapping[str, ParamValue]]) -> tuple[tuple[str, Params], ...]:
    """Per-algorithm parameter dicts as sorted, hashable tuples."""
    return tuple(sorted((name, tuple(sorted(values.items()))) for name, values in params.items()))


@dataclass(frozen=True)
class Provenance:
    """Where figures came from: measured, published, inherited (``inherited_from`` arch) or modelled."""

    source: str
    date: str = ""
    device: str = ""
    tool: str = ""
    notes: str = ""
    inherited_from: str = ""

    def __str__(self) -> str:
        parts = [self.source + (f" from arch {self.inherited_from}" if self.inherited_from else "")]
        parts += [p for p in (self.device, self.date, self.tool) if p]
        text = ", ".join(parts)
        return f"{text}: {self.notes}" if self.notes else text


class CaveatKind(str, Enum):
    """Why an engine reading cannot vouch for some of its decisions."""

    #: a statement or call in the engine's dispatch that artune's evaluator does not model
    UNEVALUATED = "unevaluated"
    #: a dispatch function that differs from every release the engine's own code verified
    UNFAMILIAR = "unfamiliar"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Caveat:
    """A part of an engine's dispatch that artune's reading cannot vouch for, and the decisions it could touch.

    The reading goes on past it (everything else is still read), so the table
    still decides; ``explain`` marks each decision a caveat could touch as
    unverified, ``check`` prints it as a finding and ``review`` asks about it.
    """

    kind: CaveatKind
    function: str  # the engine's name for it: "CustomAllreduce.should_custom_ar"
    where: str  # "FILE:LINE" in the engine's tree
    detail: str  # what artune met there, or how the function differs
    assumed: str = ""  # what artune decided in its place ("" where it assumed nothing)
    world_sizes: tuple[int, ...] = ()  # the world sizes whose decisions it could touch; (): every one

    def touches(self, world_size: int) -> bool:
        """Whether the decisions at ``world_size`` could depend on it."""
        return not self.world_sizes or world_size in self.world_sizes

    def describe(self) -> str:
        """One line: the function, where it is, what is unverified and what artune assumed."""
        text = f"{self.function} ({self.where}): {self.detail}"
        return text + (f"; artune assumed {self.assumed}" if self.assumed else "")


@dataclass(frozen=True)
class Band:
    """Sizes up to ``upto`` bytes (inclusive; ``None``: every size) go to the first available of ``candidates``."""

    upto: int | None
    candidates: tuple[str, ...]


@dataclass(frozen=True)
class TokenShape:
    """A message as an engine that decides by shape sees it: ``tokens`` rows of ``hidden`` elements,
    reduced together with the fused op ``fusion`` (TensorRT-LLM's ``AllReduceFusionOp`` names)."""

    tokens: int
    hidden: int
    fusion: str = "NONE"


Span = tuple[int, int | None, tuple[str, ...]]  # (lower, upto, candidates) of a band that covers a size


def band_spans(bands: tuple[Band, ...], fallback: str) -> list[Span]:
    """``(lower, upto, candidates)`` of each band of ``bands`` that covers a size, then ``(lower, None,
    (fallback,))`` for the sizes above a bounded last band (bands out of order cover nothing and are left out)."""
    out: list[Span] = []
    lower = 0
    for band in bands:
        if band.upto is None:
            return [*out, (lower, None, band.candidates)]
        if band.upto >= lower:
            out.append((lower, band.upto, band.candidates))
            lower = band.upto + 1
    return [*out, (lower, None, (fallback,))]


def _check_bands(bands: tuple[Band, ...], where: str) -> tuple[Band, ...]:
    """``bands`` with a last band at the largest size read as open-ended; ``TableError`` if another is."""
    if any(band.upto is None for band in bands[:-1]):
        raise TableError(f"{where}: only the last band may be open-ended")
    last = bands[-1] if bands else None
    if last is not None and last.upto is not None and last.upto >= MAX_SIZE:
        # a file may write "no bound" as the largest size ("1024TiB"): read it as what it means
        return (*bands[:-1], Band(None, last.candidates))
    return bands


@dataclass(frozen=True)
class Plan:
    """The bands for one ``(world_size, hosts, mode, multicast, nvlink)``: band ``upto`` counts bytes."""

    world_size: int
    mode: str
    bands: tuple[Band, ...]
    fallback: str
    params: tuple[tuple[str, Params], ...] = ()
    provenance: Provenance | None = None  # None: the table's
    hosts: int = 1  # the hosts the world_size ranks span
    #: the bands as an engine's file writes them, where its caps or clips make ``bands`` differ; () otherwise
    written: tuple[Band, ...] = ()
    #: why ``bands`` differ from ``written`` (the engine's caps and clips), one sentence each
    notes: tuple[str, ...] = ()
    #: the machines the plan is for: with NVLink multicast (True), without (False), any (None)
    multicast: bool | None = None
    #: for a plan a composed table took from a later table: which one, and why (messages only)
    origin: str = field(default="", compare=False)
    #: across hosts, whether they share one NVLink domain (rack) or are joined over a network (host)
    nvlink: NVLinkDomain = NVLinkDomain.HOST

    @property
    def topology(self) -> str:
        """``"ws=8"`` on one host, ``"ws=8 hosts=2"`` across hosts, ``"ws=8 hosts=2 nvlink=rack"`` in one NVLink
        domain, ``"ws=8 multicast=off"`` for one kind of machine."""
        text = f"ws={self.world_size}" + (f" hosts={self.hosts}" if self.hosts > 1 else "")
        text += " nvlink=rack" if self.nvlink is NVLinkDomain.RACK else ""
        return text + ("" if self.multicast is None else f" multicast={'on' if self.multicast else 'off'}")

    @property
    def key(self) -> tuple[int, str, int, bool | None, NVLinkDomain]:
        """What makes the plan one of its table: ``(world_size, mode, hosts, multicast, nvlink)``."""
        return (self.world_size, self.mode, self.hosts, self.multicast, self.nvlink)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nvlink", NVLinkDomain.parse(self.nvlink, f"plan ws={self.world_size} nvlink"))
        if self.hosts == 1 and self.nvlink is NVLinkDomain.RACK:
            raise TableError(f"plan ws={self.world_size} mode={self.mode}: nvlink=rack needs ranks across hosts")
        where = f"plan ws={self.world_size} mode={self.mode}"
        object.__setattr__(self, "bands", _check_bands(self.bands, where))
        object.__setattr__(self, "written", _check_bands(self.written, where))

    @property
    def open_ended(self) -> bool:
        """The last band covers every larger size: the fallback runs only when no candidate is available."""
        return bool(self.bands) and self.bands[-1].upto is None

    def spans(self, as_written: bool = False) -> list[Span]:
        """``(lower, upto, candidates)`` of each band that covers a size, then ``(lower, None, (fallback,))``
        for the sizes above a bounded last band; ``as_written``: of the bands as the engine's file writes them."""
        return band_spans((self.written or self.bands) if as_written else self.bands, self.fallback)

    def as_written(self) -> Plan:
        """This plan with the bands its engine's file writes (itself when they are the same)."""
        return replace(self, bands=self.written, written=(), notes=()) if self.written else self

    def params_for(self, algorithm: str) -> dict[str, ParamValue]:
        """This plan's parameters for ``algorithm`` (empty when it has none)."""
        for name, values in self.params:
            if name == algorithm:
                return dict(values)
        return {}

    @property
    def algorithms(self) -> tuple[str, ...]:
        """Every algorithm the plan can choose, in order of first appearance."""
        names = [c for band in self.bands for c in band.candidates] + [self.fallback]
        return tuple(dict.fromkeys(names))

    def lower(self, index: int) -> int:
        """The smallest size band ``index`` covers (``index`` > 0 follows a bounded band)."""
        if index == 0:
            return 0
        previous = self.bands[index - 1].upto
        assert previous is not None  # only the last band is open-ended
        return previous + 1


def _span_text(lower: int, upto: int | None) -> str:
    return f"{lower}+" if upto is None else (str(lower) if upto == lower else f"{lower}..{upto}")


@dataclass(frozen=True)
class ShapePlan:
    """The token bands for the messages of one shape: world sizes ``world_size..world_size_upto`` and hidden
    sizes ``hidden..hidden_upto`` (``None``: no upper bound), fused with one of ``fusions``.

    For an engine that decides by tokens x hidden x fused op rather than by
    bytes (TensorRT-LLM): band ``upto`` counts tokens, and above a bounded
    last band ``fallback`` runs. The plan answers every call in its ranges
    whatever the mode and the hosts (the engine's lookup takes neither); the
    table's ``caps`` say which messages skip the bands.
    """

    world_size: int
    world_size_upto: int | None
    hidden: int
    hidden_upto: int | None
    fusions: tuple[str, ...]
    bands: tuple[Band, ...]
    fallback: str
    provenance: Provenance | None = None  # None: the table's

    def __post_init__(self) -> None:
        where = f"shape plan {self.label}"
        for lo, hi, name in (
            (self.world_size, self.world_size_upto, "world size"),
            (self.hidden, self.hidden_upto, "hidden"),
        ):
            if isinstance(lo, bool) or not isinstance(lo, int) or lo < 1 or (hi is not None and hi < lo):
                raise TableError(f"{where}: the {name} range {lo}..{hi} is empty or not of positive integers")
        if not self.fusions or not all(isinstance(f, str) and f for f in self.fusions):
            raise TableError(f"{where}: a shape plan answers at least one fused op, got {self.fusions!r}")
        object.__setattr__(self, "bands", _check_bands(self.bands, where))

    @property
    def key(self) -> tuple[int, int | None, int, int | None]:
        """Where the plan answers: ``(world_size, world_size_upto, hidden, hidden_upto)`` (and its ``fusions``)."""
        return (self.world_size, self.world_size_upto, self.hidden, self.hidden_upto)

    @property
    def label(self) -> str:
        """``"ws=4..7 hidden=4096..8191 fusion=NONE"``: where the plan answers."""
        ws, hidden = _span_text(self.world_size, self.world_size_upto), _span_text(self.hidden, self.hidden_upto)
        return f"ws={ws} hidden={hidden} fusion={'/'.join(self.fusions)}"

    def covers(self, world_size: int, hidden: int, fusion: str) -> bool:
        """Whether a call of ``world_size`` ranks with ``hidden`` elements a token, fused with ``fusion``, reads
        this plan."""
        return (
            self.world_size <= world_size
            and (self.world_size_upto is None or world_size <= self.world_size_upto)
            and self.hidden <= hidden
            and (self.hidden_upto is None or hidden <= self.hidden_upto)
            and fusion in self.fusions
        )

    def overlaps(self, other: ShapePlan) -> bool:
        """Whether a call could read both plans."""

        def meet(lo: int, hi: int | None, lo2: int, hi2: int | None) -> bool:
            return (hi is None or lo2 <= hi) and (hi2 is None or lo <= hi2)

        return (
            bool(set(self.fusions) & set(other.fusions))
            and meet(self.world_size, self.world_size_upto, other.world_size, other.world_size_upto)
            and meet(self.hidden, self.hidden_upto, other.hidden, other.hidden_upto)
        )

    @property
    def open_ended(self) -> bool:
        """The last band covers every larger token count."""
        return bool(self.bands) and self.bands[-1].upto is None

    def spans(self) -> list[Span]:
        """``(lower, upto, candidates)`` of each band that covers a token count, then the fallback above."""
        return band_spans(self.bands, self.fallback)

    @property
    def algorithms(self) -> tuple[str, ...]:
        """Every algorithm the plan can choose, in order of first appearance."""
        return tuple(dict.fromkeys([c for band in self.bands for c in band.candidates] + [self.fallback]))


def pow2_ranges(rows: Iterable[int]) -> dict[int, tuple[int, int]]:
    """The values each row of a table indexed by a truncated ``log2`` reads: row ``r`` (a power of two) takes
    ``r..2r-1``, and the first row also the values above half of it, as a cast that truncates toward zero reads
    ``log2(100) - 7 = -0.36`` as row 0; a row that is not a power of two is read by itself alone."""
    ordered = sorted(set(rows))
    out: dict[int, tuple[int, int]] = {}
    for i, row in enumerate(ordered):
        if row & (row - 1):
            out[row] = (row, row)
            continue
        lo = row // 2 + 1 if i == 0 and row > 1 else row
        out[row] = (lo, 2 * row - 1)
    return out


@dataclass(frozen=True)
class Table:
    """A dispatch table for one platform.

    ``rules`` names how it decides where it has no plan (``artune.table.gaps``).
    ``origin`` (a path or ``reference:NAME``) and ``borrowed`` (how a
    fallback between arches reached this table) are for messages and are not
    part of the content (``artune.table.io.digest``). ``memo`` holds what other
    modules derive from the content (the compiled decider), once per table.
    """

    platform: Platform
    provenance: Provenance
    plans: tuple[Plan, ...]
    schema: int = SCHEMA
    rules: str = "artune"
    origin: str = field(default="", compare=False)
    borrowed: tuple[str, ...] = field(default=(), compare=False)
    forced: str = field(default="", compare=False)  # user override: this algorithm for every size
    overrides: tuple[str, ...] = field(default=(), compare=False)  # user overrides applied, as text
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)
    #: an engine's workspace cap for its shape plans, by the call's world size: ``(most, bytes)`` pairs, the
    #: first whose ``most`` (``None``: any) is at or above the world size; a larger message runs the gap
    #: policy's fallback whatever the plans say (TensorRT-LLM's ``getMaxRequiredWorkspaceSize``); () for none
    caps: tuple[tuple[int | None, int], ...] = ()
    #: what the engine reading behind this table cannot vouch for (``Caveat``); () for every other table
    caveats: tuple[Caveat, ...] = field(default=(), compare=False)
    #: for an engine that decides by shape (tokens x hidden x fused op): its plans (``ShapePlan``); () otherwise
    shape_plans: tuple[ShapePlan, ...] = ()
    #: for an engine reading: the messages' dtype the engine's code was evaluated with, so its plans already
    #: hold what that code decides for it (the catalog's dtype conditions do not apply on top); "" otherwise
    dtype: str = field(default="", compare=False)

    def cap(self, world_size: int) -> int:
        """The workspace cap in bytes at ``world_size`` (0: none)."""
        for most, nbytes in self.caps:
            if most is None or world_size <= most:
                return nbytes
        return 0

    def __post_init__(self) -> None:
        seen: set[tuple[int, str, int, bool | None, NVLinkDomain]] = set()
        for plan in self.plans:
            if plan.key in seen:
                hosts = f" hosts={plan.hosts}" if plan.hosts > 1 else ""
                hosts += " nvlink=rack" if plan.nvlink is NVLinkDomain.RACK else ""
                multicast = "" if plan.multicast is None else f" multicast={plan.multicast}"
                raise TableError(
                    f"{self.origin or 'table'}: two plans for world_size={plan.world_size}{hosts} "
                    f"mode={plan.mode}{multicast}"
                )
            seen.add(plan.key)
        clash = _overlapping(self.shape_plans)
        if clash is not None:
            raise TableError(
                f"{self.origin or 'table'}: two shape plans answer the same calls: {clash[0].label} and "
                f"{clash[1].label}"
            )

    @property
    def name(self) -> str:
        """How messages refer to this table."""
        return self.origin or f"{self.platform} table"

    def plan(
        self,
        world_size: int,
        mode: str,
        hosts: int = 1,
        multicast: bool | None = None,
        nvlink: NVLinkDomain = NVLinkDomain.HOST,
    ) -> Plan | None:
        """The plan for ``(world_size, mode)`` on ``hosts`` hosts in NVLink domain ``nvlink`` on a machine with
        ``multicast`` or ``None``: the one for exactly that ``multicast``, else the one for any machine."""
        nvlink = nvlink if hosts > 1 else NVLinkDomain.HOST
        found = self._plans_by_key.get((world_size, mode, hosts, multicast, nvlink))
        if found is None and multicast is not None:
            found = self._plans_by_key.get((world_size, mode, hosts, None, nvlink))
        return found

    def for_machine(self, multicast: bool | None) -> tuple[Plan, ...]:
        """The plans that apply on a machine with ``multicast`` (``None``: any machine, so only the plans for
        any machine): per ``(world_size, mode, hosts)`` the plan for that ``multicast``, else the one for any."""
        if multicast is None or all(p.multicast is None for p in self.plans):
            return tuple(p for p in self.plans if p.multicast is None)
        return tuple(
            p
            for p in self.plans
            if p.multicast == multicast
            or (p.multicast is None and (p.world_size, p.mode, p.hosts, multicast, p.nvlink) not in self._plans_by_key)
        )

    @cached_property
    def _plans_by_key(self) -> dict[tuple[int, str, int, bool | None, NVLinkDomain], Plan]:
        return {p.key: p for p in self.plans}

    @property
    def by_shape(self) -> bool:
        """Whether the table decides by shape (it has ``shape_plans``)."""
        return bool(self.shape_plans)

    @property
    def fusions(self) -> tuple[str, ...]:
        """Every fused op the shape plans answer, sorted."""
        return tuple(sorted({f for p in self.shape_plans for f in p.fusions}))

    def shape_plan(self, world_size: int, hidden: int, fusion: str) -> ShapePlan | None:
        """The shape plan a call of ``world_size`` ranks with ``hidden`` elements a token and ``fusion`` reads."""
        return next((p for p in self._by_fusion.get(fusion, ()) if p.covers(world_size, hidden, fusion)), None)

    @cached_property
    def _by_fusion(self) -> dict[str, list[ShapePlan]]:
        out: dict[str, list[ShapePlan]] = {}
        for plan in self.shape_plans:
            for fusion in plan.fusions:
                out.setdefault(fusion, []).append(plan)
        return out

    def with_changes(self, **changes: object) -> Table:
        """A copy with some fields replaced (dataclasses.replace); it derives its ``memo`` afresh."""
        return replace(self, memo={}, **changes)  # type: ignore[arg-type]


def _overlapping(plans: tuple[ShapePlan, ...]) -> tuple[ShapePlan, ShapePlan] | None:
    """Two of ``plans`` that a call could both read (a sweep over world sizes per fused op), or ``None``."""
    by_fusion: dict[str, list[ShapePlan]] = {}
    for plan in plans:
        for fusion in plan.fusions:
            by_fusion.setdefault(fusion, []).append(plan)
    for group in by_fusion.values():
        group.sort(key=lambda p: (p.world_size, p.hidden))
        active: list[ShapePlan] = []
        for plan in group:
            active = [p for p in active if p.world_size_upto is None or p.world_size_upto >= plan.world_size]
            found = next((p for p in active if p.overlaps(plan)), None)
            if found is not None:
                return found, plan
            active.append(plan)
    return None
