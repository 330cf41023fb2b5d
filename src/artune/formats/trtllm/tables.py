"""The boxes a header's function was cut into (``partition``), as artune tables of shape plans.

Each SM range the function treats alike becomes one table; in it each
fused-op group x TP range x hidden range becomes a ``ShapePlan`` whose bands
count tokens, equal neighbours merged (along tokens, then hidden sizes, then
TP sizes, then fused ops). A box where the engine's own code has no answer
(it throws, its behaviour is undefined, or artune could not run a statement
it needs) gets no plan: ``Gap`` says where and why, and the reader reports
it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from artune.formats.trtllm.enums import ALGORITHMS, Enums
from artune.formats.trtllm.partition import Box
from artune.table.types import Band, ShapePlan

Rows = list[tuple[tuple[int, int | None], tuple[Band, ...]]]  # (hidden range, bands) of one TP range


@dataclass(frozen=True)
class Gap:
    """Calls the engine's own code has no answer for: a fused-op group, TP and hidden ranges, and why."""

    fusions: tuple[str, ...]
    world_sizes: tuple[int, int | None]
    hidden: tuple[int, int | None]
    tokens: tuple[int, int | None]
    kind: str  # "undefined", "throws", "unevaluated", "no strategy"
    why: str


def algorithm(enums: Enums, value: Any) -> str | None:
    """artune's name for the strategy enum value ``value`` (``None``: no ``AllReduceStrategyType`` has it)."""
    name = enums.strategy_name(value) if isinstance(value, int) else None
    return None if name is None else ALGORITHMS.get(name, f"trtllm_{name.lower()}")


def shape_plans(fusion_boxes: list[Box], enums: Enums, fallback: str) -> tuple[list[ShapePlan], list[Gap]]:
    """The shape plans of one SM range's boxes (fused op > TP > hidden > tokens), and the gaps."""
    merged: dict[tuple[tuple[int, int | None], tuple[int, int | None], tuple[Band, ...]], list[str]] = {}
    gaps: list[Gap] = []
    for box in fusion_boxes:
        group, tp_boxes = box.below
        names = tuple(enums.fusion_name(v) for v in group)
        by_tp: list[tuple[tuple[int, int | None], Rows]] = []
        for tp in tp_boxes:
            rows: Rows = []
            for hidden in tp.below:
                bands, gap = _bands(hidden.below, enums)
                if gap is not None:
                    kind, why, tokens = gap
                    gaps.append(Gap(names, (tp.lo, tp.hi), (hidden.lo, hidden.hi), tokens, kind, why))
                    continue
                if rows and rows[-1][1] == bands and rows[-1][0][1] is not None and rows[-1][0][1] + 1 == hidden.lo:
                    rows[-1] = ((rows[-1][0][0], hidden.hi), bands)
                else:
                    rows.append(((hidden.lo, hidden.hi), bands))
            if by_tp and by_tp[-1][1] == rows and by_tp[-1][0][1] is not None and by_tp[-1][0][1] + 1 == tp.lo:
                by_tp[-1] = ((by_tp[-1][0][0], tp.hi), rows)
            else:
                by_tp.append(((tp.lo, tp.hi), rows))
        for ws, rows in by_tp:
            for hidden_range, bands in rows:
                merged.setdefault((ws, hidden_range, bands), []).extend(names)
    plans = [
        ShapePlan(ws[0], ws[1], hidden[0], hidden[1], tuple(fusions), bands, fallback)
        for (ws, hidden, bands), fusions in merged.items()
    ]
    return plans, gaps


def _bands(pieces: list[Box], enums: Enums) -> tuple[tuple[Band, ...], tuple[str, str, tuple[int, int | None]] | None]:
    """One row's token pieces as bands, equal neighbours merged; or, when some piece has no strategy, the first
    such piece's reason and the token counts from it to the last such piece (the row then has no plan)."""
    bands: list[Band] = []
    failed: list[tuple[str, str, Box]] = []
    for piece in pieces:
        kind, detail = piece.below
        name = algorithm(enums, detail) if kind == "value" else None
        if name is None:
            if kind == "value":
                kind, detail = "no strategy", f"returns {detail!r}, which no AllReduceStrategyType member has"
            failed.append((kind, str(detail), piece))
        elif bands and bands[-1].candidates == (name,):
            bands[-1] = Band(piece.hi, (name,))
        else:
            bands.append(Band(piece.hi, (name,)))
    if failed:
        kind, why, first = failed[0]
        return (), (kind, why, (first.lo, failed[-1][2].hi))
    return tuple(bands), None


__all__ = ["Gap", "algorithm", "shape_plans"]
