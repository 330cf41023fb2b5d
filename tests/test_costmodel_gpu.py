"""The GPU cost model: forms, the joint fit on sweeps and crossovers, term selection, and the sceptic's scores."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from artune.costmodel import calibrate as cal
from artune.costmodel import gpu, validate
from artune.costmodel.published import SWEEPS, Sweep, sweep
from artune.errors import ArtuneError

KiB, MiB = 1 << 10, 1 << 20
BW = {"9": 450.0, "10": 900.0}


def truth(**changes: float) -> dict[str, np.ndarray]:
    """Known parameters: the priors' centres with a few moved, as (1,) arrays."""
    values = {name: cal.prior(name)[0] for name in cal.parameter_names()}
    values.update({"round@9": 1.5, "round@10": 3.0, "link@9": 0.65, "link@10": 0.8, "mc_rounds": 2.5})
    values.update(changes)
    return {k: np.array([v]) for k, v in values.items()}


def synthetic(theta, sweeps=SWEEPS, crossovers=(), offset=5.0) -> cal.Data:
    """The sweeps' sizes and kernels with times from ``theta`` (plus a per-sweep offset), and crossovers too."""
    made = []
    for s in sweeps:
        machine = cal.machine_for(s.preset)
        cols = [gpu.kernel_times(theta, k, machine, s.world_size, s.sizes, s.mode, BW)[0] + offset for k in s.kernels]
        made.append(replace(s, times=tuple(tuple(float(c[i]) for c in cols) for i in range(len(s.sizes)))))
    exact = []
    for c in crossovers:
        n = float(cal.predicted_crossover(theta, c, cal.machine_for(c.preset), BW)[0])
        exact.append(replace(c, nbytes=int(n), lower_bound=False))
    return cal.Data(tuple(made), tuple(exact))


def test_the_sweeps_are_the_published_figures_in_microseconds() -> None:
    ds2a = sweep("DS2a")
    assert ds2a.world_size == 8 and ds2a.mode == "graph" and len(ds2a.sizes) == 12
    assert ds2a.sizes[0] == 512 * KiB and ds2a.times[0] == pytest.approx((24.0, 11.0, 15.0))
    assert sweep("DS11h100").times[-1][0] == pytest.approx(2 * 7 / 8 * (1 << 33) / 478.87e3)  # from busbw
    assert math.isnan(sweep("DS3a").times[-1][-1])  # cut off in the source: not invented
    assert not any(s.preset == "rubin" for s in SWEEPS)  # nothing measured on Rubin is fitted
    with pytest.raises(ValueError, match="is none of the model's"):
        Sweep("x", "", "h200", 2, "graph", ("ring",), (1,), ((1.0,),))
    with pytest.raises(KeyError, match="unknown sweep"):
        sweep("DS99")


def test_forms_follow_the_documented_structure() -> None:
    th = truth()
    m = gpu.Machine("9.0", 450.0)
    b = 0.65 * 450e3  # bytes per us a custom one-shot reaches
    ((a1, s1),) = gpu.kernel_lines(th, "one_shot/custom", m, 4, "graph", BW)
    ((a2, s2),) = gpu.kernel_lines(th, "two_shot/custom", m, 4, "graph", BW)
    ((am, _sm),) = gpu.kernel_lines(th, "multicast/custom", m, 4, "graph", BW)
    assert a1[0] == pytest.approx(1.5) and s1[0] == pytest.approx(3 / b)  # one round, (p-1) n
    assert a2[0] == pytest.approx(3.0) and s2[0] == pytest.approx(1.5 / b)  # two rounds, 2 (p-1)/p n
    assert am[0] == pytest.approx(2.5 * 1.5)  # mc_rounds rounds
    ((ae, _),) = gpu.kernel_lines(truth(eager_round=2.0), "one_shot/custom", m, 4, "eager", BW)
    assert ae[0] == pytest.approx(3.0)
    # NCCL: ring LL/LL128/Simple plus two NVLS lines; forced ring has no NVLS; nvls only NVLS
    assert len(gpu.kernel_lines(th, "library/nccl", m, 8, "graph", BW)) == 5
    assert len(gpu.kernel_lines(th, "library/nccl_ring", m, 8, "graph", BW)) == 3
    assert len(gpu.kernel_lines(th, "library/nccl_nvls", m, 8, "graph", BW)) == 2
    assert len(gpu.kernel_lines(th, "library/nccl", replace(m, multicast=False), 8, "graph", BW)) == 3


