"""The comment every export starts with: where the figures came from, and what the projection dropped."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from artune.table.model import Table


@dataclass
class Export:
    """Text to paste, and notes for stderr about what the format could not hold."""

    text: str
    dropped: list[str] = field(default_factory=list)


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
