"""The cost model's forms and fit on synthetic data with known parameters, the bootstrap, the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from artune.costmodel.bootstrap import interval
from artune.costmodel.cost import fit_points
from artune.costmodel.fit import Points, identified, relative_residuals, shape_findings, solve
from artune.costmodel.forms import FORMS, Context
from artune.errors import ArtuneError, ModelRefusal

MiB = 1 << 20
SIZES = [1 << k for k in range(8, 25)] + [3 << k for k in range(8, 23)]
CTX = Context(cores=2, cache_bytes=None, chunk_bytes=MiB)

TRUTH = {
    "shm_one_shot": ("one_shot", [6.0, 4.0, 50.0, 20.0, 60.0, 0.0]),
    "shm_two_shot": ("two_shot", [9.0, 3.0, 40.0, 30.0, 45.0, 0.0]),
    "gloo": ("ring", [200.0, 60.0, 300.0, 0.0, 700.0, 0.0]),
}


def synthetic(world_sizes=(2, 4), ctx=CTX, noise=0.03, seed=1, truth=TRUTH, outliers=True) -> dict[str, Points]:
    """Times from known parameters, with log-normal noise and a few 3x outliers (a descheduled rank)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, (form, theta) in truth.items():
        p = np.repeat(np.array(world_sizes, dtype=float), len(SIZES))
        n = np.tile(np.array(SIZES, dtype=float), len(world_sizes))
        t = FORMS[form].predict(np.array(theta), p, n, ctx) * np.exp(rng.normal(0, noise, len(n)))
        if outliers:
            t[rng.choice(len(t), 3, replace=False)] *= 3.0
        out[name] = Points(p, n, t)
    return out


def fit(points, cores=2, **kw):
    return fit_points(points, kind="cpu", arch="x86_64", device="test", cores=cores, chunk_bytes=MiB, inputs="t", **kw)


def test_forms_count_bytes_and_rounds_as_documented() -> None:
    p, n = np.array([4.0]), np.array([4.0 * MiB])
    one = dict(zip(FORMS["one_shot"].params, FORMS["one_shot"].matrix(p, n, CTX)[0], strict=True))
    two = dict(zip(FORMS["two_shot"].params, FORMS["two_shot"].matrix(p, n, CTX)[0], strict=True))
    ring = dict(zip(FORMS["ring"].params, FORMS["ring"].matrix(p, n, Context())[0], strict=True))
    share = 4 / 2  # four ranks on two cores
    assert one["round_us"] == 4 and two["round_us"] == 8  # one / two rounds per 1 MiB chunk
    assert one["oversub_round_us"] == 4 * 2  # two ranks beyond the cores
    assert one["peer_us_per_MB"] == pytest.approx(3 * 4 * MiB / 1e6 * share)  # (p-1) n
    assert two["peer_us_per_MB"] == pytest.approx(2 * 3 / 4 * 4 * MiB / 1e6 * share)  # 2 (p-1)/p n
    assert ring["round_us"] == 6 and ring["peer_us_per_MB"] == pytest.approx(1.5 * 4 * MiB / 1e6)


def test_fit_recovers_known_parameters_despite_noise_and_outliers() -> None:
    model = fit(synthetic())
    sizes = np.array(SIZES, dtype=float)
    for name, (form, theta) in TRUTH.items():
        got = model.algorithms[name]
        for (pname, value, _lo, _hi, ok), true in zip(got.parameters(), theta, strict=True):
            if true == 0.0:
                assert value < 0.1 * max(theta), (name, pname, value)
            elif pname not in ("overhead_us", "round_us"):  # those two trade off where rounds barely vary
                assert ok and value == pytest.approx(true, rel=0.15), (name, pname, value, true)
        assert np.median(np.abs(got.residuals)) < 0.05
        for ws in (2, 3, 4):  # and the time they predict, world size 3 never fitted
            truth = FORMS[form].predict(np.array(theta), np.full_like(sizes, ws), sizes, CTX)
            assert model.predict(name, ws, SIZES) == pytest.approx(truth, rel=0.10), (name, ws)


