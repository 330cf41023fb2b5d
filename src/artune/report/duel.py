"""The report's account of the final duel and of the machine's states (``artune.tune.duel``, ``.states``).

Per world size: how many fresh sizes the table dueled every fixed rule at,
the wins a fixed rule had there (confirmed in a second call), what the
repair changed, and the shipped table's standing over every duel size; then
where calls at different moments disagreed, how often and how far.
"""

from __future__ import annotations

from artune.report.document import Block, Grid, Heading, Para
from artune.sizes import human_size
from artune.tune.compare import PLAN_TIE
from artune.tune.tuner import WorldResult

#: swings listed in the report at most (the largest)
SHOWN_SWINGS = 8


def duel_line(result: WorldResult) -> str:
    """One line: the duel's sizes, the wins it repaired, single-size wins left, and the closest fixed rule."""
    d = result.duel
    if d is None:
        return "No duel was run."
    wins = sum(len(r.losses) for r in d.rounds)
    left = (
        ""
        if d.holds
        else f"; {len(d.standing)} size(s) a fixed rule still wins alone, where the evidence around them made no band"
    )
    line = (
        f"Duel against every fixed rule at {len(d.sizes)} fresh sizes in {len(d.rounds)} round(s): "
        f"{wins} win(s) by a fixed rule confirmed, {len(d.fixes)} repair(s){left}."
    )
    differ = [o for o in d.overall if o.sizes]
    if d.overall and not differ:
        line += " Every fixed rule chose as the derived table did, or differed only where too few rounds fit to tell."
    if differ:
        best = min(differ, key=lambda o: o.ratio)
        if best.ahead():
            standing = f"ahead by more than {PLAN_TIE:.0%} over its whole interval"
        elif best.ratio < 1.0:
            standing = f"level (not ahead by more than {PLAN_TIE:.0%} over its whole interval)"
        else:
            standing = "not ahead"
        if best.failed:
            line += f" Against the closest fixed rule, {best.rule}: {best.interval()}: {standing}."
        else:
            line += (
                f" Over all of them the closest fixed rule, {best.rule}, against the derived table (its time over "
                f"the table's, geometric mean): {best.interval()}: {standing}."
            )
    return line


def duel_blocks(result: WorldResult) -> list[Block]:
    """The duel's section of one world size."""
    d = result.duel
    if d is None:
        return []
    blocks: list[Block] = [Heading(f"Duel before shipping (ws={result.world_size})", 3), Para(duel_line(result))]
    if not d.holds:
        blocks.append(
            Para(
                "Single sizes a fixed rule still wins, where bisection found no band of the winner that its own "
                "sizes hold up (one size is not a band; the weighing over all sizes counts them): "
                + "; ".join(loss.describe() for loss in d.standing)
            )
        )
    rows = []
    for i, r in enumerate(d.rounds, 1):
        sizes = ", ".join(human_size(s) for s in r.sizes) or "(pins over the sizes above)"
        wins = "; ".join(f"{human_size(loss.size)}: {loss.rule} {loss.comparison.interval()}" for loss in r.losses)
        fixes = "; ".join(f"{human_size(f.size)} {f.how}: {f.what}" for f in r.fixes)
        rows.append((str(i), sizes, wins or "none", fixes or "-"))
    blocks.append(
        Grid(("round", "fresh sizes", "wins by a fixed rule (its time over the table's)", "repair"), tuple(rows))
    )
    blocks.append(
        Para(
            "The held-out regret above is at sizes neither the tuning nor the duel measured. A win is the fixed "
            "rule's choice faster than the table's by the evidence rule, across two calls at different moments."
        )
    )
    return blocks


def states_blocks(result: WorldResult) -> list[Block]:
    """Where calls at different moments disagreed (the machine's states), for one world size."""
    st = result.states
    if st is None:
        return []
    blocks: list[Block] = [Heading(f"The machine's states (ws={result.world_size})", 3), Para(st.describe())]
    if st.swings:
        top = sorted(st.swings, key=lambda s: s.factor, reverse=True)[:SHOWN_SWINGS]
        rows = tuple(
            (
                human_size(s.size),
                f"{s.a.key}/{s.b.key}",
                ", ".join(f"{r:.3f} {v}" for r, v in zip(s.ratios, s.verdicts, strict=True)),
                f"{s.factor:.2f}x",
            )
            for s in top
        )
        blocks.append(Grid(("size", "pair", "ratio per call", "moved"), rows))
        blocks.append(
            Para(
                "Decisions resting on such calls go to the side the calls favour on the whole (each call one "
                "moment of the machine), not to the state the last call landed in."
            )
        )
    if st.tails:
        rows = tuple(
            (human_size(t.size), f"{t.a.key}/{t.b.key}", f"{t.median_ratio:.3f}", f"{t.spent_ratio:.3f}")
            for t in sorted(st.tails, key=lambda t: t.size)[:SHOWN_SWINGS]
        )
        blocks.append(Grid(("size", "pair (one call)", "ratio of medians", "ratio of time spent"), rows))
        blocks.append(
            Para(
                "The tuner decides on the medians of turns, and where the time spent points the other way "
                "beyond the tie band it does not take the median's verdict: such a pair is unsure, and the "
                "incumbent keeps the size."
            )
        )
    return blocks
