"""vLLM's released code decides; artune's reader of the same release must decide the same on every probe.

Three releases, the first where a machine without multicast runs something
else than symmetric memory's absence explains (0.19.0: custom all-reduce keeps
its 8 MiB default above 10.3 ws=2's 4 MiB rows), the one before the Rubin rows
(0.25.0) and the newest (0.34.0), are downloaded once (about 330 MB each,
cached under ``~/.cache/artune/releases``) and run on every CUDA probe (the
ROCm probes are ``tests/test_vllm_rocm.py``'s; ``bench/engine_releases.py``
covers every release on both). Without the cached wheel and without the
package registry, these tests skip and say so.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from artune import rocm
from artune.cli import main
from artune.errors import ReleaseUnavailable
from artune.formats import read_engine
from artune.formats.references import reference_set
from artune.formats.releases import fetch_release
from artune.oracles import TOPOLOGIES
from artune.oracles import vllm as oracle
from artune.table.types import Plan

MiB = 1 << 20


def release(version: str) -> Path:
    try:
        fetch_release("flashinfer-python", oracle.FLASHINFER)  # the MNNVL workspace the oracle runs
        return fetch_release("vllm", version)
    except ReleaseUnavailable as err:
        pytest.skip(f"vllm=={version} is not cached and cannot be downloaded: {err}")


@pytest.mark.parametrize("version", ["0.19.0", "0.25.0", "0.34.0"])
def test_artune_decides_as_the_release_on_every_probe(version: str) -> None:
    root = release(version)
    everything = oracle.probes(root)
    assert {p.arch for p in everything} == set(oracle.ARCHS) | set(oracle.ROCM_ARCHS)  # CUDA, and ROCm (gfx)
    probes = [p for p in everything if not rocm.is_gfx(p.arch)]  # the ROCm ones: tests/test_vllm_rocm.py
    assert len(probes) > 60_000 and all(p.nbytes % oracle.ROW == 0 for p in probes)  # whole 16-byte rows
    assert {p.world_size for p in probes} == set(range(2, 17)) | {32, 72}
    # every topology check describes: 2 ranks on 2 hosts in one NVLink domain and over a network among them
    assert {(p.world_size, p.hosts, p.nvlink) for p in probes} == set(TOPOLOGIES)
    assert {(2, 2, "rack"), (2, 2, "host"), (6, 3, "rack"), (72, 18, "rack")} <= set(TOPOLOGIES)
    engine = oracle.engine_decisions(root, probes)
    mine = oracle.artune_decisions(root, probes)
    # the answers are vLLM's: FlashInfer's all-reduce is on by default from 0.29, and takes every size
    # two-shot symmetric memory had at world sizes 2 and 4
    paths = {"custom_ar", "symm_mem_multimem", "nccl"}
    paths |= {"flashinfer_ar"} if version == "0.34.0" else {"symm_mem_two_shot"}
    assert {e for p, e in zip(probes, engine, strict=True) if p.hosts == 1 and not p.env} == paths
    differ = [(p, e, m) for p, e, m in zip(probes, engine, mine, strict=True) if e != m]
    assert differ == [], differ[:5]


def test_reference_is_the_newest_release() -> None:
    built = read_engine("vllm", str(release("0.33.0"))).tables
    ref = reference_set("vllm")
    assert set(built.tables) == set(ref.tables)
    for arch, table in ref.tables.items():
        # a plan across hosts names the multi-node rule and the files it was read from in its provenance
        assert _bare(built.tables[arch].plans) == _bare(table.plans), arch
    assert built.default is not None and ref.default is not None and built.default.plans == ref.default.plans


def _bare(plans: tuple[Plan, ...]) -> tuple[Plan, ...]:
    return tuple(replace(p, provenance=None) if p.hosts > 1 else p for p in plans)


def test_issue_examples_on_the_released_wheels(capsys) -> None:
    old, new = release("0.25.0"), release("0.33.0")
    args = ["explain", "--table", f"vllm:{old}", "--arch", "10.7", "--world-size", "8", "--size", "9MiB"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("nccl")
    assert "vLLM 0.25.0 has no row for arch 10.7: it runs its default path there (custom_ar below 8MiB" in out
    assert main(["explain", "--table", "vllm==0.25.0", "--arch", "9.0", "--world-size", "2", "--size", "63MiB"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("symm_mem_two_shot") and "caps custom_ar" in out
    assert main(["diff", f"vllm:{old}", f"vllm:{new}", "--world-size", "8", "--mode", "eager"]) == 1
    out = capsys.readouterr().out
    rubin = out[out.index("arch=10.7") :]
    assert "ws=8 mode=eager [8MiB, 64MiB]: A nccl | B symm_mem_multimem > nccl" in rubin
    assert main(["check", "vllm==0.33.0"]) == 1
    lines = capsys.readouterr().out.splitlines()
    problems = [line for line in lines if not re.search(r": note [A-Z]\d{3}: ", line)]
    assert 1 <= len(problems) <= 8
    assert any("10.7 = 10.3 in 3 of 3 tables: measured, or inherited?" in line for line in problems)
    assert any("have no path on any arch" in line and "nccl" in line for line in problems)
    assert all(re.search(r": (warning|error) [EVN]\d{3}: ", line) for line in problems)
