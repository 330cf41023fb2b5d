"""``hier_shm`` across simulated hosts (``ARTUNE_HOST``): correctness against gloo, plans, faults."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from artune.errors import RankFailed
from artune.launch import RankContext, run_ranks

DTYPES = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int8,
    torch.uint8,
    torch.int32,
    torch.int64,
)
OPS = ("sum", "max", "min")
NUMELS = (0, 1, 1000)  # every dtype and op
# several 64 KiB chunks: the pipelined path, in each reduction kind (fp32 accumulation of halves included)
CHUNKED = ((torch.float32, "sum"), (torch.bfloat16, "sum"), (torch.int64, "max"), (torch.float64, "min"))


def _hosts(split: tuple[int, ...]) -> list[str]:
    return [f"h{h}" for h, n in enumerate(split) for _ in range(n)]


def _against_gloo(ctx: RankContext, splits: list[tuple[int, ...]], table_path: str) -> list[dict[str, Any]]:
    import torch.distributed as dist

    import artune

    torch_ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
    out = []
    for split in splits:
        os.environ["ARTUNE_HOST"] = _hosts(split)[ctx.rank]
        # the start-up self-check runs hier_shm on the first split only (it costs a few calls per split)
        check = split == splits[0]
        with artune.Communicator(table=table_path, timeout=20, buffer_bytes=64 * 1024, check=check) as comm:
            seen = {"split": split, "algorithms": comm.algorithms, "hosts": comm.hosts}
            cases = [(n, d, o) for n in NUMELS for d in DTYPES for o in OPS] + [(40_001, d, o) for d, o in CHUNKED]
            for numel, dtype, op in cases:
                gen = torch.Generator().manual_seed(numel * 31 + DTYPES.index(dtype))
                inputs = [torch.randint(-8, 8, (numel,), generator=gen).to(dtype) for _ in range(ctx.world_size)]
                mine, reference = inputs[ctx.rank].clone(), inputs[ctx.rank].clone()
                comm.all_reduce(mine, op=op, algorithm="hier_shm")
                dist.all_reduce(reference, op=torch_ops[op])
                assert torch.equal(mine, reference), (split, numel, dtype, op)
            # the table's plan for this topology picks it, and a plain call runs it
            decision = comm.decide(torch.ones(1000))
            seen["decision"] = (decision.algorithm, decision.hosts)
            t = torch.full((5000,), float(ctx.rank))
            comm.all_reduce(t)
            assert float(t[0]) == sum(range(ctx.world_size))
            out.append(seen)
        if split == (2, 2):
            seen["tuned"] = _tune(comm_table=table_path)
    return out


def _tune(comm_table: str) -> tuple:
    """A tiny ``tune`` across the current simulated hosts: it measures hier_shm against gloo."""
    import artune
    from artune.tune.config import TuneConfig
    from artune.tune.measurer import CachedMeasurer, CommMeasurer
    from artune.tune.tuner import tune_world

    config = TuneConfig(budget_s=1.5, min_size=4096, max_size=64 << 10, regret_sizes=2)
    with artune.Communicator(table=comm_table, timeout=20, check=False) as comm:
        result = tune_world(CachedMeasurer(CommMeasurer(comm)), config)
    return result.algorithms, result.plan


def _bundled_table(tmp_path: Path) -> str:
    """The bundled CPU table, whose 2-host plan sends every size to hier_shm."""
    from artune.table import dump_table
    from artune.table.bundled import cpu_default

    path = tmp_path / "bundled.toml"
    dump_table(cpu_default(), path)
    return str(path)


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "splits",
    [
        [(1, 1)],
        [(2, 1), (1, 1, 1)],
        [(2, 2), (3, 1)],
        [(2, 2, 1), (1, 4)],
    ],
    ids=lambda s: "ws" + str(sum(s[0])),
)
def test_hier_shm_equals_gloo_over_simulated_splits(tmp_path: Path, splits: list[tuple[int, ...]]) -> None:
    world_size = sum(splits[0])
    results = run_ranks(_against_gloo, world_size, splits, _bundled_table(tmp_path), timeout=200)
    for per_rank in results:
        for seen, split in zip(per_rank, splits, strict=True):
            assert seen["hosts"] == len(split)
            # no single-host shm across simulated hosts: only the process group and hier_shm
            assert seen["algorithms"] == ("gloo", "hier_shm")
            # 3 hosts have no plan: the 2-host plans apply (nearest smaller number of hosts)
            assert seen["decision"] == ("hier_shm", 2)
            if "tuned" in seen:  # tune measures hier_shm against gloo and plans for 2 hosts
                algorithms, plan = seen["tuned"]
                assert algorithms == ("gloo", "hier_shm")
                assert (plan.world_size, plan.hosts, plan.fallback) == (4, 2, "gloo")
                assert set(plan.algorithms) <= {"gloo", "hier_shm"}


def _faults(ctx: RankContext, result_dir: str) -> None:
    import artune
    from artune.errors import CallMismatch, PeerTimeout

    os.environ["ARTUNE_HOST"] = _hosts((2, 2))[ctx.rank]
    out = Path(result_dir) / f"rank{ctx.rank}.txt"
    with artune.Communicator(timeout=4, buffer_bytes=64 * 1024) as comm:
        t = torch.ones(1000)
        comm.all_reduce(t, algorithm="hier_shm")
        # a mismatch on one host reaches every host; the algorithm stays usable
        try:
            comm.all_reduce(torch.ones(1000 + (ctx.rank == 3)), algorithm="hier_shm")
            mismatch = "no error"
        except CallMismatch as err:
            mismatch = f"CallMismatch: {err}"
        t = torch.ones(1000)
        comm.all_reduce(t, algorithm="hier_shm")
        assert float(t[0]) == 4
        if ctx.rank == 3:
            os._exit(0)  # a non-leader of host h1 dies
        try:
            comm.all_reduce(torch.ones(200_000), algorithm="hier_shm")
            death = "no error"
        except PeerTimeout as err:
            death = f"PeerTimeout {list(err.missing)}: {err}"
        out.write_text(mismatch + "\n" + death)


@pytest.mark.timeout(90)
def test_faults_across_simulated_hosts_name_the_rank_and_host(tmp_path: Path) -> None:
    with pytest.raises(RankFailed):  # rank 3 leaves without a result
        run_ranks(_faults, 4, str(tmp_path), timeout=60)
    for rank in range(3):
        mismatch, death = (tmp_path / f"rank{rank}.txt").read_text().split("\n", 1)
        assert mismatch.startswith("CallMismatch") and "differently" in mismatch, (rank, mismatch)
        assert death.startswith("PeerTimeout [3]") and "rank 3 (host" in death and "/h1)" in death, (rank, death)


def _gloo_mismatch(ctx: RankContext) -> list[str]:
    """A table whose plan across hosts is gloo for every size: a mismatched gloo call must still be caught."""
    from artune import CallMismatch, Communicator
    from artune.table.types import Band, Plan, Platform, Provenance, Table

    os.environ["ARTUNE_HOST"] = _hosts((2, 1))[ctx.rank]
    one_host = Plan(2, "eager", (Band(None, ("shm_one_shot",)),), "gloo")
    across = Plan(2, "eager", (), "gloo", hosts=2)  # without it, the bundled default's hier_shm plan would answer
    table = Table(Platform("cpu", "x86_64"), Provenance("measured"), (one_host, across))
    seen = []
    with Communicator(table=table, timeout=30, check=False) as comm:
        for numel in (100 + ctx.rank, 5 * (ctx.rank == 2) + 3):
            t = torch.ones(numel)
            seen.append(comm.decide(t).algorithm)
            with pytest.raises(CallMismatch):
                comm.all_reduce(t)
        t = torch.ones(7)
        comm.all_reduce(t)  # still usable after a mismatch
        seen.append(str(float(t[0])))
    return seen


@pytest.mark.timeout(90)
def test_a_mismatched_gloo_call_across_hosts_raises_instead_of_aborting() -> None:
    # before, gloo saw the mismatched sizes itself and aborted the process (SIGABRT)
    assert run_ranks(_gloo_mismatch, 3, timeout=60) == [["gloo", "gloo", "3.0"]] * 3
