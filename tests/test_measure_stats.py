"""Sample summaries and the nccl-tests bandwidth arithmetic."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from artune.measure.records import Candidate, Measurement, bus_bandwidth
from artune.measure.stats import EMPTY, geomean, summarize


def test_known_samples() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0])
    assert s.count == 11
    assert s.median == 6.0
    assert s.p20 == pytest.approx(3.0)
    assert s.p80 == pytest.approx(9.0)
    assert s.p99 == pytest.approx(10.9)
    assert s.mean == 6.0
    assert s.std == pytest.approx(math.sqrt(10.0))
    assert s.cv_pct == pytest.approx(math.sqrt(10.0) / 6.0 * 100.0)
    assert (s.minimum, s.maximum) == (1.0, 11.0)


def test_even_count_median_interpolates() -> None:
    assert summarize([4.0, 1.0, 3.0, 2.0]).median == 2.5


def test_constant_and_single() -> None:
    s = summarize([7.0])
    assert (s.count, s.median, s.p20, s.p80, s.p99, s.cv_pct) == (1, 7.0, 7.0, 7.0, 7.0, 0.0)
    assert summarize([5.0] * 9).cv_pct == 0.0


def test_empty_is_nan_not_an_error() -> None:
    s = summarize([])
    assert s is EMPTY and s.count == 0
    assert math.isnan(s.median) and math.isnan(s.cv_pct)


def test_non_finite_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        summarize([1.0, float("inf")])


@given(st.lists(st.floats(min_value=0.001, max_value=1e7), min_size=1, max_size=200))
def test_quantiles_are_ordered(samples: list[float]) -> None:
    s = summarize(samples)
    assert s.minimum <= s.p20 <= s.median <= s.p80 <= s.p99 <= s.maximum
    assert s.median == pytest.approx(float(np.median(samples)))


def test_geomean_averages_ratios() -> None:
    assert geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert geomean(iter([1.0, 4.0, 16.0])) == pytest.approx(4.0)
    assert geomean([3.0]) == pytest.approx(3.0)
    assert math.isnan(geomean([]))
    assert math.isinf(geomean([1.0, math.inf]))


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_geomean_refuses_a_value_without_a_logarithm(bad: float) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        geomean([1.0, bad])


@given(st.lists(st.floats(min_value=1e-6, max_value=1e6), min_size=1, max_size=50))
def test_geomean_lies_between_the_extremes_and_inverts(values: list[float]) -> None:
    g = geomean(values)
    assert min(values) * (1 - 1e-12) <= g <= max(values) * (1 + 1e-12)
    assert geomean([1 / v for v in values]) == pytest.approx(1 / g, rel=1e-9)


def _geomeans_by_hand(source: str) -> list[int]:
    """The lines of ``source`` that take a geometric mean other than by ``geomean``: ``exp`` of a sum of
    logarithms over a count, or of a whole array's mean of logarithms (a mean along an axis, one per
    replicate, is another operation), or the standard library's ``geometric_mean`` called directly."""

    def name(node: ast.AST) -> str:
        return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")

    def has_log(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Call) and name(n.func) == "log" for n in ast.walk(node))

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and name(node.func) == "geometric_mean":  # the library's, beside geomean
            found.append(node.lineno)
        if not (isinstance(node, ast.Call) and name(node.func) == "exp" and len(node.args) == 1):
            continue
        arg = node.args[0]
        summed = (
            isinstance(arg, ast.BinOp)
            and isinstance(arg.op, ast.Div)
            and isinstance(arg.left, ast.Call)
            and name(arg.left.func) in {"sum", "fsum"}
            and has_log(arg.left)
        )
        averaged = isinstance(arg, ast.Call) and name(arg.func) == "mean" and not arg.args and not arg.keywords
        if summed or (averaged and has_log(arg)):
            found.append(node.lineno)
    return found


def test_one_geometric_mean_in_the_house() -> None:
    """Every geometric mean is ``geomean``: none written out again in the package or the benchmarks."""
    root = Path(__file__).resolve().parents[1]
    files = [*root.joinpath("src", "artune").rglob("*.py"), *root.joinpath("bench").rglob("*.py")]
    files = [f for f in files if f.parts[-2:] != ("measure", "stats.py")]  # geomean's own home
    found = [f"{f.relative_to(root)}:{n}" for f in files for n in _geomeans_by_hand(f.read_text(encoding="utf-8"))]
    assert not found, "geometric means written out by hand (use artune.measure.stats.geomean): " + "; ".join(found)


def test_the_geometric_mean_check_sees_one_written_out() -> None:
    by_hand = [
        "g = math.exp(sum(math.log(r) for r in rs) / len(rs))",
        "g = exp(math.fsum(-log(c.ratio) for c in found) / n)",
        "g = float(np.exp(np.log(regret[:, a:b]).mean()))",
        "g = statistics.geometric_mean(regrets)",
    ]
    assert [_geomeans_by_hand(s) for s in by_hand] == [[1], [1], [1], [1]]
    fine = "g = np.exp(np.log(t / best).mean(axis=1))\nx = math.exp(-half)\ny = math.exp(sum(xs) / n)"
    assert _geomeans_by_hand(fine) == []


def test_busbw_formula() -> None:
    assert bus_bandwidth(10.0, 1) == 0.0
    assert bus_bandwidth(10.0, 2) == pytest.approx(10.0)
    assert bus_bandwidth(10.0, 4) == pytest.approx(15.0)
    assert bus_bandwidth(10.0, 8) == pytest.approx(17.5)


def test_measurement_bandwidths() -> None:
    # 64 MiB in 20000 us: algbw = 67108864 / 0.02 s / 1e9 = 3.3554432 GB/s
    m = Measurement(Candidate("shm_two_shot"), 64 << 20, "float32", 2, (19000.0, 20000.0, 21000.0), 0)
    assert m.time_us == 20000.0
    assert m.algbw_GBps == pytest.approx(3.3554432)
    assert m.busbw_GBps == pytest.approx(3.3554432)  # 2(n-1)/n == 1 at n=2
    m4 = Measurement(Candidate("gloo"), 4096, "bfloat16", 4, (10.0,), 0)
    assert m4.count == 2048
    assert m4.algbw_GBps == pytest.approx(4096 / 10e-6 / 1e9)
    assert m4.busbw_GBps == pytest.approx(m4.algbw_GBps * 1.5)