def test_nccl_ring_steps_cost_rounds_of_the_family() -> None:
    """A ring step is a flag exchange over NVLink: on Blackwell (round 3 us) it costs twice Hopper's (1.5 us)."""
    th = truth(**{"nccl:ll_hop": 0.4})

    def ll_step(machine: gpu.Machine, mode: str = "graph") -> float:
        ll_at = [gpu.kernel_lines(th, "library/nccl_ring", machine, p, mode, BW)[0][0][0] for p in (2, 3)]
        return (ll_at[1] - ll_at[0]) / 2  # two more steps from 2 ranks to 3

    hopper, blackwell = gpu.Machine("9.0", 450.0), gpu.Machine("10.0", 900.0)
    assert ll_step(hopper) == pytest.approx(0.4 * 1.5)
    assert ll_step(blackwell) == pytest.approx(0.4 * 3.0)
    assert ll_step(hopper, "eager") == pytest.approx(0.4 * 1.5)  # NCCL's eager cost is its own, per call
    assert ll_step(replace(hopper, round_us=5.0)) == pytest.approx(0.4 * 5.0)  # a measured round counts too


def test_torch_kernels_are_capped_by_their_fixed_grid_not_the_link() -> None:
    th = truth(**{"two_shot/torch:bytes": 1.0, "two_shot/torch:GBps": 200.0})
    slow = gpu.Machine("9.0", 100.0)  # the link is the limit
    fast = gpu.Machine("10.0", 5000.0)  # the blocks are
    ((_, s_slow),) = gpu.kernel_lines(th, "two_shot/torch", slow, 2, "graph", BW)
    ((_, s_fast),) = gpu.kernel_lines(th, "two_shot/torch", fast, 2, "graph", BW)
    assert s_slow[0] == pytest.approx(1 / (0.65 * 100e3))
    assert s_fast[0] == pytest.approx(1 / 200e3)


def test_first_crossing_is_where_the_lead_loses_for_good() -> None:
    lead = (np.array([1.0]), np.array([2.0]))
    assert gpu.first_crossing(lead, [(np.array([3.0]), np.array([1.0]))], 0.1, 100.0)[0] == pytest.approx(2.0)
    assert gpu.first_crossing(lead, [(np.array([0.5]), np.array([1.0]))], 0.1, 100.0)[0] == 0.1  # never leads
    assert gpu.first_crossing(lead, [(np.array([3.0]), np.array([5.0]))], 0.1, 100.0)[0] == 100.0  # never loses
    # a steeper rival, faster at small sizes, does not end the lead's band: the lead wins from 0.5 on
    assert gpu.first_crossing(lead, [(np.array([0.5]), np.array([3.0]))], 0.1, 100.0)[0] == 100.0
    # and the answer moves continuously: a tiny change of the rival moves it a little
    near = [gpu.first_crossing(lead, [(np.array([3.0 + d]), np.array([1.0]))], 0.1, 100.0)[0] for d in (0, 1e-6)]
    assert near[1] - near[0] == pytest.approx(1e-6)


def test_unseen_archs_extrapolate_the_round_latency_by_the_stated_rule() -> None:
    th = {**truth(), "unseen:share": np.array([0.5])}
    assert gpu.family_of("10.3") == ("10", True) and gpu.family_of("10.7") == ("10", False)
    rubin = gpu.Machine("10.7", 1800.0)
    near = gpu.round_for(th, replace(rubin, unseen_rule="nearest"), BW)[0]
    trend = gpu.round_for(th, replace(rubin, unseen_rule="bandwidth"), BW)[0]
    middle = gpu.round_for(th, rubin, BW)[0]
    assert near == pytest.approx(3.0)
    assert trend == pytest.approx(3.0 * 2.0)  # round doubled from 450 to 900 GB/s; doubles again to 1800
    assert middle == pytest.approx(math.sqrt(near * trend))
    assert gpu.round_for(th, gpu.Machine("10.0", 900.0), BW)[0] == 3.0  # a fitted family is its own
    with pytest.raises(ArtuneError, match="compute capability"):
        gpu.family_of("hopper")


def test_the_fit_recovers_known_parameters_from_sweeps_and_crossovers() -> None:
    th = truth()
    crossovers = [c for c in cal.training_crossovers() if c.world_size in (3, 4, 8)]
    data = synthetic(th, crossovers=crossovers)
    result = cal.fit(data)
    for name in ("round@9", "round@10", "link@9", "link@10", "mc_rounds", "nccl:ll", "nccl:ring_bytes"):
        assert result.value(name) == pytest.approx(float(th[name][0]), rel=0.05), name
    assert all(v == pytest.approx(5.0, rel=0.05) for v in result.offsets.values())
    r = cal.residuals_of(result, data)
    assert max(np.abs(v).max() for v in r.values()) < 0.05


