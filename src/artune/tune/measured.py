"""The measured table: one plan per tuned (world size, mode), with provenance."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from artune._version import __version__
from artune.table.types import Platform, Provenance, Table
from artune.tune.tuner import WorldResult


def _mode(result: WorldResult) -> str:
    return "" if result.mode == "eager" else f" {result.mode}"


def provenance_notes(results: Sequence[WorldResult]) -> str:
    """Budget, rule and regret figures in one line (the table's ``provenance.notes``)."""
    if not results:
        return ""
    parts = [results[0].config.describe()]
    for r in results:
        g = r.regret
        best, best_value = g.best_fixed()
        parts.append(
            f"ws={r.world_size}{_mode(r)}: {r.measured} measurements ({r.reused} reused from the log), "
            f"median spread {r.noise_median:.1%}, regret on {len(g.points)} off-grid sizes "
            f"{g.tuned_geomean:.3f} geomean / {g.tuned_worst:.3f} worst "
            f"({r.fixed_rule} {g.fixed_geomean:.3f} / {g.fixed_worst:.3f}; best fixed rule {best} {best_value:.3f})"
        )
        if r.shaping is not None:
            parts += [f"near-tie: {t.describe()}" for t in r.shaping.near_ties]
            if r.shaping.merges:
                parts.append(f"{len(r.shaping.merges)} band(s) removed or cut back by the band rules (see the report)")
        if r.shipping is not None and (r.shipping.replaced or not r.shipping.vouched):
            parts.append(r.shipping.describe())
    return "; ".join(parts)


def build_table(results: Sequence[WorldResult], platform: Platform, date: str | None = None) -> Table:
    """The table of ``results`` for ``platform`` (``source = "measured"``, tool ``artune <version>``)."""
    when = date or datetime.date.today().isoformat()
    provenance = Provenance(
        source="measured",
        date=when,
        device=platform.device,
        tool=f"artune {__version__}",
        notes=provenance_notes(results),
    )
    plans = tuple(r.plan for r in sorted(results, key=lambda r: (r.world_size, r.mode)))
    return Table(platform, provenance, plans)