def test_bootstrap_intervals_cover_the_truth_and_shrink_with_less_noise() -> None:
    noisy = fit(synthetic(noise=0.10, outliers=False)).algorithms["shm_one_shot"]
    quiet = fit(synthetic(noise=0.01, outliers=False)).algorithms["shm_one_shot"]
    theta = TRUTH["shm_one_shot"][1]
    covered = sum(
        lo * 0.9 <= true <= hi * 1.1 for (_n, _v, lo, hi, _ok), true in zip(noisy.parameters(), theta, strict=True)
    )
    assert covered >= len(theta) - 1
    width = lambda m: np.subtract(*interval(m.replicates)[::-1])  # noqa: E731
    assert (width(quiet) <= width(noisy) + 1e-9).all() and width(quiet).sum() < 0.5 * width(noisy).sum()


def test_prediction_at_an_unfitted_world_size_matches_the_truth_with_an_interval() -> None:
    model = fit(synthetic(world_sizes=(2, 4), noise=0.02))
    sizes = [4096, 300_000, 5 * MiB]
    true = FORMS["two_shot"].predict(np.array(TRUTH["shm_two_shot"][1]), np.full(3, 3.0), np.array(sizes, float), CTX)
    pred = model.predict("shm_two_shot", 3, sizes)
    lo, hi = interval(model.samples("shm_two_shot", 3, sizes))
    assert pred == pytest.approx(true, rel=0.1)
    assert ((lo <= pred) & (pred <= hi)).all()


def test_a_cache_effect_is_found_where_the_data_has_one() -> None:
    ctx = Context(cores=2, cache_bytes=8 * MiB, chunk_bytes=MiB)
    truth = {"shm_one_shot": ("one_shot", [6.0, 4.0, 50.0, 20.0, 60.0, 200.0])}
    model = fit(synthetic(ctx=ctx, truth=truth, outliers=False))
    assert model.ctx.cache_bytes is not None and 4 * MiB <= model.ctx.cache_bytes <= 16 * MiB
    without = fit(synthetic(truth={"shm_one_shot": ("one_shot", [6.0, 4.0, 50.0, 20.0, 60.0, 0.0])}, outliers=False))
    assert without.ctx.cache_bytes is None  # no cache term where the data shows none


def test_a_shape_the_form_lacks_is_reported() -> None:
    # quadratic in size: no linear form has it
    n = np.array(SIZES, dtype=float)
    points = Points(np.full_like(n, 2.0), n, 5.0 + (n / MiB) ** 2 * 100)
    form = FORMS["one_shot"]
    theta = solve(form, points, CTX)
    findings = shape_findings(points, relative_residuals(form, theta, points, CTX))
    assert any("does not fit" in f or "residual shape" in f for f in findings)
    assert fit({"shm_one_shot": points}).algorithms["shm_one_shot"].findings  # and the model carries it


def test_columns_without_signal_are_not_identified() -> None:
    points = synthetic(world_sizes=(2,))["shm_one_shot"]
    free = dict(zip(FORMS["one_shot"].params, identified(FORMS["one_shot"], points, CTX), strict=True))
    assert not free["oversub_round_us"] and not free["spill_us_per_MB"] and free["peer_us_per_MB"]


def test_refusals_say_why() -> None:
    only_two = fit(synthetic(world_sizes=(2,)))
    assert "saw only world size 2" in only_two.refusal(3)
    assert only_two.refusal(2) is None
    with pytest.raises(ModelRefusal, match="only world size 2"):
        only_two.predict("shm_one_shot", 4, [4096])
    roomy = fit(synthetic(world_sizes=(2, 4), ctx=Context(cores=4, chunk_bytes=MiB)), cores=4)
    assert roomy.refusal(3) is None  # within the cores: the forms carry it
    assert "no fitted world size did" in roomy.refusal(6)
    crowded = fit(synthetic(world_sizes=(2, 4)))  # 2 cores: world size 4 is oversubscribed
    assert crowded.refusal(3) is None  # between measured points: described
    assert "beyond the largest fitted" in crowded.refusal(5)
    assert "at least 2 ranks" in crowded.refusal(1)


def test_nothing_to_fit_is_an_error() -> None:
    with pytest.raises(ArtuneError, match="no algorithm with a cost form"):
        fit({"deepspeed": Points(np.array([2.0] * 5), np.arange(1, 6) * 1e3, np.ones(5))})