def test_a_per_world_size_term_is_chosen_where_the_data_has_one() -> None:
    th = truth(**{"eager_round@ws3": 2.0})
    crossovers = [c for c in cal.training_crossovers() if c.world_size in (2, 3, 4, 8)]
    sweeps = tuple(sweep(i) for i in ("DS2a", "DS2c", "DS3a", "DS9a"))
    log: list[str] = []
    assert cal.select_terms(synthetic(th, sweeps, crossovers), max_terms=1, log=log) == ("eager_round@ws3",)
    assert "eager_round@ws3" in log[0]
    without = synthetic(truth(), sweeps, crossovers)
    assert cal.select_terms(without, max_terms=1) == ()  # no term where the forms need none


def test_the_training_data_never_holds_rubin_or_trt() -> None:
    train = cal.training_crossovers()
    assert {c.arch for c in train} == {"9.0", "10.0"} and {c.source for c in train} == {"SGLang"}
    held = cal.held_out_crossovers()
    assert {c.arch for c in held if c.source == "SGLang"} == {"10.7"} and any(c.source == "TRT-LLM" for c in held)
    rubin8 = next(c for c in held if c.arch == "10.7" and c.world_size == 8 and c.mode == "graph")
    assert rubin8.nbytes == 2556428 and rubin8.rival == "2shot_pull_mc"  # int(2.438 * MB), as SGLang computes it
    assert not set(cal.default_data().crossovers) & set(held)


def test_every_boundary_of_sglangs_tables_is_data_as_written() -> None:
    every = cal.training_crossovers()
    # SM90 world size 8 graph: one-shot to 128 KB, two-shot, multicast from 512 KB, NCCL above 128 MB (untuned)
    h8 = [c for c in every if c.arch == "9.0" and c.world_size == 8 and c.mode == "graph"]
    assert [(c.lead, c.rival) for c in h8] == [
        ("1shot_push", "2shot_pull"),
        ("2shot_pull", "2shot_pull_mc"),
        ("2shot_pull_mc", "nccl"),
    ]
    assert h8[1].start == h8[0].nbytes + 1 and h8[2].lower_bound and not h8[1].lower_bound
    assert all(c.lead != "nccl" for c in every)
    assert [c for c in every if c.one_shot] == cal.sglang_crossovers(("9.0", "10.0"))  # the headline view


def test_resampling_keeps_families_and_names_repeats_apart() -> None:
    data = cal.default_data()
    again = cal.resample(data, np.random.default_rng(1))
    ids = [s.id for s in again.sweeps]
    assert len(ids) == len(set(ids)) == len(data.sweeps)
    fam = lambda d: sorted(cal.machine_for(s.preset).family for s in d.sweeps)  # noqa: E731
    assert fam(again) == fam(data)
    assert sorted(c.group for c in again.crossovers) == sorted(c.group for c in data.crossovers)


def test_vllm_custom_ar_runs_one_stage_or_two_by_vllms_rule() -> None:
    assert validate.engine_kernel("custom_ar", 2, 64 * MiB) == "one_shot/custom"
    assert validate.engine_kernel("custom_ar", 4, 512 * KiB - 1) == "one_shot/custom"
    assert validate.engine_kernel("custom_ar", 4, 512 * KiB) == "two_shot/custom"
    assert validate.engine_kernel("custom_ar", 8, 256 * KiB) == "two_shot/custom"


def test_hand_tables_decide_through_the_reference_tables() -> None:
    from artune.formats.references import reference_set
    from artune.table.decide import decide

    measured = ["library/nccl", "multicast/torch", "two_shot/torch"]
    # vLLM 10.3 world size 2: no custom_ar column, so torch two-shot below its limit, NCCL above
    assert validate.hand_choice("vllm", "10.3", 2, "graph", 1 * MiB, measured) == "two_shot/torch"
    assert validate.hand_choice("vllm", "10.3", 2, "graph", 64 * MiB, measured) == "library/nccl"
    decided = decide(reference_set("vllm").resolve("10.3"), 1 * MiB, 2, "graph", frozenset({"symm_mem_two_shot"}))
    assert decided.algorithm == "symm_mem_two_shot"  # the same decision, through the public API
    # SGLang 9.0 world size 8 graph: its one-shot band, with torch's one-shot standing in for SGLang's
    assert validate.hand_choice("sglang", "9.0", 8, "graph", 64 * KiB, ["library/nccl", "one_shot/torch"]) == (
        "one_shot/torch"
    )
    assert validate.stand_in("one_shot/custom", ["library/nccl"]) is None


