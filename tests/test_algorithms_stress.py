"""Many consecutive calls: no descriptor or memory growth, and no collapse when ranks outnumber cores."""

from __future__ import annotations

import glob
import os
import random

import pytest
import torch

from artune.launch import RankContext, run_ranks

SHM = ("shm_one_shot", "shm_two_shot")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _many_calls_rank(ctx: RankContext, calls: int) -> dict:
    from artune.algorithms import open_algorithms

    algos = open_algorithms(None, timeout=30.0, buffer_bytes=16 << 10)
    assert algos.channel is not None
    rng = random.Random(1234)  # same sequence on every rank
    dtypes = (torch.float32, torch.bfloat16, torch.float16, torch.int32)
    wrong = 0
    fds = rss = 0
    for i in range(calls):
        if i == 500:  # after warm-up (view cache and allocator pools filled)
            fds, rss = _open_fds(), _rss_bytes()
        n = rng.choice((0, 1, rng.randrange(2, 64), rng.randrange(64, 6000)))
        dtype = rng.choice(dtypes)
        name = rng.choice(SHM)
        op = rng.choice(("sum", "max", "min"))
        chunk = rng.choice((None, None, 2048))
        base = torch.arange(n, dtype=torch.int64) % 17
        x = (base + ctx.rank * (i % 5)).to(dtype)
        algos.by_name[name].all_reduce(x, op, {} if chunk is None else {"chunk_bytes": chunk})
        parts = [base + r * (i % 5) for r in range(ctx.world_size)]
        expected = {
            "sum": sum(parts),
            "max": torch.stack(parts).max(0).values if n else base,
            "min": torch.stack(parts).min(0).values if n else base,
        }[op].to(dtype)
        wrong += not torch.equal(x, expected)
    grown = {"fds": _open_fds() - fds, "rss": _rss_bytes() - rss}
    name = algos.channel.name
    algos.close()
    return {"wrong": wrong, "grown": grown, "fds_after_close": _open_fds(), "name": name}


@pytest.mark.timeout(120)
def test_ten_thousand_calls_without_growth() -> None:
    results = run_ranks(_many_calls_rank, 2, 10_000, timeout=110)
    for rank, res in enumerate(results):
        assert res["wrong"] == 0, f"rank {rank}: {res['wrong']} wrong results"
        assert res["grown"]["fds"] == 0, f"rank {rank}: open descriptors grew by {res['grown']['fds']}"
        assert res["grown"]["rss"] < 4 << 20, f"rank {rank}: RSS grew by {res['grown']['rss']} bytes"
    name = results[0]["name"].lstrip("/")
    assert not glob.glob(f"/dev/shm/{name}*") and not glob.glob(f"/dev/shm/sem.{name}*")


def _oversubscribed_rank(ctx: RankContext, calls: int) -> dict:
    from artune.algorithms import open_algorithms

    algos = open_algorithms(None, timeout=30.0, buffer_bytes=64 << 10)
    assert algos.channel is not None
    ok = True
    for name in SHM:
        x = torch.empty(1024)
        for i in range(calls):
            x.fill_(float(ctx.rank + i))
            algos.by_name[name].all_reduce(x, "sum", {})
            ok &= bool(x[0].item() == sum(r + i for r in range(ctx.world_size)))
    algos.close()
    return {"ok": ok}


@pytest.mark.timeout(120)
def test_more_ranks_than_cores_completes() -> None:
    world = max(4, 2 * len(os.sched_getaffinity(0)))  # at least 2 ranks per core
    results = run_ranks(_oversubscribed_rank, world, 300, timeout=110)
    assert all(r["ok"] for r in results)
