"""The engines' own switches as a dimension of the review: a move under a switch's other value, and a move that a
switch's new default causes.

A release computes its switches in its own ``envs.py`` (vLLM:
``artune.formats.vllm.code.ReleaseCode.env``; SGLang: its ``environ.py``,
``artune.formats.sglang.rules.env_defaults``), and its reader takes the
variables a user would set (``settings``). So each side is read again with a
switch set, as its user would set it:

- a switch whose default the two sides share is read at its other value on
  both sides: what moves only there is a move of its own, which the review
  asks about naming the switch (vLLM 0.34.0's ``should_custom_ar`` across
  hosts, which FlashInfer hides while ``VLLM_ALLREDUCE_USE_FLASHINFER`` is on);
- a switch whose default changes is held at BEFORE's default on AFTER: the
  moves that vanish then are the new default's (``VLLM_ALLREDUCE_USE_SYMM_MEM``
  in 0.11.0, ``VLLM_ALLREDUCE_USE_FLASHINFER`` in 0.29.0).

``SWITCHES`` names the switches of each engine's all-reduce dispatch that
choose a path; a new dimension is an entry there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from artune.formats.fingerprints import Evaluated
from artune.sources import Source
from artune.table.diff import Difference

#: the on/off switches each engine's all-reduce dispatch reads to choose a path
SWITCHES: Mapping[str, tuple[str, ...]] = {
    "vllm": ("VLLM_ALLREDUCE_USE_SYMM_MEM", "VLLM_ALLREDUCE_USE_FLASHINFER"),
    "sglang": ("SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2",),  # off: the v1 custom all-reduce (custom_ar_v1)
}

Settings = tuple[tuple[str, str], ...]
Found = Sequence[tuple[str, Difference]]  # (arch, difference)


@dataclass
class Reader:
    """A side's engine files (``engine`` at ``path``), read again under switch values: ``source(settings)`` its
    tables, ``default(name)`` a switch's value with nothing set (``None`` where the release has no such
    switch), ``evaluated()`` the dispatch functions the reading ran; each reading made once."""

    engine: str
    path: str
    _cache: dict[Settings, Source] = field(default_factory=dict)
    _defaults: dict[str, Any] = field(default_factory=dict)
    _evaluated: dict[str, Evaluated] | None = None
    _figures: Any = None
    _unknowns: dict[str, Source] | None = None

    def figures(self) -> Any:
        """vLLM's size tables as the release holds them (``artune.formats.vllm.figures.Figures``), else None."""
        if self._figures is None and self.engine == "vllm":
            from artune.formats.vllm.figures import read_figures
            from artune.formats.vllm.read import reading

            self._figures = read_figures(reading(self.path)[1])
        return self._figures

    def fill(self) -> Reader:
        """Every reading the review may ask for, made now: for files that are gone after (a git revision's)."""
        self.evaluated()
        self.figures()
        self.unknowns()
        for name in SWITCHES.get(self.engine, ()):
            for value in (True, False):
                self.source(((name, text(value)),))
            self.default(name)
        return self

    def source(self, settings: Settings) -> Source:
        if settings not in self._cache:
            from artune.formats import engine_reader

            read_under = engine_reader(self.engine).read_under
            assert read_under is not None  # a Reader is made for an engine that reads under switches
            imported = read_under(self.path, dict(settings), "bfloat16", "")
            found = imported.tables
            tables = [*found.tables.values(), *([found.default] if found.default else [])]
            self._cache[settings] = Source(tables, found, imported.findings)
        return self._cache[settings]

    def default(self, name: str) -> Any:
        if name not in self._defaults:
            if self.engine == "vllm":
                from artune.formats.vllm.read import reading

                status, value = reading(self.path)[1].env(name)
                self._defaults[name] = value if status == "value" else None
            elif self.engine == "sglang":
                from artune.formats.sglang.read import switch_defaults

                self._defaults[name] = switch_defaults(self.path).get(name)
            else:
                self._defaults[name] = None
        return self._defaults[name]

    def unknowns(self) -> dict[str, Source]:
        """Per ``if`` test the evaluator cannot know (an E401 caveat of the reading with nothing set, which took
        it as false), by its ``FILE:LINE``: the tables read again with that test alone taken as true (vLLM's
        ``assume_true``); {} for another engine, which takes no such reading."""
        if self._unknowns is None:
            self._unknowns = {}
            if self.engine == "vllm":
                from artune.formats.pyeval.statements import FALSE
                from artune.formats.vllm.read import reading
                from artune.table.types import CaveatKind

                found = self.source(())
                wheres = {
                    c.where
                    for t in found.tables
                    for c in t.caveats
                    if c.kind is CaveatKind.UNEVALUATED and c.assumed == FALSE
                }
                for where in sorted(wheres):
                    filename, _sep, line = where.rpartition(":")
                    imported = reading(self.path, {}, "bfloat16", frozenset({(filename, int(line))}))[0]
                    tables = [*imported.tables.tables.values(), *filter(None, [imported.tables.default])]
                    self._unknowns[where] = Source(tables, imported.tables, imported.findings)
        return self._unknowns

    def evaluated(self) -> dict[str, Evaluated]:
        """The dispatch functions the reading ran (and, for SGLang, the configs file's), by qualified name."""
        if self._evaluated is None:
            if self.engine == "vllm":
                from artune.formats.vllm.read import evaluated

                found = evaluated(self.path)
            elif self.engine == "sglang":
                from artune.formats.sglang.read import config_functions, evaluated

                found = [*evaluated(self.path), *config_functions(self.path)]  # its rows are built by functions
            else:
                return {}
            self._evaluated = {e.function: e for e in found}
        return self._evaluated


