"""What ``artune model fit`` shows: parameters with intervals, residuals per algorithm, findings, a plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from artune.costmodel.cost import CostModel
from artune.costmodel.forms import PARAMETERS
from artune.plotting import saved_figure
from artune.sizes import human_size


def fit_markdown(model: CostModel) -> str:
    """The fit as Markdown: one parameter table and a residual summary per algorithm."""
    lines = [
        f"# Cost model fit ({model.version})",
        "",
        f"- machine: {model.kind} {model.arch} {model.device}; {model.ctx.describe()}",
        f"- inputs: {model.inputs}",
        f"- world sizes fitted: {', '.join(map(str, model.world_sizes))}; sizes "
        f"{human_size(model.size_range[0])}..{human_size(model.size_range[1])}",
        "- intervals: 5th-95th percentile of 200 bootstrap refits (resampled within each world size)",
        *[f"- {note}" for note in model.notes],
        "",
    ]
    for name, m in model.algorithms.items():
        r = m.residuals
        lines += [
            f"## {name} (form {m.form.name}: {m.form.summary})",
            "",
            "| parameter | value | 5%..95% | meaning |",
            "|---|---:|---:|---|",
        ]
        for pname, value, lo, hi, ok in m.parameters():
            shown = f"{value:.4g}" if ok else "not identified (no data)"
            lines.append(f"| {pname} | {shown} | {lo:.3g}..{hi:.3g} | {PARAMETERS[pname]} |")
        lines += [
            "",
            f"Residuals (model / measured - 1) over {len(r)} points: median {np.median(r):+.1%}, "
            f"median |r| {np.median(np.abs(r)):.1%}, worst {r[np.argmax(np.abs(r))]:+.0%}.",
            "",
            "| world size | points | median residual | worst |",
            "|---:|---:|---:|---:|",
        ]
        for p in np.unique(m.points.p):
            sel = r[m.points.p == p]
            lines.append(f"| {int(p)} | {len(sel)} | {np.median(sel):+.1%} | {sel[np.argmax(np.abs(sel))]:+.0%} |")
        lines.append("")
        lines += [f"- **finding:** {f}" for f in m.findings] or ["- no finding: no size range shows a bias beyond 15%"]
        lines.append("")
    return "\n".join(lines).rstrip()


def plot_fit(model: CostModel, path: Path) -> Path:
    """Model (lines) against measurement (markers), one panel per algorithm, log-log."""
    names = list(model.algorithms)
    with saved_figure(path, 1, len(names), figsize=(5 * len(names), 4.2), squeeze=False) as (_fig, axes):
        for ax, name in zip(axes[0], names, strict=True):
            m = model.algorithms[name]
            for i, p in enumerate(np.unique(m.points.p)):
                sel = m.points.p == p
                n, t = m.points.n[sel], m.points.t[sel]
                grid = np.geomspace(n.min(), n.max(), 60)
                ax.plot(n, t, "o", ms=4, color=f"C{i}", label=f"measured ws={int(p)}")
                ax.plot(grid, model.predict(name, int(p), grid), "-", color=f"C{i}", label=f"model ws={int(p)}")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{name} ({m.form.name})")
            ax.set_xlabel("bytes per rank")
            ax.set_ylabel("us per all-reduce")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
    return path
