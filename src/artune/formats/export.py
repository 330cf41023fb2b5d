"""What every export shares: the comment it starts with (where the figures came from) and what it dropped."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from artune.sizes import MAX_SIZE, format_span
from artune.table.diff import Topology, diff_tables, topologies_of
from artune.table.types import Table


@dataclass(frozen=True)
class Export:
    """Text to paste, and notes for stderr about what the format could not hold."""

    text: str
    dropped: list[str] = field(default_factory=list)


def differences(original: Table, written: Table, topologies: set[Topology] | None = None) -> list[str]:
    """Where ``written`` (the engine's reading of the export) decides differently from ``original``, in
    ``topologies`` (default: the original's; an engine also plans ranks across hosts from the same rows).

    Sizes from ``MAX_SIZE`` on are left out: beyond any size artune handles,
    they are where an open-ended band is written as ``1 << 50``.
    """
    return [
        f"{d.where.replace('mode=', '')} {format_span(d.lo, d.hi)}: {' > '.join(d.a)} becomes {' > '.join(d.b)}"
        for d in diff_tables(original, written, topologies=topologies or topologies_of(original))
        if d.lo < MAX_SIZE
    ]


def provenance_lines(table: Table, command: str, comment: str = "#") -> list[str]:
    """Comment lines naming the table's provenance and the command that exported it."""
    p = table.provenance
    if p.source == "measured":
        what = "measured" + (f" on {p.device}" if p.device else "") + (f" on {p.date}" if p.date else "")
        what += f" by {p.tool}" if p.tool else ""
    elif p.source == "inherited":
        what = f"inherited from arch {p.inherited_from or '?'}, not measured on {table.platform.arch}"
    else:
        what = p.source + (f" ({p.tool})" if p.tool else "")
    lines = [
        f"{comment} artune export of {table.name} [{table.platform}]",
        f"{comment} figures: {what}",
    ]
    if p.notes:
        lines.append(f"{comment} notes: {p.notes}")
    today = datetime.date.today().isoformat()
    lines.append(f"{comment} exported {today} by: {command}")
    return lines
