"""The report: plots and text written from a synthetic tuning result."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from artune.machine import cpu_platform
from artune.report import RunInfo, write_report
from artune.report.document import Grid, Heading, Para, to_html, to_markdown
from artune.report.figures import band_spans, latency_series, speedup_summary, speedups
from artune.table.check import check_table
from artune.table.io import dumps_table
from artune.tune.config import TuneConfig
from artune.tune.measured import build_table
from artune.tune.measurer import CachedMeasurer
from artune.tune.synthetic import SyntheticMeasurer, linear_cost
from artune.tune.tuner import WorldResult, tune_world


@pytest.fixture(scope="module")
def result() -> WorldResult:
    costs = {"gloo": linear_cost(400, 1.2), "shm_one_shot": linear_cost(5, 1.0), "shm_two_shot": linear_cost(20, 3.0)}
    bench = SyntheticMeasurer(costs, noise=0.03, params={"shm_two_shot": {"chunk_bytes": (1 << 20, 4 << 20)}})
    return tune_world(CachedMeasurer(bench), TuneConfig.quick_run())


def test_figures(result: WorldResult) -> None:
    series = latency_series(result)
    assert next(iter(series)) == "gloo" and {"shm_one_shot", "shm_two_shot"} <= set(series)
    assert all(a.size < b.size for pts in series.values() for a, b in itertools.pairwise(pts))
    spans = band_spans(result)
    assert [name for *_, name in spans] == ["shm_one_shot", "shm_two_shot"]
    points = speedups(result)
    top, mean, at = speedup_summary(points)
    assert top >= mean > 1 and at is not None and at.choice.algorithm == "shm_one_shot"


def test_report_files_are_written(result: WorldResult, tmp_path: Path) -> None:
    table = build_table([result], cpu_platform())
    written = write_report(
        [result], table, tmp_path, check_table(table), RunInfo(str(tmp_path), 12.3, "", "artune tune")
    )
    names = {p.name for p in written}
    assert {"latency-ws2.png", "speedup-ws2.png", "report.md", "report.html"} <= names
    for png in ("latency-ws2.png", "speedup-ws2.png"):
        data = (tmp_path / png).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000
    md = (tmp_path / "report.md").read_text()
    assert "Regret on 8 off-grid sizes" in md and "fixed 1 MiB rule (DeepSpeed)" in md
    assert "geometric mean" in md and "Speedup over gloo" in md
    assert "shm_one_shot -> shm_two_shot" in md and "Picks at the coarse sizes" in md and "99% interval" in md
    assert "artune check: clean." in md and "Wall time: 12.3s" in md
    assert "What ships and why (ws=2)" in md and "Shipped the tuned table: no check of the run" in md
    assert "The derived table's bands and their evidence (ws=2)" in md and "faster at its own sizes" in md
    # the winner at the largest size keeps every larger one: said as such, never as a huge bound
    assert "inf) | shm_two_shot" in md and "TiB" not in md
    assert 'upto = "inf"' in dumps_table(table) and "TiB" not in dumps_table(table)
    page = (tmp_path / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and '<img src="latency-ws2.png"' in page and "Regret on 8" in page


def test_document_renders_the_same_content_twice() -> None:
    blocks = [Heading("T", 1), Para("a <b> & c"), Grid(("x", "y|z"), (("1", "2"),))]
    md, page = to_markdown(blocks), to_html(blocks, "t")
    assert md.startswith("# T") and "y\\|z" in md and "a <b> & c" in md
    assert "a &lt;b&gt; &amp; c" in page and "<th>y|z</th>" in page


def test_a_failed_choice_reads_failed_not_inf() -> None:
    from artune.report.summary import _r

    assert (_r(float("inf")), _r(float("nan")), _r(1.23456)) == ("failed", "-", "1.235")


def test_what_ships_is_said_and_a_table_its_checks_say_loses_is_flagged_loudly(
    result: WorldResult, tmp_path: Path
) -> None:
    """The held-out regret puts ``always two`` ahead of the tuned table: it ships, and the report says why. When
    the duel puts the tuned table ahead of it in turn, nothing is vouched for: a loud warning, twice."""
    from dataclasses import replace

    from artune.measure.records import Candidate
    from artune.report import loss_warning, shipping_line
    from artune.table.types import Band, Plan
    from artune.tune.duel import Overall
    from artune.tune.regret import RegretPoint, RegretScore
    from artune.tune.shipping import DUEL, HELD_OUT, choose

    one, two = Candidate("shm_one_shot"), Candidate("shm_two_shot")
    # at both sizes the tuned table chose the slower algorithm; always two-shot chose right
    points = tuple(
        RegretPoint(size, two, 10.0, ((one, 12.0), (one, 12.0), (two, 10.0)), 100.0) for size in (5000, 9000)
    )
    names = ("tuned table", "fixed 1 MiB rule (DeepSpeed)", "always two")
    regret = RegretScore(points, names)
    always_two = Plan(2, "eager", (Band(None, ("shm_two_shot",)),), "gloo")
    plans = {names[0]: result.plan, names[1]: result.plan, names[2]: always_two}

    def weighed(ahead: str, behind: set[str], ratio: float):  # type: ignore[no-untyped-def]
        return lambda a, b: Overall(a, ratio, ratio - 0.03, ratio + 0.03, 2, b) if a == ahead and b in behind else None

    # always two ahead of the tuned table (and of DeepSpeed's rule, which chose alike here) at the held-out sizes
    held_out = weighed(names[2], set(names[:2]), 0.833)
    ships = choose(names[0], plans, regret, {HELD_OUT: held_out, DUEL: lambda a, b: None})
    shipped = replace(result, regret=regret, plan=ships.plan, shipping=ships)
    assert ships.vouched and loss_warning(shipped) == ""
    assert shipping_line(shipped).startswith("Shipped always two instead of the tuned table: the held-out regret")
    assert "0.833x [0.803, 0.863] over 2 differing sizes" in shipping_line(shipped)
    assert "regret 1.000 against 1.200 geomean" in shipping_line(shipped)
    level = choose(names[0], plans, regret, {HELD_OUT: weighed(names[2], set(names[:2]), 0.995), DUEL: held_out})
    assert level.shipped == "always two" and [a.check for a in level.beaten] == [DUEL]  # 0.5%: level
    contested = choose(names[0], plans, regret, {HELD_OUT: held_out, DUEL: weighed(names[0], {names[2]}, 0.9)})
    losing = replace(result, regret=regret, plan=contested.plan, shipping=contested)
    assert not contested.vouched and contested.shipped == "always two"
    warning = loss_warning(losing)
    assert warning.startswith("WARNING: ws=2: Shipped always two") and "LOSES on its own checks" in warning
    assert "the duel put tuned table ahead of always two (0.900x [0.870, 0.930]" in warning
    table = build_table([losing], cpu_platform())
    write_report([losing], table, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert md.count("> **WARNING: ws=2") == 2  # at the top and in the world size's section
    assert "| always two (ships) | 1.000 | 1.000 |" in md and "What ships and why (ws=2)" in md
    assert '<p class="alert"><strong>WARNING' in (tmp_path / "report.html").read_text()
