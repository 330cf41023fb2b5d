"""The report's pictures (matplotlib, Agg backend: no display needed).

- ``latency-ws<N>.png``: median latency against message size per candidate,
  log-log, p20-p80 as error bars, the chosen bands shaded in the colour of
  their algorithm and the crossovers as dashed lines;
- ``speedup-ws<N>.png``: how many times faster the table's choice is than the
  process-group baseline at each size where both were measured.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from artune.plotting import saved_figure
from artune.report.figures import band_spans, latency_series, speedups
from artune.sizes import human_size
from artune.tune.tuner import WorldResult


def _colours(result: WorldResult) -> dict[str, str]:
    palette = [f"C{i}" for i in range(10)]
    return {name: palette[i % len(palette)] for i, name in enumerate(result.algorithms)}


def _size_axis(ax) -> None:  # type: ignore[no-untyped-def]
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: human_size(round(x))))
    ax.set_xlabel("message size")
    ax.grid(True, which="major", alpha=0.3)


def latency_plot(result: WorldResult, path: Path) -> Path:
    """Write the latency-vs-size plot of ``result`` to ``path``."""
    colours = _colours(result)
    with saved_figure(path, figsize=(9, 5.5)) as (_fig, ax):
        for lower, upper, name in band_spans(result):
            ax.axvspan(max(lower, 1), max(upper, 1), color=colours.get(name, "grey"), alpha=0.08, lw=0)
        for cross in result.crossovers:
            ax.axvline(cross.at, color="grey", ls="--", lw=0.8)
        markers = itertools.cycle("sv^D<>pP*")
        for key, points in latency_series(result).items():
            name = key.split("[", 1)[0]
            xs = [p.size for p in points]
            ys = [p.time_us for p in points]
            err = [[p.time_us - p.p20_us for p in points], [p.p80_us - p.time_us for p in points]]
            default = key == name  # a tuned variant is measured at a few sizes only: markers, no line
            ax.errorbar(
                xs,
                ys,
                yerr=err,
                label=key,
                color=colours.get(name, "black"),
                ls="-" if default else "none",
                marker="o" if default else next(markers),
                ms=3 if default else 5,
                mfc=None if default else "none",
                lw=1,
                capsize=2,
            )
        _size_axis(ax)
        ax.set_yscale("log")
        ax.set_ylabel("median latency (us), slowest rank")
        ax.set_title(f"all_reduce {result.dtype} sum, world_size={result.world_size}: latency; shaded = chosen band")
        ax.legend(fontsize=8)
    return path


def speedup_plot(result: WorldResult, path: Path) -> Path:
    """Write the speedup-over-baseline plot of ``result`` to ``path``."""
    colours = _colours(result)
    points = speedups(result)
    with saved_figure(path, figsize=(9, 4.5)) as (_fig, ax):
        ax.axhline(1.0, color="black", lw=0.8)
        for name in dict.fromkeys(p.choice.algorithm for p in points):
            mine = [p for p in points if p.choice.algorithm == name]
            ax.plot(
                [p.size for p in mine],
                [p.ratio for p in mine],
                "o",
                color=colours.get(name, "black"),
                label=f"table's choice: {name}",
            )
        if points:
            ax.plot([p.size for p in points], [p.ratio for p in points], color="grey", lw=0.6, zorder=0)
        _size_axis(ax)
        ax.set_yscale("log")
        ax.set_ylabel(f"speedup over {result.baseline} (x)")
        ax.set_title(f"world_size={result.world_size}: the table's choice vs the process group ({result.baseline})")
        if points:
            ax.legend(fontsize=8)
    return path


def write_plots(result: WorldResult, out_dir: Path) -> list[Path]:
    """Both plots of one world size; returns their paths."""
    out_dir = Path(out_dir)
    return [
        latency_plot(result, out_dir / f"latency-{result.tag}.png"),
        speedup_plot(result, out_dir / f"speedup-{result.tag}.png"),
    ]
