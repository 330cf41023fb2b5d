"""The report's text: what an engine PR would say about the measured table.

Per world size: the bands that ship, the speedup over the process-group
baseline (max and geometric mean), the regret of the tuned table, of the
fixed published rule and of every fixed single-algorithm rule on sizes the
tuner never measured, the pick at every coarse size and every crossover with
how sure it is (the paired time ratio, its interval and the verdict of
``artune.tune.compare``), and the parameters found; then what ships and why,
with every band's evidence (``artune.report.shipping``), and a loud warning
where the run's own checks contradict each other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from artune.report.document import Alert, Block, Bullets, Grid, Heading, Image, Para
from artune.report.duel import duel_blocks, states_blocks
from artune.report.figures import speedup_summary, speedups
from artune.report.shipping import loss_warning, shipping_blocks
from artune.sizes import format_size, format_span, human_size
from artune.table.check import Finding
from artune.table.types import Table
from artune.tune.compare import Comparison
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


def _rounds(c: Comparison | None) -> str:
    if c is None:
        return "-"
    return str(c.rounds) if c.rounds else "unpaired"


def _interval(c: Comparison | None) -> str:
    if c is None:
        return "-"
    each = f"; per call {', '.join(f'{r:.3f} {v}' for r, v in c.calls)}" if c.calls else ""
    return c.interval() + each


def regret_line(result: WorldResult) -> str:
    """The one-line regret summary of one world size: the tuned table, the published rule, the best fixed rule."""
    g = result.regret
    worst_t, worst_f = g.worst_point(True), g.worst_point(False)
    at_t = f" at {human_size(worst_t.size)}" if worst_t else ""
    at_f = f" at {human_size(worst_f.size)}" if worst_f else ""
    best, best_value = g.best_fixed()
    best_text = f"; best fixed rule {best} {_r(best_value)} geomean" if best and best != g.fixed_rule else ""
    shipped = result.shipping.shipped if result.shipping is not None and result.shipping.replaced else ""
    ships = f" Shipped: {shipped} (see what ships and why)." if shipped else ""
    return (
        f"Regret on {len(g.points)} off-grid sizes the tuner never measured: tuned table "
        f"{_r(g.tuned_geomean)} geomean, {_r(g.tuned_worst)} worst{at_t}; {g.fixed_rule} "
        f"{_r(g.fixed_geomean)} geomean, {_r(g.fixed_worst)} worst{at_f}{best_text}.{ships}"
    )


def world_blocks(result: WorldResult) -> list[Block]:
    """The section of one world size: the plan, the speedup and regret, the picks, crossovers, parameters,
    the regret per off-grid size, and what the run cost."""
    mode = "" if result.mode == "eager" else f", {result.mode} mode"
    return [
        Heading(f"World size {result.world_size}{mode}", 2),
        *_plan_blocks(result),
        *_speedup_blocks(result),
        *_pick_blocks(result),
        *_crossover_blocks(result),
        *_parameter_blocks(result),
        *_regret_blocks(result),
        *_run_blocks(result, mode),
    ]


def _plan_blocks(result: WorldResult) -> list[Block]:
    """The plan that ships, band by band."""
    blocks: list[Block] = []
    plan = result.plan
    if result.shipping is not None and result.shipping.replaced:
        blocks.append(Para(f"Ships {result.shipping.shipped}, not the derived table: {result.shipping.describe()}"))
    rows = []
    for lower, upto, candidates in plan.spans():
        name = candidates[0]
        if upto is None and not plan.open_ended:
            rows.append((format_span(lower, None), f"{name} (fallback)", "-"))
            continue
        params = ", ".join(f"{k}={v}" for k, v in plan.params_for(name).items()) or "defaults"
        rows.append((format_span(lower, upto), name, params))
    blocks.append(Grid(("sizes", "algorithm", "parameters"), tuple(rows)))
    return blocks


def _speedup_blocks(result: WorldResult) -> list[Block]:
    """The speedup over the process group, the regret against the fixed rules, and a loud warning where one wins."""
    blocks: list[Block] = []
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
    warning = loss_warning(result)
    if warning:
        blocks.append(Alert(warning))
    g = result.regret
    blocks.append(
        Grid(
            ("rule", "regret geomean", "worst"),
            tuple((_shipped(result, name), _r(g.geomean(i)), _r(g.worst(i))) for i, name in enumerate(g.rules)),
        )
    )
    return blocks


def _shipped(result: WorldResult, name: str) -> str:
    return f"{name} (ships)" if result.shipping is not None and result.shipping.shipped == name else name


def _pick_blocks(result: WorldResult) -> list[Block]:
    """The winner at each coarse size, with the comparison that chose it."""
    blocks: list[Block] = []
    blocks.append(Heading("Picks at the coarse sizes", 3))
    blocks.append(
        Grid(
            ("size", "winner", "why", "against", "time ratio [interval]", "rounds", "verdict"),
            tuple(
                (
                    human_size(p.size),
                    p.winner.key,
                    p.why,
                    p.against.b.key if p.against is not None else "-",
                    _interval(p.against),
                    _rounds(p.against),
                    p.verdict,
                )
                for p in result.picks
            ),
        )
    )
    blocks.append(
        Para(
            "Time ratio: the winner's time over its rival's, the median over paired rounds, with its "
            f"{result.config.rule.level:.0%} interval, and each call's ratio and verdict where there were several "
            "(the verdict is then across calls: a lead in one call and no loss in another wins). A fastest winner "
            "is compared with the runner-up; a kept "
            "winner (incumbent or simpler) with the fastest, which it ties (the interval inside the "
            f"±{result.config.rule.tie:.0%} band) or may tie (unsure: the interval crosses an edge of the band "
            f"after the re-measurements the budget allowed). {result.remeasured} calls were taken again where a "
            "decision was close or unsure."
        )
    )
    return blocks


def _crossover_blocks(result: WorldResult) -> list[Block]:
    """Where one algorithm hands over to the next, as bisected."""
    blocks: list[Block] = []
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
                    _interval(c.lead),
                    _rounds(c.lead),
                    c.lead.verdict if c.lead is not None else "-",
                    ", ".join(f"{human_size(st.size)} {st.comparison.verdict}" for st in c.steps) or "-",
                )
            )
        blocks.append(
            Grid(
                ("hand-over", "bound", "final bracket", "upper/lower at top", "rounds", "verdict", "steps"),
                tuple(crows),
            )
        )
        blocks.append(
            Para(
                "The upper algorithm's time over the lower one's at the top of the final bracket, with its "
                "interval; each bisection step's verdict (the upper one takes a midpoint only when faster: the "
                "lower band keeps ties and what stays unsure)."
            )
        )
    else:
        blocks.append(Para("None: one algorithm wins every measured size."))
    return blocks


def _parameter_blocks(result: WorldResult) -> list[Block]:
    """The parameter searches (none: no section)."""
    blocks: list[Block] = []
    if result.searches:
        blocks.append(Heading("Parameters", 3))
        prow = []
        for s in result.searches:
            trials = ", ".join(
                f"{t.value}: {_x(t.gain)}" + (f" ({'/'.join(t.verdicts)})" if t.comparisons else "") for t in s.trials
            )
            prow.append(
                (
                    f"{s.algorithm}.{s.param}",
                    ", ".join(human_size(z) for z in s.sizes),
                    trials,
                    "kept current" if s.chosen is None else str(s.chosen),
                )
            )
        blocks.append(Grid(("parameter", "sizes", "gain over current", "chosen"), tuple(prow)))
    return blocks


def _regret_blocks(result: WorldResult) -> list[Block]:
    """Every rule's regret at each off-grid size."""
    blocks: list[Block] = []
    g = result.regret
    blocks.append(Heading("Regret per off-grid size", 3))
    rrows = tuple(
        (
            f"{human_size(p.size)} ({p.size})",
            f"{p.best.key} {_us(p.best_us)}",
            *(f"{cand.key} {_r(p.regret(i))}" for i, (cand, _t) in enumerate(p.choices)),
            _x(p.baseline_us / p.tuned_us) if math.isfinite(p.tuned_us) else "-",
        )
        for p in g.points
    )
    blocks.append(
        Grid(
            ("size", "best (us)", *(f"{name}, regret" for name in g.rules), f"tuned speedup over {result.baseline}"),
            rrows,
        )
    )
    return blocks


