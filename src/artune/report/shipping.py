"""The report's account of what ships and why, and of every band with its evidence.

Per world size: which plan ships (the derived table, or the fixed rule a
check of the run put ahead of it) and which checks decided it
(``artune.tune.shipping``); then every band of the derived table with the
sizes inside it where it was faster than its rivals, level with one, or
slower, and why it stands; the bands the evidence rules removed, and the
near-ties with the choice that resolved them (``artune.tune.bands``).
"""

from __future__ import annotations

from artune.report.document import Block, Bullets, Grid, Heading, Para
from artune.sizes import format_span, human_size
from artune.tune.bands import MIN_SIZES, MIN_WIDTH, BandAudit
from artune.tune.compare import PLAN_TIE
from artune.tune.tuner import WorldResult


def shipping_line(result: WorldResult) -> str:
    """One line: what ships for this world size, and why."""
    s = result.shipping
    return s.describe() if s is not None else "Shipped the tuned table."


def loss_warning(result: WorldResult) -> str:
    """``""``, or a loud line when the plan that ships has a check of the run against it (not vouched for)."""
    s = result.shipping
    if s is None or s.vouched:
        return ""
    mode = "" if result.mode == "eager" else " " + result.mode
    return f"WARNING: ws={result.world_size}{mode}: {s.describe()}"


def near_tie_lines(result: WorldResult) -> list[str]:
    """Every near-tie of the derived table, one line each."""
    return [t.describe() for t in result.shaping.near_ties] if result.shaping is not None else []


def _sizes(sizes: tuple[int, ...]) -> str:
    if not sizes:
        return "-"
    if len(sizes) == 1:
        return human_size(sizes[0])
    return f"{len(sizes)}: {human_size(min(sizes))}-{human_size(max(sizes))}"


def _row(a: BandAudit) -> tuple[str, ...]:
    return (
        format_span(a.lower, a.upto),
        a.algorithm,
        "/".join(a.rivals) or "-",
        _sizes(a.faster),
        _sizes(a.level),
        _sizes(a.slower),
        str(a.why),
    )


def shipping_blocks(result: WorldResult) -> list[Block]:
    """The section of one world size: what ships, then the derived table's bands and their evidence."""
    blocks: list[Block] = [Heading(f"What ships and why (ws={result.world_size})", 3), Para(shipping_line(result))]
    blocks.append(
        Para(
            f"A plan is ahead of another on a check (the duel, the held-out sizes) when it is ahead by more than "
            f"{PLAN_TIE:.0%} over the whole interval of its weighing there (the geometric mean over the check's sizes "
            "of the ratio of the time their choices spent) and its typical call is not behind. The derived table ships "
            "unless a check puts a fixed rule ahead of it; then the fixed rule with the best held-out regret that no "
            "check puts another plan ahead of; when the checks contradict each other, nothing is vouched for and "
            "'artune tune' installs the table only with --force."
        )
    )
    shaping = result.shaping
    if shaping is None:
        return blocks
    blocks.append(Heading(f"The derived table's bands and their evidence (ws={result.world_size})", 3))
    blocks.append(
        Grid(
            ("sizes", "algorithm", "rivals", "faster at", "level or unsure at", "slower at", "stands as"),
            tuple(_row(a) for a in shaping.audits),
        )
    )
    blocks.append(
        Para(
            "Every band of the derived table was held to the evidence at its own measured sizes (the coarse picks, "
            f"probes, bisection steps and the duel's sizes). A band narrower than {MIN_WIDTH:g}x that is an island or "
            "leaves the published rule is a sliver, merged into its neighbours. An island (between two bands of "
            f"one other algorithm) stands only where it is faster than that algorithm at {MIN_SIZES} of its sizes, "
            "beyond the tie band. A stretch that leaves the published rule needs the same against the published "
            "choice, and reaches only as far as its leads where the published choice runs beside it; so a "
            "near-tie goes to the published rule's choice."
        )
    )
    if shaping.merges:
        blocks.append(Para("Removed by these rules:"))
        blocks.append(Bullets(tuple(m.describe() for m in shaping.merges)))
    if shaping.near_ties:
        blocks.append(Para("Near-ties (within the tie band at consecutive measured sizes):"))
        blocks.append(Bullets(tuple(near_tie_lines(result))))
    return blocks
