"""The tuning report: plots (PNG), ``report.md`` and ``report.html`` from tuning results.

``write_report(results, table, out_dir)`` writes, per world size,
``latency-ws<N>.png`` and ``speedup-ws<N>.png``, and one ``report.md`` and
``report.html`` with the same content (bands, speedup over the process group,
regret against the fixed rules, the picks and crossovers with how sure each
is, parameters).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from artune.report.document import to_html, to_markdown
from artune.report.plots import write_plots
from artune.report.shipping import loss_warning, shipping_line
from artune.report.summary import RunInfo, regret_line, report_blocks
from artune.table.check import Finding
from artune.table.types import Table
from artune.tune.tuner import WorldResult

__all__ = ["RunInfo", "loss_warning", "regret_line", "shipping_line", "write_report"]


def write_report(
    results: Sequence[WorldResult],
    table: Table,
    out_dir: str | Path,
    findings: Sequence[Finding] = (),
    info: RunInfo | None = None,
) -> list[Path]:
    """Write the plots, ``report.md`` and ``report.html`` into ``out_dir``; returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for result in results:
        written.extend(write_plots(result, out))
    blocks = report_blocks(results, table, findings, info or RunInfo(out_dir=str(out)))
    md, page = out / "report.md", out / "report.html"
    md.write_text(to_markdown(blocks), encoding="utf-8")
    page.write_text(to_html(blocks, "artune tune report"), encoding="utf-8")
    return [*written, md, page]
