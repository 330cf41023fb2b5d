"""What ships: the derived table or a fixed rule, as the run's own checks decide, and whether it is vouched for.

Two checks of a run time the derived table against every fixed rule (the
published rule and ``always <algorithm>`` for each algorithm) at sizes the
derivation did not choose: the duel at its fresh sizes, and the held-out
regret at sizes no other phase touched (``artune.tune.regret``), where every
algorithm and every plan's choice ran together in one call per size. Each
check weighs one plan against another by the tuner's one plan-against-plan
comparison (``FasterRule.weigh`` in ``artune.tune.compare``, reached through
``TuneState.weigh``): the geometric mean over its sizes of the ratio of the
time their choices spent, with an interval. A plan is *ahead* on a check
when it is ahead by more than the plan tie (``PLAN_TIE``, 1%) over the whole
interval and its typical call is not behind; otherwise the two are level
there, and the report says so without calling it a loss (a point estimate of
the regret a per cent apart over a dozen noisy sizes decides nothing).

The two checks are weighed apart, never pooled into one weighing: the duel's
sizes are where the plan was repaired (a size a fixed rule won there joins
the evidence the plan is derived from), so they lean the plan's way, while
no phase chose anything at the held-out sizes. Pooled, the duel's sizes
would dilute the one check the plan was not fitted to; apart, a plan ahead
on either check is ahead, and checks that put different plans ahead are
reported as contradicting each other, not averaged away.

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
from artune.tune.compare import PLAN_TIE, Overall
from artune.tune.regret import RegretScore

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
                f"Shipped the {self.derived}: no check of the run puts a fixed rule ahead of it by more than "
                f"{PLAN_TIE:.0%}."
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


#: one check's weighing of plan ``a`` against plan ``b`` over its sizes (``None``: not weighed)
Weigh = Callable[[str, str], Overall | None]


def _ahead(check: str, weigh: Weigh, regret: RegretScore, index: Mapping[str, int], a: str, b: str) -> Ahead | None:
    found = weigh(a, b)
    if found is None or not found.ahead():
        return None
    detail = found.interval() if found.failed else f"{found.interval()}, its time over the other's"
    if check == HELD_OUT:
        detail += f"; regret {regret.geomean(index[a]):.3f} against {regret.geomean(index[b]):.3f} geomean"
    return Ahead(check, a, b, found.ratio, detail)


def choose(derived: str, plans: Mapping[str, Plan], regret: RegretScore, checks: Mapping[str, Weigh]) -> Shipping:
    """The plan that ships among ``plans`` (the derived table ``derived`` and every fixed rule, each scored by
    ``regret`` under the same name), by the module's rules; ``checks``: each check's weighing by name
    (``HELD_OUT``, ``DUEL``)."""
    index = {name: i for i, name in enumerate(regret.rules)}
    names = [n for n in plans if n in index]

    def ahead_of(behind: str) -> list[Ahead]:
        found = []
        for other in names:
            if other != behind:
                found += [x for c, w in checks.items() if (x := _ahead(c, w, regret, index, other, behind))]
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
