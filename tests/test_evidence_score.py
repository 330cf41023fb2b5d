"""Scoring a row on a sweep as the engine runs it, and the best row vLLM's knobs allow, against hand scoring.

The B300 world-size-6 fixture (tests/fixtures/evidence/vllm/invented-sm103-ws6.json) has invented numbers
shaped like the issue's case: vLLM's custom all-reduce runs its 2-stage kernel from 256 KiB up to the row's
custom-AR cap, where multimem is much faster. The independent scoring below reads the JSON with ``json`` and
applies vLLM's rules by hand (csrc/custom_all_reduce.cuh's switch; the 10.3 ws=6 rows of vLLM 0.25.0/0.33.0:
custom_ar below 8 MiB, symmetric memory multimem up to 32 MiB, pynccl above).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from artune.errors import EvidenceError, OverrideError, ReleaseUnavailable
from artune.evidence import read_evidence
from artune.evidence.best import best_row
from artune.evidence.score import score_table
from artune.formats.references import reference_set
from artune.formats.releases import fetch_release
from artune.formats.vllm import write as vllm_write
from artune.formats.vllm.rules import custom_ar_kernel
from artune.sources import open_source
from artune.table.types import Band, Plan, Platform, Provenance, Table

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"
SWEEPS = Path(__file__).parents[1] / "src" / "artune" / "costmodel" / "data"  # the published vLLM sweeps
B300 = FIXTURES / "vllm" / "invented-sm103-ws6.json"
KiB, MiB = 1 << 10, 1 << 20


@pytest.fixture
def vllm_table():
    """``vllm==VERSION@ARCH`` (the release's wheel, cached; skipped offline without it)."""

    def get(version: str, arch: str) -> Table:
        try:
            fetch_release("vllm", version)
        except ReleaseUnavailable as err:
            pytest.skip(f"vllm=={version} is not cached and cannot be downloaded: {err}")
        return open_source(f"vllm=={version}@{arch}").tables[0]

    return get


def hand_column(nbytes: int) -> str:
    """vLLM 0.33.0 at 10.3 ws=6, by hand: custom_ar < 8 MiB (1-stage < 256 KiB), multimem <= 32 MiB, pynccl."""
    if nbytes < 8 * MiB:
        return "ca_1stage" if nbytes < 256 * KiB else "ca_2stage"
    return "symm_mem_multimem" if nbytes <= 32 * MiB else "pynccl"


def hand_score(column_of) -> float:
    data = json.loads(B300.read_text())
    logs = []
    for seq, entry in data["results"].items():
        timings = entry["timings"]
        logs.append(math.log(timings[column_of(int(seq) * 8192 * 2)] / min(timings.values())))
    return math.exp(sum(logs) / len(logs))


def test_custom_ar_kernel_switch_follows_vllms_source() -> None:
    assert custom_ar_kernel(2, 64 * MiB)[0] == "1stage"
    assert [custom_ar_kernel(4, n)[0] for n in (512 * KiB - 16, 512 * KiB)] == ["1stage", "2stage"]
    for ws in (6, 8):
        assert [custom_ar_kernel(ws, n)[0] for n in (256 * KiB - 16, 256 * KiB)] == ["1stage", "2stage"]
    assert custom_ar_kernel(6, MiB, "oneshot")[0] == "1stage" and custom_ar_kernel(2, 16, "twoshot")[0] == "2stage"
    with pytest.raises(OverrideError, match="1stage, oneshot, 2stage, twoshot"):
        custom_ar_kernel(6, MiB, "3stage")
    # the C++ ships compiled: the rule is the one commit's artune read, and a release's reason says so
    why = custom_ar_kernel(4, MiB, release="vLLM 0.33.0")[1]
    assert "vllm-project/vllm@c9eabec7d862" in why and "unverified for vLLM 0.33.0" in why


@pytest.mark.parametrize("version", ["0.25.0", "0.33.0"])
def test_as_run_score_matches_an_independent_scoring(version: str, vllm_table) -> None:
    sweep = read_evidence(B300)
    score = score_table(vllm_table(version, "10.3"), sweep, "10.3")
    expected = hand_score(hand_column)
    assert score.geomean == pytest.approx(expected, abs=1e-9)
    assert expected == pytest.approx(1.1955, abs=1e-4)
    worst = score.worst
    assert worst is not None and (worst.size, worst.kernel, worst.fastest) == (
        4 * MiB,
        "custom_ar/2stage",
        "symm_mem_multimem",
    )
    assert worst.regret == pytest.approx(62.0 / 28.0)
    at_1m = next(s for s in score.sizes if s.size == MiB)
    assert (at_1m.algorithm, at_1m.kernel, at_1m.column) == ("custom_ar", "custom_ar/2stage", "ca_2stage")
    assert "256KiB" in at_1m.why and not score.unscored


def test_forcing_the_one_stage_kernel_scores_its_column(vllm_table) -> None:
    sweep = read_evidence(B300)
    score = score_table(vllm_table("0.33.0", "10.3"), sweep, custom_ar_algo="1stage")
    assert score.geomean == pytest.approx(hand_score(lambda n: "ca_1stage" if n < 8 * MiB else hand_column(n)))


def test_best_row_is_found_in_vllms_knobs_and_reads_back_as_scored(vllm_table) -> None:
    sweep = read_evidence(B300)
    base = vllm_table("0.33.0", "10.3")
    best = best_row("vllm", sweep, "10.3", base)
    as_run = score_table(base, sweep, "10.3").geomean
    assert best.score.geomean is not None and as_run is not None
    # by hand: custom_ar (1-stage) below 256 KiB, multimem to 64 MiB, pynccl at 128 MiB; only 256 KiB, where
    # vLLM's switch has left the 1-stage kernel, misses the fastest column (10.8 vs 10.5 us)
    by_hand = hand_score(lambda n: "ca_1stage" if n < 256 * KiB else "symm_mem_multimem" if n <= 64 * MiB else "pynccl")
    assert best.score.geomean == pytest.approx(by_hand)
    assert best.score.geomean <= as_run / 1.10  # at least 10% better than the row as run
    assert [s.size for s in best.unreachable] == [256 * KiB] and best.bound_gap == pytest.approx(by_hand)
    assert dict(best.knobs)["_WORLD_SIZES_MULTIMEM"] == "yes"
    # the pasted rows, read back as vLLM reads them, decide as scored
    assert "CUSTOM_ALL_REDUCE_MAX_SIZES" in best.text and "SYMM_MEM_ALL_REDUCE_MAX_SIZES" in best.text
    custom, symm, multimem, fi = vllm_write.project(best.table)
    assert score_table(vllm_write.reread("10.3", custom, symm, multimem, fi), sweep).geomean == best.score.geomean
    # the other world sizes keep the base's rows
    assert custom[2] == vllm_write.project(base)[0][2]


def test_a_kernel_the_sweep_did_not_measure_is_unscored_never_substituted() -> None:
    sweep = read_evidence(SWEEPS / "ds2c-sm103-ws2.json")  # no ca_* columns
    score = score_table(reference_set("vllm").resolve("10.3"), sweep, "10.3")
    assert score.unscored and all(s.kernel.startswith(("custom_ar/", "flashinfer/")) for s in score.unscored)
    assert all(s.column == "" and s.regret is None for s in score.unscored)
    assert "unscored" in score.summary()
    scored_kernels = {s.kernel for s in score.scored}
    assert scored_kernels <= {c.kernel for c in sweep.columns}


def test_an_artune_table_is_scored_by_its_algorithms_kernels() -> None:
    sweep = read_evidence(B300)
    plan = Plan(6, "graph", (Band(4 * MiB, ("symm_mem_multimem",)),), "nccl")
    table = Table(Platform("cuda", "10.3"), Provenance("measured"), (plan,))
    score = score_table(table, sweep)
    assert score.geomean == pytest.approx(hand_score(lambda n: "symm_mem_multimem" if n <= 4 * MiB else "pynccl"))


def test_no_row_without_measured_kernels_and_other_engines_are_refused() -> None:
    sweep = read_evidence(FIXTURES / "sglang" / "invented-jit-ws4.txt", world_size=4)
    with pytest.raises(EvidenceError, match="no vLLM row"):
        best_row("vllm", sweep, "10.0")
    with pytest.raises(EvidenceError, match="covers vllm"):
        best_row("sglang", read_evidence(B300), "10.3")


def test_review_scores_both_sides_and_the_best_row_as_by_hand(vllm_table) -> None:
    """What ``artune review --evidence`` prints for a sweep (``artune.review.evidence``), against hand scoring."""
    from artune.review import build_review, open_side

    vllm_table("0.25.0", "10.3"), vllm_table("0.33.0", "10.3")  # skips where the wheels cannot be had
    before, after = open_side("BEFORE", "vllm==0.25.0"), open_side("AFTER", "vllm==0.33.0")
    review = build_review(before, after, evidence=[f"{B300}@10.3"])
    assert review.evidence is not None
    (sweep,) = review.evidence.sweeps
    expected = hand_score(hand_column)
    for side in (sweep.sides.before, sweep.sides.after):
        assert side.geomean == pytest.approx(expected, abs=0.01)
        assert side.worst == pytest.approx(62.0 / 28.0)
    assert sweep.best.geomean is not None and sweep.best.geomean <= expected / 1.10
    assert "CUSTOM_ALL_REDUCE_MAX_SIZES" in sweep.best.row
