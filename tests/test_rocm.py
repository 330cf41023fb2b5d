"""AMD GPUs as a platform of their own: gfx arch names, what torch reports for them, RCCL as the fallback,
the algorithms that run there, and ``explain`` naming the platform."""

from __future__ import annotations

import json
import logging

import pytest

from artune import catalog, rocm
from artune.cli import main
from artune.table import dumps_table, loads_table
from artune.table.decide import decide
from artune.table.family import TableSet, conservative_default, family_chain, process_group
from artune.table.types import Platform

MiB = 1 << 20

ROCM_TABLE = """
schema = 1
platform = { kind = "rocm", arch = "gfx942", device = "8x MI300X" }
provenance = { source = "published", notes = "test table" }
[[plan]]
world_size = 8
mode = "eager"
fallback = "rccl"
bands = [{ upto = "16MiB", algorithm = "aiter_ar" }, { upto = "2GiB", algorithm = ["quick_ar_int4", "quick_ar_fp"] }]
"""


def test_the_gfx_arch_behind_what_torch_reports() -> None:
    assert rocm.gfx_arch("9.4") == "gfx942" and rocm.gfx_arch("9.5") == "gfx950"
    # torch's gcnArchName carries target features; rocminfo's ISA name a prefix
    assert rocm.gfx_arch("gfx942:sramecc+:xnack-") == "gfx942"
    assert rocm.gfx_arch("amdgcn-amd-amdhsa--gfx950") == "gfx950"
    assert rocm.gfx_arch("10.7") is None  # no AMD arch reports it
    assert rocm.is_gfx("gfx942") and not rocm.is_gfx("9.4")
    facts = rocm.arch_facts("gfx942")
    assert facts is not None and facts.cdna == 3 and "MI325X" in facts.devices and facts.sources
    assert rocm.describe("gfx950") == "gfx950 (CDNA4; torch reports capability 9.5; MI350X, MI355X)"
    assert "no facts" in rocm.describe("gfx1250")


def test_rocm_families_and_the_fallback() -> None:
    assert family_chain("gfx950") == ("gfx942",) and family_chain("gfx942") == ()
    assert family_chain("gfx1250") == ()  # no facts: no borrowing
    assert process_group("rocm") == "rccl" and process_group("cuda") == "nccl" and process_group("cpu") == "gloo"
    table = conservative_default(Platform("rocm", "gfx942"))
    assert table.plans[0].fallback == "rccl"


def test_a_rocm_set_reads_the_capability_as_its_arch_and_borrows_loudly(caplog: pytest.LogCaptureFixture) -> None:
    table = loads_table(ROCM_TABLE)
    tables = TableSet("test", "rocm", {"gfx942": table})
    assert tables.resolve("9.4") is table and tables.resolve("gfx942:sramecc+:xnack-") is table
    with caplog.at_level(logging.WARNING, logger="artune.table.family"):
        borrowed = tables.resolve("gfx950")
    assert borrowed.borrowed and "borrowed arch gfx942's" in caplog.text
    # an arch with nothing to borrow runs RCCL for every size, and says so
    assert tables.resolve("gfx1250", quiet=True).plans[0].fallback == "rccl"


def test_deciding_on_a_rocm_table() -> None:
    table = loads_table(ROCM_TABLE)
    assert dumps_table(loads_table(dumps_table(table))) == dumps_table(table)
    available = catalog.available(8, "bfloat16", 64 * MiB, False, kind="rocm")
    assert decide(table, MiB, 8, "eager", available).algorithm == "aiter_ar"
    assert decide(table, 64 * MiB, 8, "eager", available).algorithm == "quick_ar_int4"
    assert decide(table, 4 << 30, 8, "eager", available).algorithm == "rccl"
    # no plan at all on a ROCm platform: RCCL
    assert decide(conservative_default(Platform("rocm", "gfx950")), MiB, 2, "eager").algorithm == "rccl"


