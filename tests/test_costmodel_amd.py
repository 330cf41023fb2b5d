"""The GPU cost model on AMD GPUs: an Infinity Fabric mesh, RCCL, QuickReduce's codecs, the AMD folds, and the
modelled tables of the MI300X and MI355X presets."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from artune import catalog
from artune.cli import main
from artune.costmodel import calibrate as cal
from artune.costmodel import gpu, validate
from artune.costmodel.hardware import HardwareModel
from artune.costmodel.presets import hardware_from_dict, load_preset
from artune.costmodel.published import SWEEPS, sweep
from artune.errors import ArtuneError

KiB, MiB = 1 << 10, 1 << 20
BW = {"9": 450.0, "10": 900.0}


def truth(**changes: float) -> dict[str, np.ndarray]:
    values = {name: cal.prior(name)[0] for name in cal.parameter_names()}
    values.update({"round@cdna3": 1.5, "link@cdna3": 0.75, "round@cdna4": 2.0, "link@cdna4": 0.6})
    values.update(changes)
    return {k: np.array([v]) for k, v in values.items()}


def test_the_amd_presets_are_a_mesh_of_links() -> None:
    mi300x, mi355x = load_preset("mi300x"), load_preset("mi355x")
    assert (mi300x.arch, mi300x.links, mi300x.link_GBps, mi300x.multicast) == ("gfx942", 7, 64.0, False)
    assert mi355x.arch == "gfx950" and mi355x.link_GBps == 76.8 and all(h.sources for h in (mi300x, mi355x))
    machine = mi300x.machine()
    # a GPU reaches p - 1 peers over p - 1 links; a switch gives every world size the same
    assert [machine.bandwidth(p) for p in (2, 4, 8)] == [64.0, 192.0, 448.0]
    assert load_preset("h200").machine().bandwidth(2) == load_preset("h200").machine().bandwidth(8) == 450.0
    assert mi300x.fabric == "7 Infinity Fabric links of 64 GB/s per direction, a full mesh"
    with pytest.raises(ArtuneError, match="not both"):
        hardware_from_dict(
            "x", {"arch": "gfx942", "multicast": False, "links": 7, "link_GBps": 64, "nvlink_GBps": 1}, "x"
        )
    with pytest.raises(ArtuneError, match="missing link_GBps"):
        hardware_from_dict("x", {"arch": "gfx942", "multicast": False, "links": 7}, "x")
    with pytest.raises(ArtuneError, match="must be > 0"):
        hardware_from_dict("x", {"arch": "gfx942", "multicast": False, "links": 0, "link_GBps": 64}, "x")


def test_amd_archs_are_families_by_cdna_generation() -> None:
    assert gpu.family_of("gfx942") == ("cdna3", True) and gpu.family_of("gfx950") == ("cdna4", True)
    assert gpu.family_of("gfx1250") == ("cdna4", False)  # no facts: the newest AMD family's parameters
    assert gpu.nearest_family("cdna3", {"9", "cdna4"}) == "cdna4"  # never another vendor's
    assert gpu.nearest_family("cdna3", {"9", "10"}) is None
    th = truth()
    assert gpu.round_for(th, gpu.Machine("gfx1250", 0.0, False, links=7, link_GBps=100.0), BW)[0] == 2.0


def test_on_a_mesh_one_shot_moves_n_per_link_and_two_shot_2n_over_p() -> None:
    th = truth()
    mesh = gpu.Machine("gfx942", 0.0, False, links=7, link_GBps=64.0)
    link = 0.75 * 64e3  # bytes per us a custom one-shot reaches over one link
    for p in (2, 4, 8):
        ((_, one),) = gpu.kernel_lines(th, "one_shot/custom", mesh, p, "graph", BW)
        ((_, two),) = gpu.kernel_lines(th, "two_shot/custom", mesh, p, "graph", BW)
        assert one[0] == pytest.approx(1 / link)
        assert two[0] == pytest.approx(2 / p / link * th["two_shot/custom:bytes"][0])


def test_quickreduce_sends_its_codecs_bytes_and_pays_for_the_codec() -> None:
    th = truth(**{"quickreduce:codec_GBps": 500.0, "quickreduce:codec_rounds": 4.0})
    mesh = gpu.Machine("gfx942", 0.0, False, links=7, link_GBps=64.0)
    lines = {lv: gpu.kernel_lines(th, f"two_shot/quickreduce_{lv}", mesh, 8, "graph", BW)[0] for lv in ("fp", "int4")}
    wire = 2 / 8 / (0.75 * 64e3) * th["two_shot/quickreduce:bytes"][0]
    assert lines["fp"][1][0] == pytest.approx(wire)
    assert lines["int4"][1][0] == pytest.approx(wire * 1152 / 4096 + 1 / 500e3)
    assert lines["int4"][0][0] - lines["fp"][0][0] == pytest.approx(4.0 * 1.5)  # the codec's rounds
    # RCCL: NCCL's ring forms scaled by its two factors, no NVLS
    rccl = gpu.kernel_lines(truth(**{"rccl:base": 2.0}), "library/rccl", mesh, 8, "graph", BW)
    ring = gpu.kernel_lines(truth(), "library/nccl_ring", mesh, 8, "graph", BW)
    assert len(rccl) == 3 and rccl[0][0][0] - ring[0][0][0] == pytest.approx(th["nccl:ll"][0])


def test_the_fit_recovers_the_amd_parameters() -> None:
    th = truth(**{"quickreduce:codec_GBps": 600.0, "rccl:bytes": 1.3})
    made = []
    for s in (x for x in SWEEPS if validate.kind_of(x.preset) == "rocm"):
        machine = cal.machine_for(s.preset)
        cols = [gpu.kernel_times(th, k, machine, s.world_size, s.sizes, s.mode, BW)[0] + 4.0 for k in s.kernels]
        made.append(replace(s, times=tuple(tuple(float(c[i]) for c in cols) for i in range(len(s.sizes)))))
    result = cal.fit(cal.Data(tuple(made)))
    # the slopes: the intercepts share each sweep's offset and the kernels' extra rounds, which the round trades
    # against on AMD data alone
    for name in ("link@cdna3", "link@cdna4", "quickreduce:codec_GBps"):
        assert result.value(name) == pytest.approx(float(th[name][0]), rel=0.05), name
    # RCCL's large-message cost is NCCL's ring per-byte cost times RCCL's own factor: only their product shows
    found = result.value("rccl:bytes") * result.value("nccl:ring_bytes")
    assert found == pytest.approx(float(th["rccl:bytes"][0] * th["nccl:ring_bytes"][0]), rel=0.05)


def test_an_amd_sweep_is_scored_against_rccl_not_cuda_tables() -> None:
    mk1 = sweep("DA1w8")
    assert validate.kind_of(mk1.preset) == "rocm" and validate.engines_for(mk1) == ()
    assert mk1.source.startswith("mk1-project/quickreduce README") and mk1.url
    # a perfect predictor: no regret; RCCL at every size loses where QuickReduce is faster
    col = {k: i for i, k in enumerate(mk1.kernels)}

    def perfect(kernel: str, sizes) -> np.ndarray:
        return np.array([mk1.times[mk1.sizes.index(n)][col[kernel]] for n in sizes])

    score = validate.score_sweep(mk1, perfect)
    assert set(score.rows[0].regrets) == {"model", "rccl"}
    assert score.geomean("model") == pytest.approx(1.0) and score.geomean("rccl") > 1.2
    # one kernel measured per size is no choice to score (vLLM PR #39080's MI355X table)
    assert not sweep("DA4").choice and validate.comparators(sweep("DA3")) == {}


def test_quickreduce_levels_are_catalog_facts_the_model_reads() -> None:
    assert {k for k in gpu.KERNELS if "quickreduce" in k} == {
        f"two_shot/quickreduce_{level}" for level in catalog.QUICK_REDUCE_LEVELS
    }
    assert gpu.KERNEL_OF["quick_ar_int4"] == "two_shot/quickreduce_int4"  # FlyDSL's kernel has no form of its own
    assert gpu.KERNEL_OF["rccl"] == "library/rccl" and gpu.KERNEL_OF["custom_ar_v1_1stage"] == "one_shot/custom"


def test_plan_for_the_mi300x_is_a_rocm_table_with_its_validation(tmp_path, capsys) -> None:
    out = tmp_path / "mi300x.toml"
    assert main(["plan", "--preset", "mi300x", "--world-size", "2..8", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "artune plan: validated on 1 AMD arch(s) held out (gfx942;" in err and "RCCL at every size" in err
    from artune.table import load_table

    table = load_table(out)
    assert (table.platform.kind, table.platform.arch) == ("rocm", "gfx942")
    names = {c for p in table.plans for b in p.bands for c in b.candidates} | {p.fallback for p in table.plans}
    assert names <= set(gpu.ROCM_CANDIDATES) and {p.fallback for p in table.plans} == {"rccl"}
    assert table.provenance.source == "modelled" and "Infinity Fabric" in table.provenance.notes
    # only what runs at each world size: QuickReduce at 2, 4, 8 ranks, SGLang's kernel at 2, 4, 6, 8; RCCL at 3
    assert not table.plan(3, "eager").bands and "quick_ar_fp" not in table.plan(6, "eager").algorithms
    assert main(["check", str(out), "--ignore", "M"]) == 0


def test_plan_plans_a_quantized_level_only_when_asked(capsys) -> None:
    model = HardwareModel(load_preset("mi355x"))
    assert model.kind == "rocm" and model.baseline == "rccl" and model.algorithms == gpu.ROCM_CANDIDATES
    assert model.copied(8, "graph", [MiB]) == [None]  # the copy rules copy NVIDIA engines' rows
    assert (
        main(["plan", "--preset", "mi300x", "--world-size", "8", "--quick-reduce", "int4", "--sizes", "1MiB..1GiB"])
        == 0
    )
    assert "quick_ar_int4" in capsys.readouterr().out
    assert main(["plan", "--preset", "h200", "--world-size", "8", "--quick-reduce", "int4"]) == 2
    assert "QuickReduce on AMD GPUs" in capsys.readouterr().err
