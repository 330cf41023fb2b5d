"""The table model: platforms, provenance, bands, plans and tables as frozen data.

A ``Table`` is for one platform and holds ``Plan`` s, one per
``(world_size, hosts, mode)`` (``hosts``: how many hosts the ranks span; 1
unless a plan says otherwise). A plan is an ordered list of ``Band`` s: band ``i``
covers sizes ``(bands[i-1].upto, bands[i].upto]`` (the first starts at 0) and
names one algorithm or an ordered list of candidates (the first available at
run time wins). Above the last band, or when no candidate is available, the
plan's ``fallback`` runs. This module only holds data and its invariants;
reading and writing files is ``artune.table.io``, deciding is
``artune.table.decide``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from artune.errors import TableError
from artune.sizes import MAX_SIZE

if TYPE_CHECKING:
    from artune.table.decide import Decision

KINDS = ("cuda", "rocm", "cpu")
MODES = ("graph", "eager")
SOURCES = ("measured", "published", "inherited", "modelled")
SCHEMA = 1

ParamValue = int | float | str | bool
Params = tuple[tuple[str, ParamValue], ...]  # sorted (key, value) pairs: hashable


def freeze_params(params: Mapping[str, Mapping[str, ParamValue]]) -> tuple[tuple[str, Params], ...]:
    """Per-algorithm parameter dicts as sorted, hashable tuples."""
    return tuple(sorted((name, tuple(sorted(values.items()))) for name, values in params.items()))


@dataclass(frozen=True)
class Platform:
    """What a table is for: ``kind`` cuda/rocm/cpu, ``arch`` ("10.7", "x86_64"), optional device."""

    kind: str
    arch: str
    device: str = ""

    def __str__(self) -> str:
        return f"{self.kind} arch={self.arch}" + (f" ({self.device})" if self.device else "")


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


@dataclass(frozen=True)
class Band:
    """Sizes up to ``upto`` bytes (inclusive; ``None``: every size) go to the first available of ``candidates``."""

    upto: int | None
    candidates: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    """The bands for one ``(world_size, hosts, mode)``."""

    world_size: int
    mode: str
    bands: tuple[Band, ...]
    fallback: str
    params: tuple[tuple[str, Params], ...] = ()
    provenance: Provenance | None = None  # None: the table's
    hosts: int = 1  # the hosts the world_size ranks span

    @property
    def topology(self) -> str:
        """``"ws=8"`` on one host, ``"ws=8 hosts=2"`` across hosts."""
        return f"ws={self.world_size}" + (f" hosts={self.hosts}" if self.hosts > 1 else "")

    def __post_init__(self) -> None:
        if any(band.upto is None for band in self.bands[:-1]):
            raise TableError(f"plan ws={self.world_size} mode={self.mode}: only the last band may be open-ended")
        last = self.bands[-1] if self.bands else None
        if last is not None and last.upto is not None and last.upto >= MAX_SIZE:
            # old files wrote "no bound" as the largest size ("1024TiB"): read it as what it meant
            bands = (*self.bands[:-1], Band(None, last.candidates))
            object.__setattr__(self, "bands", bands)

    @property
    def open_ended(self) -> bool:
        """The last band covers every larger size: the fallback runs only when no candidate is available."""
        return bool(self.bands) and self.bands[-1].upto is None

    def spans(self) -> list[tuple[int, int | None, tuple[str, ...]]]:
        """``(lower, upto, candidates)`` of each band that covers a size, then ``(lower, None, (fallback,))``
        for the sizes above a bounded last band."""
        out: list[tuple[int, int | None, tuple[str, ...]]] = []
        lower = 0
        for band in self.bands:
            if band.upto is None:
                return [*out, (lower, None, band.candidates)]
            if band.upto >= lower:
                out.append((lower, band.upto, band.candidates))
                lower = band.upto + 1
        return [*out, (lower, None, (self.fallback,))]

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


@dataclass(frozen=True)
class Table:
    """A dispatch table for one platform.

    ``origin`` (a path or ``reference:NAME``) and ``borrowed`` (how a
    family fallback reached this table) are for messages and are not part of
    the content (``digest``).
    """

    platform: Platform
    provenance: Provenance
    plans: tuple[Plan, ...]
    schema: int = SCHEMA
    origin: str = field(default="", compare=False)
    borrowed: tuple[str, ...] = field(default=(), compare=False)
    forced: str = field(default="", compare=False)  # user override: this algorithm for every size
    overrides: tuple[str, ...] = field(default=(), compare=False)  # user overrides applied, as text

    def __post_init__(self) -> None:
        seen: set[tuple[int, str, int]] = set()
        for plan in self.plans:
            key = (plan.world_size, plan.mode, plan.hosts)
            if key in seen:
                hosts = f" hosts={plan.hosts}" if plan.hosts > 1 else ""
                raise TableError(
                    f"{self.origin or 'table'}: two plans for world_size={plan.world_size}{hosts} mode={plan.mode}"
                )
            seen.add(key)

    @property
    def name(self) -> str:
        """How messages refer to this table."""
        return self.origin or f"{self.platform} table"

    def plan(self, world_size: int, mode: str, hosts: int = 1) -> Plan | None:
        """The plan for exactly ``(world_size, mode)`` on ``hosts`` hosts, or ``None``."""
        return self._plans_by_key.get((world_size, mode, hosts))

    @cached_property
    def _plans_by_key(self) -> dict[tuple[int, str, int], Plan]:
        return {(p.world_size, p.mode, p.hosts): p for p in self.plans}

    @cached_property
    def digest(self) -> str:
        """A short hash of the table's content (platform, provenance, plans); equal tables, equal digests."""
        from artune.table.io import table_to_dict

        text = json.dumps(table_to_dict(self, exact=True), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @cached_property
    def _decider(self) -> object:
        from artune.table.decide import Decider

        return Decider(self)

    def decide(
        self,
        nbytes: int,
        world_size: int,
        mode: str = "eager",
        available: frozenset[str] | set[str] | None = None,
        hosts: int = 1,
    ) -> Decision:
        """Choose the algorithm for one all-reduce of ``nbytes`` bytes.

        ``available`` is the set of algorithm names that can run now (``None``:
        all); ``hosts`` is how many hosts the ranks span. Never returns ``None``
        and never raises for a valid size: a topology or mode without a plan
        follows the rule documented in ``artune.table.decide``, and the
        decision's ``reason`` says which.
        """
        return self._decider.decide(nbytes, world_size, mode, available, hosts)  # type: ignore[attr-defined]

    def with_changes(self, **changes: object) -> Table:
        """A copy with some fields replaced (dataclasses.replace)."""
        return replace(self, **changes)  # type: ignore[arg-type]
