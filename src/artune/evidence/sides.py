"""Both sides of a change scored on one sweep, and the best row: the data ``artune review --evidence`` prints."""

from __future__ import annotations

from typing import Any

from artune.errors import EvidenceError
from artune.evidence.best import ENGINES, best_row
from artune.evidence.score import score_table
from artune.evidence.sweep import BenchmarkSweep
from artune.table.types import Table


def compare_sides(before: Table, after: Table, evidence: BenchmarkSweep, arch: str) -> dict[str, Any]:
    """``{"sweep", "sides": {"before", "after"}, "best"}`` as plain data: each side's ``score_table``
    (``geomean``, ``worst`` ...), and the best row of ``after``'s engine on the sweep (``geomean``, ``row``:
    the rows to paste, ``gain_over_after`` ...), ``best`` ``None`` with ``best_error`` where none is found."""
    sides = {name: score_table(table, evidence, arch) for name, table in (("before", before), ("after", after))}
    out: dict[str, Any] = {
        "sweep": {
            "source": evidence.source,
            "benchmark": evidence.benchmark,
            "format": evidence.format,
            "world_size": evidence.world_size,
            "mode": evidence.mode,
            "timing": evidence.timing,
            "noise": evidence.noise,
            "columns": {c.name: {"kernel": c.kernel, "forced": c.forced} for c in evidence.columns},
        },
        "sides": {name: score.as_dict() for name, score in sides.items()},
        "best": None,
    }
    if after.rules not in ENGINES:
        out["best_error"] = f"no knob search for {after.rules} rows"
        return out
    try:
        best = best_row(after.rules, evidence, arch, after)
    except EvidenceError as err:
        out["best_error"] = str(err)
        return out
    out["best"] = {
        **best.as_dict(),
        "gain_over_before": best.gain_over(sides["before"]),
        "gain_over_after": best.gain_over(sides["after"]),
    }
    return out
