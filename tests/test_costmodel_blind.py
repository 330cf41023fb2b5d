"""Hardware nobody measured: leave one arch out, copying as the baseline, calibrated intervals, the hybrid."""

from __future__ import annotations

import math

import numpy as np
import pytest

from artune.costmodel import blind, gpu, validate
from artune.costmodel import calibrate as cal
from artune.costmodel.hardware import HardwareModel
from artune.costmodel.plan import build_plan
from artune.costmodel.presets import load_preset
from artune.costmodel.published import SWEEPS

MiB = 1 << 20


def test_multicast_moves_its_share_plus_every_other_rank_share() -> None:
    """(1 + 1/p) n each way: as two-shot's 2 (p-1)/p n at 3 ranks, less from 4 up, more at 2."""
    assert gpu.multicast_traffic(2) == pytest.approx(1.5)
    assert gpu.multicast_traffic(8) == pytest.approx(1.125)
    assert gpu.multicast_traffic(3) == pytest.approx(4 / 3)
    for p in range(4, 17):
        assert gpu.multicast_traffic(p) < 2 * (p - 1) / p
    assert gpu.multicast_traffic(2) > 2 * (2 - 1) / 2


def test_the_multicast_form_uses_the_traffic() -> None:
    theta = {n: np.array([c]) for n, (c, _sd, _m) in gpu.PARAMS.items()}
    theta |= {"round@10": np.array([3.0]), "link@10": np.array([0.8])}
    machine = gpu.Machine("10.0", 900.0)
    ((_a, s2),) = gpu.kernel_lines(theta, "multicast/custom", machine, 2, "graph", {"9": 450.0, "10": 900.0})
    ((_a, s8),) = gpu.kernel_lines(theta, "multicast/custom", machine, 8, "graph", {"9": 450.0, "10": 900.0})
    assert float(s2[0] / s8[0]) == pytest.approx(1.5 / 1.125)


@pytest.mark.parametrize(
    ("engine", "arch", "source"),
    [
        ("vllm", "10.3", "10.0"),  # the previous arch's row
        ("vllm", "10.0", "9.0"),
        ("vllm", "9.0", "10.0"),  # no previous arch: the next
        ("vllm", "10.7", "10.3"),
        ("sglang", "10.3", "10.0"),  # SGLang's own dispatch gives 10.3 the SM100 config
        ("sglang", "10.0", "9.0"),
        ("sglang", "9.0", "10.0"),
    ],
)
def test_the_nearest_arch_copy_follows_each_engine(engine: str, arch: str, source: str) -> None:
    assert blind.copy_source(engine, arch) == source
    assert blind.copy_table(engine, arch).platform.arch == source


def test_a_fold_drops_the_arch_sweeps_and_claims() -> None:
    data = cal.default_data()
    kept = data.without_arch("9.0")
    assert kept.sweeps and all(validate.preset_arch(s.preset) != "9.0" for s in kept.sweeps)
    assert kept.crossovers and all(c.arch != "9.0" for c in kept.crossovers)
    assert len(kept.sweeps) < len(data.sweeps)
    assert cal.Data(data.sweeps, data.crossovers, 0.0).fitted == ()


def test_a_family_with_no_data_takes_the_nearest_fitted_one() -> None:
    data = cal.Data(tuple(s for s in SWEEPS if validate.preset_arch(s.preset) != "9.0"), (), 0.0)
    values = np.array([cal.prior(n)[0] for n in cal.parameter_names()])
    result = cal.Result(tuple(cal.parameter_names()), values * 1.3, 0.0, 0)
    theta = blind.fold_theta(result, data)
    assert theta["round@9"] == theta["round@10"] and theta["link@9"] == theta["link@10"]


def test_conformal_factor_is_the_finite_sample_quantile() -> None:
    assert blind.conformal_factor([]) == 1.0
    errors = [math.log(1 + i / 100) for i in range(29)]  # 0 .. 0.28
    # ceil((29 + 1) 0.9) = 27: the 27th smallest
    assert blind.conformal_factor(errors) == pytest.approx(1.26)
    assert blind.conformal_factor([0.1, 0.2]) == pytest.approx(math.exp(0.2))  # few units: the largest
    assert blind.conformal_factor([-0.5]) == 1.0  # never below the prediction


