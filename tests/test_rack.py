"""Across hosts: the NVLink domain as a plan key, and the engines' multi-node rules as their releases decide.

The decide/io tests need nothing; the engine tests run each release's own code in the oracles' stand-in
world (``bench/oracles``) from the cached wheels, and skip, saying so, where a wheel cannot be had.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from artune.cli import main
from artune.errors import ReleaseUnavailable, TableError
from artune.formats import read_engine
from artune.formats.references import reference_findings, reference_set
from artune.formats.releases import fetch_release
from artune.oracles import RAISES, Probe
from artune.oracles import sglang as sglang_oracle
from artune.oracles import vllm as vllm_oracle
from artune.sources import open_source, source_findings
from artune.table.decide import decide
from artune.table.io import dumps_table, loads_table
from artune.table.types import Band, NVLinkDomain, Plan, Platform, Provenance, Table

MiB = 1 << 20


def release(engine: str, version: str) -> Path:
    try:
        if engine == "vllm":
            fetch_release("flashinfer-python", vllm_oracle.FLASHINFER)  # the MNNVL workspace the oracle runs
        return fetch_release(engine, version)
    except ReleaseUnavailable as err:
        pytest.skip(f"{engine}=={version} is not cached and cannot be downloaded: {err}")


def _table(rules: str = "artune") -> Table:
    one = Plan(8, "eager", (Band(MiB, ("custom_ar",)),), "nccl")
    rack = Plan(8, "eager", (Band(4 * MiB, ("flashinfer_ar",)),), "nccl", hosts=2, nvlink=NVLinkDomain.RACK)
    network = Plan(8, "eager", (Band(64 * 1024, ("hier_shm",)),), "nccl", hosts=2)
    return Table(Platform("cuda", "10.0"), Provenance("measured"), (one, rack, network), rules=rules)


def test_a_call_across_hosts_decides_by_the_plans_of_its_nvlink_domain() -> None:
    table = _table()
    rack = decide(table, MiB, 8, hosts=2, nvlink="rack")
    assert (rack.algorithm, rack.nvlink, rack.as_dict()["plan"]["nvlink_domain"]) == ("flashinfer_ar", "rack", "rack")
    network = decide(table, 32 * 1024, 8, hosts=2, nvlink="host")
    assert network.algorithm == "hier_shm" and "nvlink_domain" not in network.as_dict()["plan"]
    # not given: host, and the reason says so; one host has no domain to give
    unsaid = decide(table, 32 * 1024, 8, hosts=2)
    assert unsaid.algorithm == "hier_shm" and "NVLink domain not given: host" in unsaid.reason
    assert "NVLink domain" not in decide(table, 1024, 8).reason
    assert decide(table, 1024, 8, nvlink="rack").algorithm == "custom_ar"
    # a rack plan never decides a call over a network, nor the other way round
    only_rack = table.with_changes(plans=table.plans[:2])
    over = decide(only_rack, 1024, 8, hosts=2, nvlink="host")
    assert over.algorithm == "nccl" and "joined over a network" in over.reason
    with pytest.raises(ValueError, match="nvlink must be"):
        decide(table, 1024, 8, hosts=2, nvlink="fabric")


def test_an_engine_table_names_the_multi_node_rule_where_it_has_no_plan() -> None:
    table = _table("vllm").with_changes(plans=_table().plans[:1])
    over = decide(table, MiB, 16, hosts=2, nvlink="host")
    assert over.algorithm == "nccl" and "FlashInfer's only multi-node backend (mnnvl)" in over.reason
    rack = decide(table, MiB, 32, hosts=4, nvlink="rack")
    assert rack.algorithm == "nccl" and "across 4 hosts in one NVLink domain vLLM runs none of" in rack.reason


def test_the_nvlink_domain_round_trips_and_single_host_files_keep_their_text() -> None:
    table = _table()
    text = dumps_table(table)
    assert text.count('nvlink_domain = "rack"') == 1
    assert loads_table(text).plans == table.plans
    single = table.with_changes(plans=table.plans[:1])
    assert "nvlink" not in dumps_table(single)
    bad = text.replace('nvlink_domain = "rack"', 'nvlink_domain = "fabric"')
    with pytest.raises(TableError, match="nvlink_domain = 'fabric'; expected one of host, rack"):
        loads_table(bad)
    with pytest.raises(TableError, match="nvlink=rack needs ranks across hosts"):
        Plan(8, "eager", (), "nccl", nvlink=NVLinkDomain.RACK)


def test_explain_takes_the_nvlink_domain(capsys) -> None:
    args = ["explain", "--reference", "vllm", "--arch", "10.3", "--world-size", "16", "--size", "1MiB"]
    assert main([*args, "--hosts", "4", "--nvlink-domain", "rack"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("flashinfer_ar") and "plan ws=16 hosts=4 nvlink=rack" in out
    assert "_resolve_fi_ar_backend picks FlashInfer's mnnvl backend for a multi-node group" in out
    assert "FI_MNNVL_ALLREDUCE_MAX_SIZE_MB[(103, 16, 4)] = 8 MB" in out
    assert main([*args, "--hosts", "2", "--nvlink-domain", "host"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("nccl") and "across 2 hosts joined over a network vLLM runs nccl" in out
    assert main([*args, "--nvlink-domain", "rack"]) == 2
    assert "--nvlink-domain rack needs --hosts 2 or more" in capsys.readouterr().err


def test_reference_sglang_graph_calls_across_a_rack_take_the_eager_plans(capsys) -> None:
    args = ["explain", "--reference", "sglang", "--arch", "10.0", "--world-size", "8", "--hosts", "2"]
    assert main([*args, "--nvlink-domain", "rack", "--mode", "graph", "--size", "1MiB"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2shot_push") and "graph-captured calls take the eager plans" in out
    table = reference_set("sglang").resolve("10.0")
    # at 2 ranks SM100's graph row ends one-shot push at 8 MiB, its eager row at 16 MiB
    graph = table.plan(2, "graph", 2, None, NVLinkDomain.RACK)
    assert graph is not None and graph.bands == table.plan(2, "eager").bands != table.plan(2, "graph").bands


@pytest.mark.parametrize(("engine", "version"), [("vllm", "0.33.0"), ("sglang", "0.5.23")])
def test_a_reference_finds_what_its_release_finds(engine: str, version: str) -> None:
    release(engine, version)
    ours = reference_findings(engine)
    # the reference holds the CUDA tables; a release's reading adds its ROCm findings (QuickReduce's, gfx archs)
    theirs = [f for f in source_findings(open_source(f"{engine}=={version}")) if not f.arch.startswith("gfx")]
    key = lambda f: (f.severity, f.arch, f.world_size, f.hosts, f.message, f.code)  # noqa: E731
    assert [key(f) for f in ours] == [key(f) for f in theirs]
    # the release's name its files and lines; the reference's, the reference
    assert ours and all(f.source == "" and str(f).startswith(f"reference:{engine}: ") for f in ours)
    assert all(f.source for f in theirs)
    codes = {f.code for f in ours}
    assert {"N101", "N102"} <= codes if engine == "vllm" else {"N111"} <= codes


def test_vllm_rack_probes_as_the_release_runs_them() -> None:
    root = release("vllm", "0.33.0")
    cases = [
        (Probe("10.3", 16, "eager", True, MiB, hosts=4, nvlink="rack"), "flashinfer_ar"),
        (Probe("10.3", 16, "eager", True, 8 * MiB, hosts=4, nvlink="rack"), "flashinfer_ar"),  # (103, 16, 4): 8
        (Probe("10.3", 16, "eager", True, 8 * MiB + 16, hosts=4, nvlink="rack"), "nccl"),
        (Probe("10.3", 16, "eager", True, 9 * MiB, hosts=2, nvlink="rack"), "flashinfer_ar"),  # the fusion row
        (Probe("10.3", 16, "eager", False, MiB, hosts=4, nvlink="rack"), "nccl"),  # mnnvl needs multicast
        (Probe("10.3", 16, "eager", True, MiB, hosts=2, nvlink="host"), "nccl"),  # over a network
        (Probe("9.0", 8, "eager", True, MiB, hosts=2, nvlink="rack"), "symm_mem_multimem"),  # no FlashInfer < 10
        (Probe("10.0", 72, "eager", True, MiB, hosts=18, nvlink="rack"), "nccl"),
    ]
    probes = [p for p, _ in cases]
    assert vllm_oracle.engine_decisions(root, probes) == [want for _, want in cases]
    assert vllm_oracle.artune_decisions(root, probes) == [want for _, want in cases]


def test_vllm_0_11_0_raises_over_a_network_and_says_so() -> None:
    root = release("vllm", "0.11.0")
    probe = Probe("10.0", 8, "eager", True, MiB, hosts=2, nvlink="host")
    assert vllm_oracle.engine_decisions(root, [probe]) == [RAISES] == vllm_oracle.artune_decisions(root, [probe])
    (error,) = [f for f in read_engine("vllm", str(root)).findings if f.code == "N103" and f.arch == "10.0"]
    assert error.severity == "error" and "at world sizes 2, 4, 6, 8" in error.message


def test_sglang_rack_probes_as_the_release_runs_them() -> None:
    root = release("sglang", "0.5.23")
    cases = [
        (Probe("10.0", 2, "graph", True, 12 * MiB, hosts=2, nvlink="rack"), "1shot_push"),  # the eager row's
        (Probe("10.0", 2, "graph", True, 12 * MiB), "1shot_pull"),  # one host: the graph row's
        (Probe("10.0", 8, "graph", True, MiB, hosts=2, nvlink="host"), "nccl"),  # no clique
        (Probe("10.0", 16, "eager", True, MiB, hosts=4, nvlink="rack"), "2shot_pull_mc"),
        (Probe("10.0", 32, "eager", True, MiB, hosts=4, nvlink="rack"), "nccl"),  # no config at 32 ranks
    ]
    probes = [p for p, _ in cases]
    assert sglang_oracle.engine_decisions(root, probes) == [want for _, want in cases]
    assert sglang_oracle.artune_decisions(root, probes) == [want for _, want in cases]


def test_sglang_before_0_5_17_runs_nccl_across_hosts() -> None:
    root = release("sglang", "0.5.10")
    probes = [Probe("10.0", 8, mode, True, MiB, hosts=2, nvlink="rack") for mode in ("graph", "eager")]
    assert sglang_oracle.engine_decisions(root, probes) == ["nccl", "nccl"]
    assert sglang_oracle.artune_decisions(root, probes) == ["nccl", "nccl"]