def test_what_runs_where() -> None:
    why = catalog.unavailable(8, "bfloat16", MiB, False, kind="rocm")
    assert why["symm_mem_two_shot"] == "runs on CUDA only, not on ROCm"
    assert why["quick_ar_int3"] == "world_size=8 not in [2]"  # INT3 is a two-rank level
    assert "quick_ar_int4" not in why and "aiter_ar" not in why and "custom_ar" not in why
    on_cuda = catalog.unavailable(8, "bfloat16", MiB, True, kind="cuda")
    assert on_cuda["quick_ar_fp"] == "runs on ROCm only, not on CUDA" and "rccl" in on_cuda
    assert catalog.unavailable(8, "float32", MiB, False, kind="rocm")["quick_ar_fp"].startswith("dtype float32")
    assert catalog.SPECS["quick_ar_int4"].kernels[1].name == "flydsl/qr_int4"  # vLLM 0.33's FlyDSL path
    # the codec's wire bytes per byte of fp16 input, a fact the cost model reads
    assert catalog.QUICK_REDUCE_LEVELS["int4"][1] == 1152 / 4096


def test_explain_names_the_rocm_platform(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mi300x.toml"
    path.write_text(ROCM_TABLE)
    assert main(["explain", "--table", str(path), "--world-size", "8", "--size", "64MiB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["algorithm"] == "quick_ar_int4"
    assert data["platform"].startswith("rocm gfx942 (CDNA3; torch reports capability 9.4; MI300X")
    assert data["steps"][0] == f"platform: {data['platform']}"
    # two ranks: no plan here or below, so the larger plan's fallback, RCCL, for every size
    assert main(["explain", "--table", str(path), "--world-size", "2", "--size", "64MiB"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rccl (kernel rccl)") and "[rocm arch=gfx942 (8x MI300X)]" in out  # names the platform


def test_an_amd_arch_is_not_answered_from_cuda_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--reference", "sglang", "--arch", "gfx942", "--world-size", "8", "--size", "1MiB"]) == 2
    err = capsys.readouterr().err
    assert "no ROCm table for gfx942 (CDNA3" in err and "are for cuda" in err


def test_check_flags_an_algorithm_of_another_platform(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "wrong.toml"
    path.write_text(ROCM_TABLE.replace('algorithm = "aiter_ar"', 'algorithm = "2shot_pull"'))
    assert main(["check", str(path), "--select", "T109"]) == 1
    out = capsys.readouterr().out
    assert "warning T109: arch=gfx942 ws=8 mode=eager: 2shot_pull runs on CUDA only, not on ROCm" in out
    path.write_text(ROCM_TABLE)
    assert main(["check", str(path), "--select", "T1"]) == 0


def test_an_amd_host_measures_a_rocm_table() -> None:
    from artune.gpufacts import GpuFacts

    facts = GpuFacts("AMD Instinct MI300X", "9.4", 304, 191.5, 8, gcn_arch="gfx942:sramecc+:xnack-")
    assert facts.platform() == Platform("rocm", "gfx942", "AMD Instinct MI300X, 304 CUs")
    again = GpuFacts.from_dict(facts.as_dict())
    assert again.platform() == facts.platform() and again.fingerprint() == facts.fingerprint()
    nvidia = GpuFacts("NVIDIA H200", "9.0", 132, 139.8, 8)
    assert (
        nvidia.platform().kind == "cuda" and nvidia.fingerprint() != GpuFacts("x", "9.0", 132, 139.8, 8).fingerprint()
    )


def test_show_and_diff_name_the_platform(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(ROCM_TABLE)
    b.write_text(ROCM_TABLE.replace('"quick_ar_int4", ', ""))
    assert main(["show", str(a)]) == 0
    assert "[rocm arch=gfx942 (8x MI300X)]" in capsys.readouterr().out  # a title's brackets are not markup
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("arch=gfx942: A ") and "[rocm arch=gfx942 (8x MI300X)]; B" in out
    assert "A quick_ar_int4 > rccl | B quick_ar_fp > rccl" in out  # FP never runs behind INT4 (same conditions)
