"""The verdict logic of ``bench/bench_allreduce.py`` (the bench itself is run by hand, not in tests)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("bench_allreduce", Path(__file__).parents[1] / "bench/bench_allreduce.py")
assert spec is not None and spec.loader is not None
bench = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = bench  # its dataclasses look their module up
spec.loader.exec_module(bench)


def _fig(gloo_over_one: float = 30.0, gloo_over_best: float = 3.0, busbw_copy: float = 0.5, best_ds: float = math.nan):
    return {"gloo/one_shot": gloo_over_one, "gloo/best": gloo_over_best, "busbw/copy": busbw_copy, "best/ds": best_ds}


def test_goals_pass_fail_and_skip() -> None:
    figures = {4096: _fig(), 64 << 20: _fig()}
    assert [v for v, _ in bench.goals(figures, 2)] == ["PASS"] * 3
    figures = {4096: _fig(gloo_over_one=19.9), 64 << 20: _fig(gloo_over_best=2.4, busbw_copy=math.nan)}
    assert [v for v, _ in bench.goals(figures, 2)] == ["FAIL"] * 3
    assert [v for v, _ in bench.goals({4096: _fig()}, 2)] == ["PASS", "SKIP", "SKIP"]
    assert bench.goals(figures, 4) == [("SKIP", "the speed goals are set for world size 2, not 4")]


@pytest.mark.parametrize(
    ("size", "ratio", "verdict"),
    [
        (4096, 1.5, "PASS"),
        (64 << 10, 1.51, "FAIL"),
        (1 << 20, 1.0, "PASS"),
        (64 << 20, 1.01, "FAIL"),
        (256 << 10, 9, None),
    ],
)
def test_deepspeed_goals_by_size(size: int, ratio: float, verdict: str | None) -> None:
    extra = bench.goals({size: _fig(best_ds=ratio)}, 2)[3:]
    assert [v for v, _ in extra] == ([verdict] if verdict else [])  # no goal between 64 KiB and 1 MiB


@pytest.mark.parametrize(
    ("size", "ratio", "verdict"), [(4096, 0.8, "PASS"), (16384, 0.81, "FAIL"), (64 << 10, 2, None)]
)
def test_open_mpi_goal_at_4_and_16_kib(size: int, ratio: float, verdict: str | None) -> None:
    extra = bench.goals({size: {**_fig(), "best/mpi": ratio}}, 2)[3:]
    assert [v for v, _ in extra] == ([verdict] if verdict else [])


def test_open_mpi_is_a_candidate_column() -> None:
    """Open MPI's figure is its interleaved measurement, set against artune's best shm candidate."""
    from artune.measure.records import Candidate, Measurement

    def m(name: str, samples: tuple[float, ...]) -> object:
        return Measurement(Candidate(name), 4096, "float32", 2, samples, 0)

    measurements = [m("gloo", (400.0,)), m("shm_one_shot", (2.0,)), m("shm_two_shot", (3.0,)), m("openmpi", (4.0,))]
    header, table, figures = bench.rows(bench.RunResult(measurements, {4096: 4.0}, ("gloo",), []))
    assert figures[4096]["best/mpi"] == 0.5
    assert header[-2:] == ["Open MPI us", "t(best shm)/t(MPI)"] and table[0][-2:] == ["4.0", "0.50x"]
