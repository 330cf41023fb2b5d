"""artune decides as SGLang's released code does: the oracle (``bench/oracles/sglang.py``) runs the release's own
``CustomAllReduceV2`` on stand-ins for the GPU, probe by probe, beside artune's reading of the same release.

The wheels come from the package registry once (``artune.formats.releases``); where one is not cached and the
registry cannot be reached, the test skips and says so. The full matrix, every release, is
``python bench/oracles/sglang.py``.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from artune import catalog
from artune.formats.releases import ReleaseUnavailable, fetch_release
from artune.table.decide import decide
from artune.table.references import reference_set

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
from oracles import Probe
from oracles import sglang as oracle

MiB = 1 << 20


def release(version: str) -> Path:
    try:
        return fetch_release("sglang", version)
    except ReleaseUnavailable as err:
        pytest.skip(f"sglang=={version} is not cached and cannot be downloaded: {err}")


@pytest.mark.parametrize(
    ("version", "minimum", "algorithms"),
    [
        ("0.5.23", 5000, {"1shot_push", "2shot_push", "1shot_pull", "2shot_pull_mc", "2shot_pull", "nccl"}),
        ("0.5.20", 5000, {"1shot_push", "1shot_pull", "2shot_pull_mc", "2shot_pull", "nccl"}),
        ("0.5.10", 1000, {"1shot_push", "1shot_pull", "2shot_pull", "nccl"}),
    ],
)
def test_every_probe_decides_as_the_release(version: str, minimum: int, algorithms: set[str]) -> None:
    root = release(version)
    probes = oracle.probes(root)
    engine = oracle.engine_decisions(root, probes)
    ours = oracle.artune_decisions(root, probes)
    wrong = [(p, e, a) for p, e, a in zip(probes, engine, ours, strict=True) if e != a]
    assert not wrong, f"{len(wrong)} of {len(probes)} differ, first: {wrong[:5]}"
    assert len(probes) >= minimum
    assert set(Counter(engine)) == algorithms  # the probes reach every algorithm the release runs


def test_the_oracle_runs_the_release_not_artune() -> None:
    """Facts of 0.5.23 the engine's own code answers: the workspace clip, multicast, a float range's ceiling."""
    root = release("0.5.23")
    cases = [
        (Probe("10.0", 8, "graph", True, 4 * MiB), "2shot_push"),
        (Probe("9.0", 2, "eager", True, 16 * MiB), "1shot_push"),
        (Probe("9.0", 2, "eager", True, 16 * MiB + 16), "nccl"),  # the rows say 1shot_push to 32 MB
        (Probe("10.7", 8, "eager", True, 2556432), "2shot_pull_mc"),  # Range(2.438 * MB, ...) starts at 2556429
        (Probe("10.7", 8, "eager", False, 2556432), "2shot_pull"),
        (Probe("10.7", 8, "eager", True, 2556416), "1shot_push"),  # int(2.438 * MB) = 2556428
        (Probe("10.0", 12, "eager", True, 1 * MiB), "nccl"),  # no config at 12 ranks
        (Probe("10.0", 8, "eager", True, 1 * MiB + 8), "nccl"),  # not a multiple of 16 bytes
        (Probe("10.3", 4, "graph", True, 4 * MiB), "2shot_push"),  # 10.3 runs the SM100 configs
        (Probe("12.0", 16, "graph", True, 2 * MiB), "2shot_pull"),  # the default configs
    ]
    assert oracle.engine_decisions(root, [p for p, _ in cases]) == [want for _, want in cases]


def test_reference_sglang_decides_as_release_0_5_23() -> None:
    root = release("0.5.23")
    refs = reference_set("sglang")
    probes = oracle.probes(root)
    engine = oracle.engine_decisions(root, probes)
    tables = {arch: refs.resolve(arch) for arch in oracle.ARCHS}
    ours = [
        decide(
            tables[p.arch],
            p.nbytes,
            p.world_size,
            p.mode,
            catalog.available(p.world_size, p.dtype, p.nbytes, p.multicast),
        ).algorithm
        for p in probes
    ]
    wrong = [(p, e, a) for p, e, a in zip(probes, engine, ours, strict=True) if e != a]
    assert not wrong, f"{len(wrong)} of {len(probes)} differ, first: {wrong[:5]}"


def test_the_reader_keeps_the_rows_as_written_and_says_why_they_differ() -> None:
    from artune.formats import read_engine

    tables = read_engine("sglang", str(release("0.5.23"))).tables
    plan = tables.resolve("10.7").plan(2, "eager")
    assert plan is not None and plan.notes
    assert plan.spans() == [(0, 16 * MiB, ("1shot_push",)), (16 * MiB + 1, None, ("nccl",))]
    assert plan.spans(as_written=True)[0] == (0, 128 * MiB, ("1shot_push",))
    decision = decide(tables.resolve("10.7"), 64 * MiB, 2, "eager")
    assert decision.algorithm == "nccl"
    assert "as written: 1shot_push (16MiB, 128MiB]" in decision.reason and "16MiB default workspace" in decision.reason
    assert "10.0" in " ".join(tables.resolve("10.3").borrowed)  # SGLang's dispatch, not a family chain
