"""The report's text: what an engine PR would say about the measured table.

Per world size: the bands, the speedup over the process-group baseline (max
and geometric mean), every crossover with its confidence (the upper
algorithm's lead over the lower one at the top of the final bracket, against
the noise there), the parameters found, and the regret of the tuned table and
of the fixed published rule on sizes the tuner never measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from artune.report.document import Block, Bullets, Grid, Heading, Image, Para
from artune.report.figures import speedup_summary, speedups
from artune.sizes import format_size, format_span, human_size
from artune.table.check import Finding
from artune.table.model import Table
from artune.tune.tuner import WorldResult


@dataclass(frozen=True)
class RunInfo:
    """Facts about the run that the results do not hold."""

    out_dir: str = ""
    wall_s: float = math.nan
    installed: str = ""  # where the table was installed ("" = not installed)
    command: str = ""
    busy: str = ""  # a warning that other processes competed with the ranks ("" = the machine was idle)


def _x(value: float) -> str:
    return "-" if math.isnan(value) else ("inf" if math.isinf(value) else f"{value:.2f}x")


def _r(value: float) -> str:
    # an infinite regret is a choice whose run failed: say that, not "inf"
    return "-" if math.isnan(value) else ("failed" if math.isinf(value) else f"{value:.3f}")


def _us(value: float) -> str:
    return "-" if math.isnan(value) else ("failed" if math.isinf(value) else f"{value:.1f}")


def regret_line(result: WorldResult) -> str:
    """The one-line regret verdict of one world size."""
    g = result.regret
    worst_t, worst_f = g.worst_point(True), g.worst_point(False)
    at_t = f" at {human_size(worst_t.size)}" if worst_t else ""
    at_f = f" at {human_size(worst_f.size)}" if worst_f else ""
    return (
        f"Regret on {len(g.points)} off-grid sizes the tuner never measured: tuned table "
        f"{_r(g.tuned_geomean)} geomean, {_r(g.tuned_worst)} worst{at_t}; {g.fixed_rule} "
        f"{_r(g.fixed_geomean)} geomean, {_r(g.fixed_worst)} worst{at_f}."
    )


def world_blocks(result: WorldResult) -> list[Block]:
    """The section of one world size."""
    ws = result.world_size
    mode = "" if result.mode == "eager" else f", {result.mode} mode"
    blocks: list[Block] = [Heading(f"World size {ws}{mode}", 2)]
    plan = result.plan
    rows = []
    for lower, upto, candidates in plan.spans():
        name = candidates[0]
        if upto is None and not plan.open_ended:
            rows.append((format_span(lower, None), f"{name} (fallback)", "-"))
            continue
        params = ", ".join(f"{k}={v}" for k, v in plan.params_for(name).items()) or "defaults"
        rows.append((format_span(lower, upto), name, params))
    blocks.append(Grid(("sizes", "algorithm", "parameters"), tuple(rows)))

    points = speedups(result)
    top, mean, at = speedup_summary(points)
    if at is not None:
        blocks.append(
            Para(
                f"Speedup over {result.baseline} (the process group) at {len(points)} measured sizes: "
                f"max {_x(top)} ({at.choice.key} at {human_size(at.size)}), geometric mean {_x(mean)}."
            )
        )
    blocks.append(Para(regret_line(result)))

    blocks.append(Heading("Crossovers", 3))
    if result.crossovers:
        crows = []
        for c in result.crossovers:
            crows.append(
                (
                    f"{c.below.key} -> {c.above.key}",
                    format_size(c.at),
                    f"({human_size(c.lo)}, {human_size(c.hi)}] from ({human_size(c.coarse[0])}, "
                    f"{human_size(c.coarse[1])}]",
                    f"{c.margin:+.1%}" if math.isfinite(c.margin) else "-",
                    f"{c.noise:.1%}",
                    f"{c.confidence:.1f}" if math.isfinite(c.confidence) else "-",
                    str(len(c.steps)),
                )
            )
        blocks.append(
            Grid(
                ("hand-over", "bound", "final bracket", "upper's lead", "noise", "confidence", "steps"),
                tuple(crows),
            )
        )
        blocks.append(
            Para(
                "The upper algorithm's lead is measured at the top of the final bracket; confidence = lead / "
                "noise (above 1: not noise). Within noise the lower band keeps the size, so bounds never "
                "flip on noise."
            )
        )
    else:
        blocks.append(Para("None: one algorithm wins every measured size."))

    if result.searches:
        blocks.append(Heading("Parameters", 3))
        prow = []
        for s in result.searches:
            trials = ", ".join(f"{t.value}: {_x(t.gain)}" for t in s.trials)
            prow.append(
                (
                    f"{s.algorithm}.{s.param}",
                    ", ".join(human_size(z) for z in s.sizes),
                    trials,
                    "kept current" if s.chosen is None else str(s.chosen),
                )
            )
        blocks.append(Grid(("parameter", "sizes", "gain over current", "chosen"), tuple(prow)))

    blocks.append(Heading("Regret per off-grid size", 3))
    rrows = tuple(
        (
            f"{human_size(p.size)} ({p.size})",
            f"{p.best.key} {_us(p.best_us)}",
            f"{p.tuned.key} {_r(p.tuned_regret)}",
            f"{p.fixed.key} {_r(p.fixed_regret)}",
            _x(p.baseline_us / p.tuned_us) if math.isfinite(p.tuned_us) else "-",
        )
        for p in result.regret.points
    )
    blocks.append(
        Grid(
            (
                "size",
                "best (us)",
                "tuned choice, regret",
                f"{result.regret.fixed_rule}, regret",
                f"tuned speedup over {result.baseline}",
            ),
            rrows,
        )
    )
    if result.banned:
        blocks.append(Para("Never chosen (wrong numbers): " + "; ".join(f"{k}: {w}" for k, w in result.banned)))
    blocks.append(
        Para(
            f"{result.measured} measurements taken, {result.reused} reused from the log, {result.calls} harness "
            f"calls, {result.spent_s:.1f}s of the measuring budget spent, {result.wall_s:.1f}s wall time in the ranks; "
            f"median spread (p20-p80 / median) {result.noise_median:.1%}."
        )
    )
    blocks.append(Image(f"latency-{result.tag}.png", f"latency vs size, world size {ws}{mode}"))
    blocks.append(Image(f"speedup-{result.tag}.png", f"speedup over {result.baseline}, world size {ws}{mode}"))
    return blocks


def report_blocks(
    results: Sequence[WorldResult], table: Table, findings: Sequence[Finding], info: RunInfo
) -> list[Block]:
    """The whole report."""
    prov = table.provenance
    blocks: list[Block] = [Heading("artune tune report", 1)]
    facts = [
        f"Machine: {table.platform}",
        f"Measured {prov.date} with {prov.tool}",
        f"World sizes: {', '.join(str(r.world_size) for r in results)}; dtype "
        f"{results[0].dtype if results else '-'}, sum",
        f"Algorithms: {', '.join(results[0].algorithms) if results else '-'}",
    ]
    if results:
        facts.append(results[0].config.describe())
    if not math.isnan(info.wall_s):
        facts.append(f"Wall time: {info.wall_s:.1f}s")
    if info.command:
        facts.append(f"Command: {info.command}")
    facts.append(f"Table: table.toml ({'installed at ' + info.installed if info.installed else 'not installed'})")
    blocks.append(Bullets(tuple(facts)))
    if info.busy:
        blocks.append(Para(f"Warning: {info.busy}"))
    if findings:
        blocks.append(Para("artune check findings: " + "; ".join(f.message for f in findings)))
    else:
        blocks.append(Para("artune check: clean."))
    blocks.append(
        Para(
            "Rules: only candidates whose results matched the reference are chosen; a difference counts only "
            "when it exceeds the noise (the larger p20-p80 spread of the two, relative to the median, "
            "clamped to the floor and cap above); within noise the incumbent band, then the simpler "
            "algorithm, is kept."
        )
    )
    for result in results:
        blocks.extend(world_blocks(result))
    return blocks