def _score(sweep_id: str, ws: int, rows: list[tuple[int, float, float]]) -> validate.SweepScore:
    """A scored sweep with regrets (model, vllm copy) per size; the other choosers as the model."""
    base = next(s for s in SWEEPS if s.id == "DS2a")
    sweep = type(base)(sweep_id, "test", "h100-sxm", ws, "graph", ("library/nccl",), tuple(n for n, _, _ in rows),
                       tuple((1.0,) for _ in rows))  # fmt: skip
    out = []
    for n, model, copy in rows:
        regrets = {"model": model, "vllm copy": copy, "sglang copy": model * 2, "vllm": 1.0, "sglang": 1.0}
        out.append(validate.Row(n, "library/nccl", dict.fromkeys(regrets, "library/nccl"), regrets))
    return validate.SweepScore(sweep, tuple(out))


def test_copy_rules_need_a_real_loss_on_enough_sizes() -> None:
    small = [(k * (64 << 10), 1.2, 1.0) for k in (1, 2)]  # the copy wins, but on 2 sizes only
    large = [(k * MiB, 1.3, 1.0) for k in (2, 4, 8)]  # the copy wins on 3 sizes
    fold = blind.ArchFold("9.0", (_score("T", 6, small + large),), (1.0,), {})
    (rule,) = blind.copy_rules([fold])
    assert (rule.world_size, rule.mode, rule.lo, rule.hi, rule.engine) == (6, "graph", MiB + 1, None, "vllm")
    assert rule.points == 3 and "at ws 6 graph above 1MiB" in rule.why("10.0")
    assert blind.hybrid_regrets(fold.scores[0], [rule]) == [1.2, 1.2, 1.0, 1.0, 1.0]
    tie = blind.ArchFold("9.0", (_score("T", 6, [(k * MiB, 1.0, 1.0) for k in (2, 4, 8)]),), (1.0,), {})
    assert blind.copy_rules([tie]) == ()  # no loss, no copy


def test_calibration_counts_each_sweep_left_out() -> None:
    folds = [
        blind.ArchFold("9.0", (_score("A", 8, [(MiB, 1.10, 1.0)]), _score("B", 8, [(MiB, 1.02, 1.0)])), (1.0, 1.0), {}),
        blind.ArchFold("10.0", (_score("C", 2, [(MiB, 1.05, 1.0)]),), (1.0,), {}),
    ]
    c = blind.calibrate(folds)
    assert c.factor == pytest.approx(1.10) and c.units == 3
    assert c.covered == 2  # A (1.10) is not covered by the others' largest, 1.05
    assert c.arch_covered == 2  # with the other archs' only: A against C's 1.05 is not, B is, C against 1.10 is


def test_leave_one_arch_out_on_the_published_sweeps() -> None:
    """Every arch with a sweep to score gets a fold; the stored fit's blind figures are what the folds give."""
    stored = gpu.bundled_fit().blind
    data = cal.default_data(stored["claim_weight"])
    folds = blind.leave_one_arch_out(data)
    assert [f.arch for f in folds] == [*stored["archs"], *stored["rocm"]["archs"]] == ["9.0", "10.0", "10.3", "gfx942"]
    for fold in folds:
        assert all(validate.preset_arch(s.sweep.preset) == fold.arch for s in fold.scores)
        for score in fold.scores:
            # an AMD GPU has no engine rows nor copies: RCCL at every size, where the sweep measured it
            amd = {"model", "rccl"} if "rccl" in score.rows[0].regrets else {"model"}
            expected = amd if blind.is_amd(fold) else {"model", "vllm", "sglang", "vllm copy", "sglang copy"}
            assert set(score.rows[0].regrets) == expected
    again = blind.stored_summary(folds, stored["claim_weight"], {})
    for key in ("factor", "units", "covered", "arch_covered", "score", "rules", "rocm"):
        assert again[key] == stored[key], key
    s = stored["score"]
    assert s["hybrid"] <= min(s["vllm copy"], s["sglang copy"])  # in total no worse than copying
    assert stored["covered"] / stored["units"] >= 0.8


def test_the_plan_copies_where_the_folds_say_so_and_says_why() -> None:
    model = HardwareModel(load_preset("b300"))
    copies = model.copied(6, "graph", [64 << 10, 4 * MiB])
    assert copies[0] is None
    assert copies[1] is not None and copies[1].algorithm == "2shot_pull_mc"
    assert "copied from 10.0" in copies[1].why and "measure on B300 world size 6 graph" in copies[1].settle
    planned = build_plan(model, 6, "graph", 16 << 10, 128 << 20, model.params())
    assert planned.copied and "copied from 10.0" in planned.plan.provenance.notes
    assert planned.regret.calibrated == pytest.approx(planned.regret.median * model.interval_factor)
    # the public fact about the held-back B300 ws 6 sweep: from 2 MiB up the fastest column is multicast
    sizes = [n for n in planned.sizes if n >= 2 * MiB]
    assert all(c == "2shot_pull_mc" for n, c in zip(planned.sizes, planned.choice, strict=True) if n in sizes)
