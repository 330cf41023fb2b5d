"""The run's own verdict binds: which plan ships, the derived table or a fixed rule, and whether it is vouched for.

Two checks of a run time the derived table against every fixed rule (the
published rule and ``always <algorithm>`` for each algorithm) at sizes the
derivation did not choose: the duel, weighed over all its sizes with an
interval (``artune.tune.duel.weigh``), and the held-out regret at sizes no
other phase touched (``artune.tune.regret``). A plan is *ahead* of another
on a check when it is ahead by more than ``TIE`` (1%): by the duel's whole
interval, or by the held-out geometric-mean regret. Inside the band the two
are level, and the report says so without calling it a loss.

``choose`` decides:

1. the derived table ships when no check puts a fixed rule ahead of it;
2. otherwise the fixed rule with the best held-out regret among those that
   no check puts another plan ahead of (derived or fixed), and the report
   says which check put it ahead and by how much;
3. when every plan has a check that puts another ahead (the checks
   contradict each other: the machine changed during the run), none is
   vouched for: the one with the best held-out regret (the last word) is
   written with the checks against it, and ``artune tune`` installs it only
   with ``--force``.

So a table that its own run's output says loses is never installed without
being asked for by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from artune.table.types import Plan
from artune.tune.duel import Overall
from artune.tune.regret import RegretScore

#: a plan ahead of another by more than this (geometric mean over a check's sizes) is ahead; inside, level
TIE = 0.01
HELD_OUT = "held-out regret"
DUEL = "duel"


@dataclass(frozen=True)
class Ahead:
    """One check that put ``ahead`` ahead of ``behind``."""

    check: str  # HELD_OUT or DUEL
    ahead: str
    behind: str
    ratio: float  # ahead's regret (held-out) or time (duel) over behind's
    detail: str  # the figures: the two regrets, or the interval

    def describe(self) -> str:
        """``the held-out regret put always shm_two_shot ahead of tuned table (1.013 against 1.023 geomean)``."""
        return f"the {self.check} put {self.ahead} ahead of {self.behind} ({self.detail})"


@dataclass(frozen=True)
class Shipping:
    """What ships for one world size, and why."""

    shipped: str  # the derived table's name, or the fixed rule whose plan ships
    plan: Plan
    derived: str  # the derived table's name
    beaten: tuple[Ahead, ...]  # the checks that put a fixed rule ahead of the derived table
    against: tuple[Ahead, ...]  # the checks that put another plan ahead of the shipped one (not vouched for)

    @property
    def vouched(self) -> bool:
        """True when no check of the run puts another plan ahead of the one shipped: it may be installed."""
        return not self.against

    @property
    def replaced(self) -> bool:
        """True when a fixed rule ships instead of the derived table."""
        return self.shipped != self.derived

    def describe(self) -> str:
        """One line: what ships and why."""
        if not self.replaced and self.vouched:
            return (
                f"Shipped the {self.derived}: no check of the run puts a fixed rule ahead of it by more than {TIE:.0%}."
            )
        why = "; ".join(a.describe() for a in self.beaten)
        text = f"Shipped {self.shipped} instead of the {self.derived}: {why}." if self.replaced else ""
        if not self.vouched:
            against = "; ".join(a.describe() for a in self.against)
            text += (
                f" The run's checks contradict each other: {against}. It LOSES on its own checks; not vouched for "
                "(rerun 'artune tune' on a quieter machine; --force installs it anyway)."
            )
        return text.strip()


def _held_out(regret: RegretScore, index: Mapping[str, int], a: str, b: str) -> Ahead | None:
    ga, gb = regret.geomean(index[a]), regret.geomean(index[b])
    if not (ga < gb / (1.0 + TIE)):  # nan (nothing scored) is never ahead
        return None
    return Ahead(HELD_OUT, a, b, ga / gb if math.isfinite(gb) else 0.0, f"{ga:.3f} against {gb:.3f} geomean")


def _duel(weigh: Callable[[str, str], Overall | None], a: str, b: str) -> Ahead | None:
    found = weigh(a, b)
    if found is None or not found.ahead(TIE):
        return None
    return Ahead(DUEL, a, b, found.ratio, f"{found.interval()}, its time over the other's")


def choose(
    derived: str,
    plans: Mapping[str, Plan],
    regret: RegretScore,
    weigh: Callable[[str, str], Overall | None],
) -> Shipping:
    """The plan that ships among ``plans`` (the derived table ``derived`` and every fixed rule, each scored by
    ``regret`` under the same name), by the module's rules; ``weigh(a, b)``: the duel's weighing of plan
    ``a`` against plan ``b`` (``None``: not weighed)."""
    index = {name: i for i, name in enumerate(regret.rules)}
    names = [n for n in plans if n in index]

    def ahead_of(behind: str) -> list[Ahead]:
        found = []
        for other in names:
            if other != behind:
                found += [x for x in (_held_out(regret, index, other, behind), _duel(weigh, other, behind)) if x]
        return found

    beaten = tuple(ahead_of(derived))
    if not beaten:
        return Shipping(derived, plans[derived], derived, (), ())
    fixed = [n for n in names if n != derived]
    clean = [n for n in fixed if not ahead_of(n)]
    best = min(clean or names, key=lambda n: (_score(regret.geomean(index[n])), names.index(n)))
    beaten = tuple(a for a in beaten if a.ahead == best) or beaten
    return Shipping(best, plans[best], derived, beaten, tuple(ahead_of(best)))


def _score(value: float) -> float:
    return math.inf if math.isnan(value) else value
