"""Sample summaries and the nccl-tests bandwidth arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from artune.measure.records import Candidate, Measurement, bus_bandwidth
from artune.measure.stats import EMPTY, summarize


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
