"""The harness run for real on two spawned ranks (gloo on CPU): agreement, correctness, failures."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
import torch

from artune.errors import ArtuneError
from artune.launch import RankContext, run_ranks
from artune.measure.harness import candidates_for, measure, memcpy_bandwidth
from artune.measure.records import Candidate, Header, Measurement, MeasurementLog
from artune.measure.reducers import FunctionReducer, process_group_all_reduce

SIZES = [4096, 65536 + 8]


def skip_reduction(tensor: torch.Tensor, op: str, params: Mapping[str, object]) -> torch.Tensor:
    """Negative control: returns the local values unreduced (what DeepSpeed does for int32)."""
    return tensor


def reduce_then_perturb(tensor: torch.Tensor, op: str, params: Mapping[str, object]) -> torch.Tensor:
    """Negative control: a real all-reduce that then corrupts ``params["every"]``-th element."""
    process_group_all_reduce(tensor, op, {})
    tensor[:: int(params["every"])] += 1  # type: ignore[call-overload]
    return tensor


def always_raises(tensor: torch.Tensor, op: str, params: Mapping[str, object]) -> torch.Tensor:
    raise RuntimeError("this algorithm is broken")


def _rank(ctx: RankContext) -> tuple[list[Measurement], list[Measurement], list[Measurement], float]:
    reducer = FunctionReducer(
        {
            "gloo": process_group_all_reduce,
            "skip": skip_reduction,
            "perturb": reduce_then_perturb,
            "raises": always_raises,
        }
    )
    cands = [
        Candidate("gloo"),
        Candidate("skip"),
        Candidate.of("perturb", {"every": 7}),
        Candidate("raises"),
        Candidate("not_here"),
    ]
    fp32 = measure(reducer, cands, SIZES, budget_s=0.02, min_iters=3, warmup_s=0.0)
    bf16 = measure(reducer, ["gloo"], [4096], dtype=torch.bfloat16, op="max", budget_s=0.01, min_iters=3)
    nothing_runs = measure(reducer, ["skip", "raises"], [4096], budget_s=0.01)
    return fp32, bf16, nothing_runs, memcpy_bandwidth(1 << 20, budget_s=0.02)


@pytest.mark.timeout(120)
def test_measure_two_ranks(tmp_path: Path) -> None:
    results = run_ranks(_rank, 2, timeout=100)
    assert results[0] == results[1]  # identical on every rank, to the last sample
    fp32, bf16, nothing_runs, copy_gbps = results[0]
    assert copy_gbps > 0
    assert [(m.size_bytes, m.candidate.algorithm) for m in fp32] == [
        (s, a) for s in SIZES for a in ("gloo", "skip", "perturb", "raises", "not_here")
    ]
    by = {(m.size_bytes, m.candidate.algorithm): m for m in fp32}
    for size in SIZES:
        gloo = by[size, "gloo"]
        assert gloo.ok and gloo.nwrong == 0 and gloo.error == ""
        assert gloo.iters >= 3 and 0 < gloo.time_us < float("inf")
        assert gloo.p20_us <= gloo.time_us <= gloo.p80_us <= gloo.p99_us
        assert gloo.world_size == 2 and gloo.dtype == "float32" and gloo.count == size // 4
        assert gloo.burst == 3 and gloo.iters % 3 == 0 and len(gloo.call) == 16  # turns of 3, the call named

        skip = by[size, "skip"]
        assert skip.status == "invalid" and skip.nwrong > 0 and "wrong elements" in skip.error
        assert skip.samples_us == () and skip.time_us == float("inf")

        perturb = by[size, "perturb"]
        # every 7th element is wrong on both ranks
        assert perturb.status == "invalid" and perturb.nwrong == 2 * len(range(0, size // 4, 7))
        assert perturb.candidate.key == "perturb[every=7]"

        raises = by[size, "raises"]
        assert raises.status == "runtime" and "this algorithm is broken" in raises.error
        assert raises.nwrong == -1

        missing = by[size, "not_here"]
        assert missing.status == "invalid" and "not runnable here" in missing.error
        assert missing.call == skip.call == ""  # no samples, nothing to pair
    assert len({by[size, "gloo"].call for size in SIZES}) == len(SIZES)  # one name per timed size

    (m,) = bf16
    assert m.ok and m.nwrong == 0 and m.dtype == "bfloat16" and m.redop == "max" and m.count == 2048
    assert [m.status for m in nothing_runs] == ["invalid", "runtime"]

    # the results survive a log round trip, failures included
    log = MeasurementLog(tmp_path / "m.jsonl", Header.for_this_machine(2))
    log.extend(fp32)
    assert MeasurementLog(tmp_path / "m.jsonl").read() == fp32


class _Tunable(FunctionReducer):
    """A reducer that declares tunable parameters, as the Communicator does."""

    def tunables(self, name: str) -> dict[str, tuple[object, ...]]:
        return {"chunk_bytes": (4096, 65536), "spin": (True, False)} if name == "tuned" else {}


def test_candidates_for_sweeps_tunables() -> None:
    reducer = _Tunable({"plain": skip_reduction, "tuned": skip_reduction})
    assert candidates_for(reducer) == [Candidate("plain"), Candidate("tuned")]
    swept = candidates_for(reducer, ["tuned", "plain"], sweep=True)
    assert [c.key for c in swept] == [
        "tuned[chunk_bytes=4096,spin=true]",
        "tuned[chunk_bytes=4096,spin=false]",
        "tuned[chunk_bytes=65536,spin=true]",
        "tuned[chunk_bytes=65536,spin=false]",
        "plain",
    ]


def test_measure_rejects_bad_arguments() -> None:
    reducer = FunctionReducer({"skip": skip_reduction})
    with pytest.raises(ArtuneError, match="multiples of 4 bytes"):
        measure(reducer, ["skip"], [4098])
    with pytest.raises(ArtuneError, match="op 'prod'"):
        measure(reducer, ["skip"], [4096], op="prod")
    with pytest.raises(ArtuneError, match="repeat"):
        measure(reducer, ["skip", Candidate("skip")], [4096])


def _communicator_rank(ctx: RankContext) -> tuple[tuple[str, ...], list[Measurement]]:
    from artune.communicator import Communicator

    with Communicator(timeout=30) as comm:
        cands = candidates_for(comm)
        for name in comm.algorithms:  # one candidate with explicit parameters per tunable algorithm
            values = comm.tunables(name).get("chunk_bytes")
            if values:
                cands.append(Candidate.of(name, {"chunk_bytes": min(values)}))
        found = measure(comm, cands, [4096, (256 << 10) + 4], budget_s=0.02, min_iters=3)
        found += measure(comm, list(comm.algorithms), [4096], dtype=torch.bfloat16, budget_s=0.01, min_iters=3)
        return comm.algorithms, found


@pytest.mark.timeout(120)
def test_measure_communicator_algorithms() -> None:
    results = run_ranks(_communicator_rank, 2, timeout=100)
    assert results[0] == results[1]
    algorithms, found = results[0]
    assert "gloo" in algorithms
    assert {m.candidate.algorithm for m in found} == set(algorithms)
    for m in found:
        assert m.ok and m.nwrong == 0, (m.key, m.status, m.error)
        assert m.iters >= 3 and 0 < m.time_us < float("inf")