def engine_reader(engine: str, path: str) -> Reader | None:
    """How ``engine``'s files at ``path`` are read again (vLLM, SGLang); ``None`` for another engine."""
    return Reader(engine, path) if engine in ("vllm", "sglang") else None


def text(value: Any) -> str:
    """A switch's value as its variable is set: ``1``/``0`` for on/off."""
    return ("1" if value else "0") if isinstance(value, bool) else str(value)


def key(arch: str, d: Difference) -> tuple[Any, ...]:
    """A difference by where and what: the same move in two comparisons has the same key."""
    return (arch, d.world_size, d.mode, d.lo, d.hi, d.a, d.b, d.multicast, d.hosts, d.nvlink, d.hidden, d.fusion)


@dataclass(frozen=True)
class Switched:
    """What the switches add to a review: ``causes`` (a difference's key -> the default switch that causes it)
    and ``moves`` (``"NAME=VALUE"`` -> the differences under that value that the defaults do not show)."""

    causes: Mapping[tuple[Any, ...], tuple[str, ...]]
    moves: Mapping[str, tuple[tuple[str, Difference], ...]]


def switched(
    engine: str,
    before: Reader | None,
    after: Reader | None,
    found: Found,
    differences: Callable[[Source, Source], Found],
    default_before: Source,
    default_after: Source,
) -> Switched:
    """The causes and the moves the engine's switches add to ``found`` (the differences with nothing set);
    ``differences(BEFORE, AFTER)`` compares two sources as the review does."""
    if before is None or after is None:
        return Switched({}, {})
    shown = {key(arch, d) for arch, d in found}
    causes: dict[tuple[Any, ...], tuple[str, ...]] = {}
    moves: dict[str, tuple[tuple[str, Difference], ...]] = {}
    for name in SWITCHES.get(engine, ()):
        was, now = before.default(name), after.default(name)
        if was is None or now is None:
            continue  # a side without the switch: its code has no such choice to make
        if was != now:
            held = after.source(((name, text(was)),))
            remain = {key(arch, d) for arch, d in differences(default_before, held)}
            for k in shown - remain:
                causes.setdefault(k, (f"`{name}`'s default, {text(was)} -> {text(now)}",))
            continue
        other = ((name, text(not now)),) if isinstance(now, bool) else None
        if other is None:
            continue
        extra = [(a, d) for a, d in differences(before.source(other), after.source(other)) if key(a, d) not in shown]
        if extra:
            moves[f"{name}={text(not now)}"] = tuple(extra)
    return Switched(causes, moves)
