"""Tables from the model: ``artune model fit`` and ``artune plan``, provenance through check and explain, refusals."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from artune.cli import main
from artune.costmodel.forms import FORMS
from artune.costmodel.hardware import Crossing, HardwareModel, crossings, uncertain_sizes
from artune.costmodel.plan import build_plan
from artune.costmodel.presets import load_hardware, load_preset, preset_names
from artune.measure.records import Candidate, Header, Measurement, MeasurementLog
from artune.table import check_table, load_table
from test_costmodel_fit import CTX, SIZES, TRUTH

MiB = 1 << 20


def write_logs(folder: Path, world_sizes=(2, 4), truth=TRUTH) -> list[str]:
    """Measurement logs as ``artune tune`` writes them, times from known parameters (2 cores)."""
    paths = []
    rng = np.random.default_rng(3)
    for ws in world_sizes:
        path = folder / f"measurements-ws{ws}.jsonl"
        log = MeasurementLog(path, Header.for_this_machine(ws))
        for name, (form, theta) in truth.items():
            n = np.array(SIZES, dtype=float)
            times = FORMS[form].predict(np.array(theta), np.full_like(n, ws), n, CTX)
            for size, t in zip(SIZES, times, strict=True):
                samples = tuple(float(t) * np.exp(rng.normal(0, 0.02, 5)))
                log.append(Measurement(Candidate.of(name), size, "float32", ws, samples, 0))
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> list[str]:
    return write_logs(tmp_path_factory.mktemp("logs"))


def test_model_fit_prints_parameters_residuals_and_writes_a_plot(logs, tmp_path, capsys) -> None:
    assert main(["model", "fit", *logs, "--cores", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in ("shm_one_shot", "shm_two_shot", "gloo"):
        assert f"## {name}" in out
    assert "peer_us_per_MB" in out and "median residual" in out and "cores=2" in out
    assert (tmp_path / "fit.png").stat().st_size > 1000 and "## gloo" in (tmp_path / "fit.md").read_text()


def test_plan_from_logs_fills_world_size_3_modelled_and_check_passes(logs, tmp_path, capsys) -> None:
    out = tmp_path / "t.toml"
    assert (
        main(["plan", "--from", logs[0], "--from", logs[1], "--world-size", "2..4", "--cores", "2", "--out", str(out)])
        == 0
    )
    table = load_table(out)
    assert sorted(p.world_size for p in table.plans) == [2, 3, 4]
    assert all(p.bands[-1].upto is None for p in table.plans)  # open-ended, as tuned tables are
    assert table.provenance.source == "modelled" and table.provenance.tool.startswith("artune.model/")
    for plan in table.plans:
        assert plan.provenance.source == "modelled"
        assert "predicted regret" in plan.provenance.notes and "measurements-ws2.jsonl" in plan.provenance.notes
    capsys.readouterr()
    # check shows the modelled plans as notes, not findings: exit 0
    assert main(["check", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(": note M101: " in line or ": note T401: " in line for line in lines)
    modelled = [line for line in lines if "modelled by artune.model/" in line]
    assert len(modelled) == 4 and all("predicted regret" in line for line in modelled[1:])
    # and what it leaves to the bundled default (ranks across hosts)
    assert [line for line in lines if line not in modelled] == [
        f"{out}: note T401: arch=x86_64 ws=2 hosts=2 mode=eager: answered by the bundled default (bundled:cpu), "
        "since this table has no ws=2 hosts=2 mode=eager plan"
    ]
    # explain says the figures are modelled, text and JSON
    assert main(["explain", "--table", str(out), "--world-size", "3", "--size", "64KiB"]) == 0
    assert "figures: modelled by artune.model/" in capsys.readouterr().out
    assert main(["explain", "--table", str(out), "--world-size", "3", "--size", "64KiB", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["figures"].startswith("modelled by artune.model/")


def test_the_predicted_plan_picks_the_truly_fastest_algorithm(logs) -> None:
    from artune.costmodel.cost import fit_logs

    model = fit_logs(logs, cores=2)
    planned = build_plan(model, 3, "eager", 256, 16 * MiB)
    sizes = np.array(planned.sizes, dtype=float)
    truth = {a: FORMS[f].predict(np.array(th), np.full_like(sizes, 3), sizes, CTX) for a, (f, th) in TRUTH.items()}
    table_choice = [planned.plan.bands[0].candidates[0]]
    regret = [truth[c][i] / min(t[i] for t in truth.values()) for i, c in enumerate(planned.choice)]
    assert np.exp(np.mean(np.log(regret))) < 1.03 and max(regret) < 1.10
    assert table_choice[0] == "shm_one_shot"
    assert planned.regret.median >= 1.0 and planned.regret.p90 >= planned.regret.median


def test_plan_refuses_oversubscription_it_never_saw(logs, capsys) -> None:
    assert (
        main(["plan", "--from", logs[0], "--from", logs[1], "--world-size", "3", "--world-size", "8", "--cores", "2"])
        == 0
    )
    captured = capsys.readouterr()
    assert "refused: world size 8 oversubscribes the 2 cores beyond the largest fitted world size 4" in captured.err
    assert "world_size = 3" in captured.out and "world_size = 8" not in captured.out
    assert main(["plan", "--from", logs[0], "--from", logs[1], "--world-size", "8", "--cores", "2"]) == 2
    assert "refused every world size" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plan", "--preset", "nope", "--world-size", "2"], "unknown preset 'nope'"),
        (["plan", "--preset", "h200", "--world-size", "x"], "expected N or A..B"),
        (["plan", "--preset", "h200", "--world-size", "4..2"], "A <= B"),
        (["plan", "--preset", "h200", "--world-size", "2", "--sizes", "1MiB"], "LO..HI"),
        (["plan", "--from", "/nonexistent/m.jsonl", "--world-size", "3"], "no such measurement log"),
        (["model", "fit", "/nonexistent/m.jsonl"], "no such measurement log"),
    ],
)
def test_bad_input_is_one_clear_line(args, message, capsys) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_sizes_far_beyond_the_measured_ones_are_refused(logs, capsys) -> None:
    args = ["plan", "--from", logs[0], "--from", logs[1], "--world-size", "3", "--cores", "2"]
    assert main([*args, "--sizes", "256..1GiB"]) == 2
    assert "does not extrapolate that far" in capsys.readouterr().err
    assert main([*args, "--sizes", "256..64MiB"]) == 0  # 4x the largest measured (16 MiB)


def test_logs_from_another_machine_need_cores(tmp_path, capsys) -> None:
    path = tmp_path / "measurements-ws2.jsonl"
    header = Header.for_this_machine(2)
    other = Header(header.schema, header.platform, header.device, 2, host_fingerprint="elsewhere")
    log = MeasurementLog(path, other)
    log.append(Measurement(Candidate.of("gloo"), 4096, "float32", 2, (100.0,) * 5, 0))
    assert main(["model", "fit", str(path)]) == 2
    assert "--cores" in capsys.readouterr().err


def test_hardware_file_errors_and_a_good_file(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('arch = "rubin"\nnvlink_GBps = 1800\nmulticast = true\n')
    assert main(["plan", "--hardware", str(bad), "--world-size", "2"]) == 2
    assert "expected a compute capability" in capsys.readouterr().err
    typo = tmp_path / "typo.toml"
    typo.write_text('arch = "10.7"\nnvlink = 1800\n')
    assert main(["plan", "--hardware", str(typo), "--world-size", "2"]) == 2
    assert "unknown key 'nvlink'" in capsys.readouterr().err
    good = tmp_path / "gpu.toml"
    good.write_text('arch = "10.7"\nnvlink_GBps = 1800\nround_us = 3.0\nmulticast = false\nsms = 160\n')
    hw = load_hardware(good)
    model = HardwareModel(hw)
    assert "2shot_pull_mc" not in model.candidates(8, "graph") and model.params()["1shot_push"] == {"blocks": 160}
    # a measured round latency overrides the family's: a slower round moves one-shot's end up
    slow = HardwareModel(replace(hw, round_us=12.0))
    assert (
        slow.crossover("1shot_push", "2shot_pull", 8, "graph")[0]
        > model.crossover("1shot_push", "2shot_pull", 8, "graph")[0]
    )


def test_rubin_preset_2_to_16_has_no_holes_and_every_plan_is_modelled(tmp_path, capsys) -> None:
    out = tmp_path / "rubin.toml"
    assert main(["plan", "--preset", "rubin", "--world-size", "2..16", "--out", str(out)]) == 0
    table = load_table(out)
    assert {(p.world_size, p.mode) for p in table.plans} == {(ws, m) for ws in range(2, 17) for m in ("graph", "eager")}
    assert all(p.provenance.source == "modelled" for p in table.plans)
    # bounded, NCCL above, as the engines' tables are (and where the model predicts NCCL fastest)
    assert all(p.bands[-1].upto is not None and p.bands[-1].upto <= 128 * MiB for p in table.plans if p.bands)
    assert all(p.fallback == "nccl" for p in table.plans)
    assert [f for f in check_table(table) if not f.note] == []
    capsys.readouterr()
    assert main(["check", str(out)]) == 0


def test_every_preset_states_its_sources_and_builds() -> None:
    assert set(preset_names()) == {"h100-sxm", "h200", "b200", "b300", "rubin", "mi300x", "mi355x"}
    for name in preset_names():
        hw = load_preset(name)
        assert hw.sources and (hw.nvlink_GBps > 0) != (hw.links > 0)  # a switch or a mesh of links
    # faster links move the one-shot -> two-shot crossover up, more ranks move it down
    h200, b200 = HardwareModel(load_preset("h200")), HardwareModel(load_preset("b200"))
    assert (
        b200.crossover("1shot_push", "2shot_pull", 8, "graph")[0]
        > h200.crossover("1shot_push", "2shot_pull", 8, "graph")[0]
    )
    assert (
        h200.crossover("1shot_push", "2shot_pull", 4, "graph")[0]
        > h200.crossover("1shot_push", "2shot_pull", 8, "graph")[0]
    )


def test_explain_uncertainty_prints_intervals_and_the_cheapest_sweep(capsys) -> None:
    assert main(["plan", "--preset", "rubin", "--world-size", "8", "--mode", "graph", "--explain-uncertainty"]) == 0
    err = capsys.readouterr().err
    assert "crossover 1shot_push -> " in err and "90% interval" in err
    assert "cheapest sweep to run" in err
    assert main(["plan", "--from", "x.jsonl", "--world-size", "3", "--explain-uncertainty"]) == 2
    assert "--explain-uncertainty is for GPU plans" in capsys.readouterr().err


def test_a_crossing_says_when_the_plans_bound_is_not_the_crossover() -> None:
    MiB = 1 << 20
    assert str(Crossing("a", "b", 2 * MiB, 2.1 * MiB, MiB, 4 * MiB)) == "a -> b at 2MiB (90% interval 1MiB..4MiB)"
    late = str(Crossing("a", "b", 64 * MiB, 14 * MiB, 3 * MiB, 60 * MiB))
    assert late.startswith("a -> b at 64MiB, where it is 5% faster (crossover 14MiB")
    top = str(Crossing("a", "nccl", 128 * MiB, 200 * MiB, 60 * MiB, 1 << 30, last=True))
    assert "the top of the planned sizes (crossover 200MiB, 90% interval 60MiB..>= 1GiB)" in top
    assert "before the crossover (crossover 200MiB" in str(Crossing("a", "b", 128 * MiB, 200 * MiB, MiB, 1 << 30))


def test_crossings_and_uncertain_sizes_come_from_the_refits() -> None:
    from artune.costmodel.plan import build_plan as plan_for

    model = HardwareModel(load_preset("rubin"))
    planned = plan_for(model, 8, "graph", 4 << 10, 128 << 20, model.params())
    found = crossings(model, planned.plan)
    assert found and all(c.lo <= c.hi for c in found)
    assert found[0].lo <= found[0].at <= found[0].hi  # the plan's own bound lies in its interval
    m = uncertain_sizes(model, 8, "graph", 4 << 10, 128 << 20)
    assert m is not None and m.count == len(m.sizes) * len(m.algorithms) and 0.1 <= m.disagreement <= 1.0


def test_export_of_a_modelled_table_says_modelled_not_measured(tmp_path, capsys) -> None:
    out = tmp_path / "rubin.toml"
    assert main(["plan", "--preset", "rubin", "--world-size", "2..8", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["export", str(out), "--to", "sglang"]) == 0
    text = capsys.readouterr().out
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any("modelled (artune.model/1)" in line for line in header)
    assert any("modelled, not measured" in line and "predicted regret" in line for line in header)


def test_the_log_spaced_grid_is_tidy_and_spans_the_range() -> None:
    from artune.grid import log_spaced

    sizes = log_spaced(4096, 1 << 20, per_octave=4, itemsize=2)
    assert sizes[0] == 4096 and sizes[-1] == 1 << 20 and sizes == sorted(set(sizes))
    assert len(sizes) == 8 * 4 + 1  # 8 octaves, 4 a doubling, both ends
    assert all(s % 2 == 0 and s >> max(0, s.bit_length() - 4) << max(0, s.bit_length() - 4) == s for s in sizes)
    assert log_spaced(1000, 1001, per_octave=2) == [1024]  # both ends quantize to one tidy size