def test_a_perfect_predictor_scores_no_regret_and_the_scores_are_ratios() -> None:
    s = sweep("DS2c")

    def measured(kernel, sizes):
        return np.array([s.times[s.sizes.index(n)][s.kernels.index(kernel)] for n in sizes])

    score = validate.score_sweep(s, measured)
    assert score.geomean("model") <= 1.01 and score.worst("model") <= 1 + 0.05  # only the 5% stickiness
    assert all(r.regrets[w] >= 1.0 for r in score.rows for w in r.regrets)
    # on the same points, vLLM's hand table picks torch two-shot where NCCL is faster (vLLM PR #42324's
    # Blackwell world size 2 sweep, DS2c)
    assert score.geomean("vllm") > 1.05
    geo, worst = validate.total([score, score], "vllm")
    assert geo == pytest.approx(score.geomean("vllm")) and worst == score.worst("vllm")


def test_leave_one_out_never_sees_the_held_out_times() -> None:
    sweeps = (sweep("DS2a"), sweep("DS3a"), sweep("DS11h200"))
    data = cal.Data(sweeps, ())
    doubled = replace(sweeps[1], times=tuple(tuple(2 * t for t in row) for row in sweeps[1].times))
    a = validate.leave_one_sweep_out(data)
    b = validate.leave_one_sweep_out(cal.Data((sweeps[0], doubled, sweeps[2]), ()))
    # DS3a's plan comes from a fit without DS3a: doubling its times changes its regrets' denominators only
    assert [r.choices["model"] for r in a[1].rows] == [r.choices["model"] for r in b[1].rows]


def test_intervals_cover_lower_bounds_and_points() -> None:
    c = cal.ClaimedCrossover("SGLang", "10.7", "rubin", 2, "graph", 128 * MiB, lower_bound=True, rival="nccl")
    met = validate.Interval(c, 2e9, 1e8, 4e9, 1e8, 4e9)
    missed = validate.Interval(c, 1e6, 1e5, 1e7, 1e5, 1e7)
    assert met.covers() and met.log_ratio == 0.0 and not missed.covers()
    point = validate.Interval(replace(c, lower_bound=False, nbytes=MiB), MiB, MiB / 2, 2 * MiB, MiB, MiB)
    assert point.covers() and not replace(point, lo=1.5 * MiB).covers()
    s = validate.interval_summary([met, point])
    assert s["coverage"] == 1.0 and s["factor"] == pytest.approx(1.0)


def test_the_fit_file_round_trips_and_refuses_garbage() -> None:
    fit = gpu.bundled_fit()
    again = gpu.GpuFit.from_json(fit.to_json())
    assert again.names == fit.names and np.allclose(again.central, fit.central, rtol=1e-5)
    assert again.replicates.shape == fit.replicates.shape and len(fit.replicates) >= 30
    with pytest.raises(ArtuneError, match=r"calibrate_gpu\.py --write"):
        gpu.GpuFit.from_json("{}")


def test_the_bundled_fit_is_the_fitted_optimum_not_typed_numbers() -> None:
    """Moving any fitted parameter by 10% makes the loss on the stated data worse (the file is not stale)."""
    fit = gpu.bundled_fit()
    terms = tuple(n for n in fit.names if "@ws" in n)
    data = cal.default_data(fit.blind["claim_weight"])  # the claims at the weight the blind folds chose
    problem = cal.Problem(data, terms)
    central = cal.Result(
        tuple(problem.names),
        np.array([fit.value(n) for n in problem.names]),
        0.0,
        0,
        terms,
        dict(fit.offsets),
    )
    x = cal._start(problem, central)
    best = float(problem.loss(problem.residuals(x))[0])
    moved = []
    for i in range(len(problem.names)):
        for step in (math.log(0.9), math.log(1.1)):
            y = x.copy()
            y[i] += step
            moved.append(float(problem.loss(problem.residuals(y))[0]))
    assert min(moved) >= best - 1e-4


def test_the_published_sweeps_are_data_each_naming_its_source() -> None:
    from artune.costmodel.published import load_sweeps

    assert all(s.source and s.url.startswith("https://github.com/") for s in SWEEPS)
    one = '[[sweep]]\nid = "X"\nsource = "s"\npreset = "h200"\nworld_size = 2\nmode = "graph"\n'
    good = one + 'kernels = ["library/nccl"]\nsizes = [1024]\ntimes_us = [[nan]]\n'
    (x,) = load_sweeps(good)
    assert x.sizes == (1024,) and math.isnan(x.times[0][0])
    with pytest.raises(ValueError, match=r"sweep X: .*rows do not match"):
        load_sweeps(one + 'kernels = ["library/nccl"]\nsizes = [1024, 2048]\ntimes_us = [[1.0]]\n')
    with pytest.raises(ValueError, match=r"sweep X: .*none of the model's"):
        load_sweeps(one + 'kernels = ["nccl/auto"]\nsizes = [1024]\ntimes_us = [[1.0]]\n')
    with pytest.raises(ValueError, match="sweep X: KeyError\\('times_us'\\)"):
        load_sweeps(one + 'kernels = ["library/nccl"]\nsizes = [1024]\n')
