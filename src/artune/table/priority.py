"""Priority rule lists, the way engines write their dispatch, converted to artune bands.

An engine decides with a list of rules tried in order: "use ``algorithm`` if
``lo <= nbytes <= hi`` (and it can run here)", the first match wins, and a
final fallback takes the rest. artune's plans are bands instead (see
``artune.table.types``), so ``bands_from_rules`` cuts the size axis at every
rule boundary and gives each elementary interval the rules that cover it, in
priority order, as its candidates. Every candidate is kept, not only the first:
which one runs is decided at run time by availability (dtype, alignment,
multicast, parameters), exactly as the engine's first-match would skip a rule
whose run-time check fails. The plan's ``fallback`` plays the engine's final
fallback.

Bounds are whole bytes and inclusive on both ends; ``below`` and ``upto``
build rules from an engine's exclusive (``nbytes < limit``) and inclusive
(``nbytes <= limit``) thresholds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from artune.table.types import Band


@dataclass(frozen=True)
class SizeRule:
    """Use ``algorithm`` for ``lo <= nbytes <= hi`` (inclusive); ``hi < lo`` is an empty rule."""

    algorithm: str
    lo: int
    hi: int

    def __post_init__(self) -> None:
        for bound in (self.lo, self.hi):
            # bool is an int subclass, and a float bound would make "exact bytes" a lie
            if isinstance(bound, bool) or not isinstance(bound, int):
                raise TypeError(f"SizeRule({self.algorithm!r}): bounds must be int bytes, got {bound!r}")
        if self.lo < 0:
            raise ValueError(f"SizeRule({self.algorithm!r}): lo must not be negative, got {self.lo}")

    @property
    def empty(self) -> bool:
        """True when the rule covers no size (a disabled algorithm)."""
        return self.hi < self.lo

    def covers(self, nbytes: int) -> bool:
        """Whether ``nbytes`` is in the rule's range."""
        return self.lo <= nbytes <= self.hi


def below(algorithm: str, limit: int) -> SizeRule:
    """The rule ``nbytes < limit`` (an exclusive upper bound, as vLLM writes them)."""
    return SizeRule(algorithm, 0, limit - 1)


def upto(algorithm: str, limit: int) -> SizeRule:
    """The rule ``nbytes <= limit`` (an inclusive upper bound, as SGLang writes them)."""
    return SizeRule(algorithm, 0, limit)


def bands_from_rules(rules: Iterable[SizeRule], fallback: str) -> tuple[Band, ...]:
    """Bands equivalent to trying ``rules`` in order and then ``fallback``.

    For every size, the band's candidates are the algorithms of the rules that
    cover it, in rule order (a name listed twice keeps its first place: the
    second can never win where the first could not). An interval that no rule
    covers but that lies below a covered one gets ``(fallback,)``; nothing is
    emitted above the last covered size, where the plan's fallback applies.
    Adjacent intervals with the same candidates are merged.
    """
    live = [rule for rule in rules if not rule.empty]
    # every size where the set of covering rules can change
    cuts = sorted({0} | {rule.lo for rule in live} | {rule.hi + 1 for rule in live})
    bands: list[Band] = []
    for start, stop in pairwise(cuts):
        last = stop - 1
        # elementary intervals never straddle a rule boundary: covering the ends covers all
        names = tuple(dict.fromkeys(r.algorithm for r in live if r.lo <= start and last <= r.hi))
        candidates = names or (fallback,)
        if bands and bands[-1].candidates == candidates:
            bands[-1] = Band(last, candidates)
        else:
            bands.append(Band(last, candidates))
    # a trailing fallback-only band says what "above the last band" already says
    while bands and bands[-1].candidates == (fallback,):
        bands.pop()
    return tuple(bands)