def _run_blocks(result: WorldResult, mode: str) -> list[Block]:
    """What was never chosen, what the run measured and spent, and the plots."""
    ws = result.world_size
    blocks: list[Block] = []
    if result.banned:
        blocks.append(Para("Never chosen (wrong numbers): " + "; ".join(f"{k}: {w}" for k, w in result.banned)))
    failures = _failures(result)
    if failures:
        blocks.append(Para("Measurements that failed (a failed choice loses to any that ran): " + failures))
    blocks.append(
        Para(
            f"{result.measured} measurements taken, {result.reused} reused from the log, {result.calls} harness "
            f"calls, {result.spent_s:.1f}s of the measuring budget spent, {result.wall_s:.1f}s wall time in the ranks; "
            f"median spread of single calls (p20-p80 / median) {result.noise_median:.1%}. Budget by phase: "
            + (", ".join(f"{name} {seconds:.1f}s" for name, seconds in result.phase_s) or "-")
            + "."
        )
    )
    blocks.append(Image(f"latency-{result.tag}.png", f"latency vs size, world size {ws}{mode}"))
    blocks.append(Image(f"speedup-{result.tag}.png", f"speedup over {result.baseline}, world size {ws}{mode}"))
    return blocks


def _failures(result: WorldResult) -> str:
    """Each candidate's failures, one entry per distinct message: how many sizes, and which."""
    sizes: dict[tuple[str, str, str], list[int]] = {}
    for m in result.measurements:
        if m.status != "ok":
            sizes.setdefault((m.candidate.key, m.status, m.error), []).append(m.size_bytes)
    return "; ".join(
        f"{key} {status} at {len(found)} size(s) ({', '.join(human_size(s) for s in sorted(set(found))[:4])}"
        f"{', ...' if len(set(found)) > 4 else ''}): {error[:200] or '(no message)'}"
        for (key, status, error), found in sizes.items()
    )


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
    for result in results:
        warning = loss_warning(result)
        if warning:
            blocks.append(Alert(warning))
    if results:
        rule = results[0].config.rule
        blocks.append(
            Para(
                "Rules: only candidates whose results matched the reference are chosen. One candidate is faster "
                "than another when the "
                f"{rule.level:.0%} interval of their time ratio (per round of interleaved turns, the median "
                f"over rounds) lies outside the ±{rule.tie:.0%} tie band; inside it the incumbent band, then "
                "the simpler algorithm, is kept; where the interval crosses an edge of the band the two are "
                "measured again while the budget lasts, and what stays unsure keeps the published rule's "
                "choice. Every band then needs evidence at its own sizes, a stretch that leaves the published "
                "rule needs it against the published choice, and slivers merge into their neighbours. The run's "
                "own checks (the duel and the held-out regret) decide whether the derived table or a fixed rule "
                "ships."
            )
        )
    for result in results:
        blocks.extend(world_blocks(result))
        blocks.extend(shipping_blocks(result))
        blocks.extend(duel_blocks(result))
        blocks.extend(states_blocks(result))
    return blocks
