"""Every algorithm x dtype x op x size at world sizes 2, 3, 4 against the process-group result.

One spawned run per world size does all cases (spawning costs seconds). Each
rank returns what it found wrong plus a digest of every result, so the test
can also check that results are bit-identical across ranks and that
shm_one_shot and shm_two_shot agree bit for bit.

``paths`` says which round each rank runs (rank r takes ``paths[r % len]``):
``n`` the compiled one, ``p`` the pure-Python one (``ARTUNE_SHM_NATIVE=0``).
A mixed group checks that both speak one protocol and give identical bits.
"""

from __future__ import annotations

import glob
import hashlib

import pytest
import torch

from artune.algorithms.base import NUMERIC_DTYPES
from artune.launch import RankContext, run_ranks

BUFFER_BYTES = 64 << 10  # small, so chunking is exercised cheaply
SHM = ("shm_one_shot", "shm_two_shot")
DTYPES = NUMERIC_DTYPES  # every dtype the algorithms claim
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _sizes(dtype: torch.dtype) -> list[tuple[str, int]]:
    cap = BUFFER_BYTES // dtype.itemsize
    return [
        ("empty", 0),
        ("one", 1),
        ("odd", 7),
        ("odd_1001", 1001),
        ("capacity", cap),
        ("capacity_plus_1", cap + 1),
        ("several_buffers", 2 * cap + cap // 2 + 3),
        ("offset_view", cap + 5),  # a contiguous slice starting at element 3 of a larger tensor
    ]


def _data(dtype: torch.dtype, n: int, rank: int, seed: int, integer_valued: bool) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed * 101 + rank)
    if dtype.is_floating_point and not integer_valued:
        return torch.randn(n, generator=gen, dtype=torch.float64).to(dtype)
    if dtype == torch.uint8:
        return torch.randint(0, 60, (n,), generator=gen).to(dtype)
    return torch.randint(-30, 30, (n,), generator=gen).to(dtype)


def _tolerance(dtype: torch.dtype, world: int) -> tuple[float, float]:
    eps = torch.finfo(dtype).eps
    return 4 * eps, 4 * eps * world * 8  # (rtol, atol) for sums of N(0, 1) values


def _digest(t: torch.Tensor) -> str:
    return hashlib.sha1(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def use_path(ctx: RankContext, paths: str) -> bool:
    """Pick this rank's round (before its channel is built); True when it is the compiled one."""
    import os

    native = paths[ctx.rank % len(paths)] == "n"
    os.environ["ARTUNE_SHM_NATIVE"] = "1" if native else "0"
    return native


def _correctness_rank(ctx: RankContext, paths: str) -> dict:
    import torch.distributed as dist

    from artune.algorithms import open_algorithms
    from artune.algorithms.shm import native

    want_native = use_path(ctx, paths)
    algos = open_algorithms(None, timeout=30.0, buffer_bytes=BUFFER_BYTES)
    assert algos.channel is not None, algos.shm_unavailable_reason
    if want_native and native.load()[0] is not None:
        assert algos.channel.native is not None, algos.channel.path
    if not want_native:
        assert algos.channel.native is None and "ARTUNE_SHM_NATIVE=0" in algos.channel.path
    assert algos.channel.capacity == BUFFER_BYTES
    gloo = algos.by_name["gloo"]
    problems: list[str] = []
    digests: dict[str, str] = {}
    seed = 0
    for dtype in DTYPES:
        for op in ("sum", "max", "min"):
            for integer_valued in (False, True) if dtype in FLOATS and op == "sum" else (True,):
                for label, n in _sizes(dtype):
                    seed += 1
                    case = f"{dtype}/{op}/{'int' if integer_valued else 'rand'}/{label}"
                    data = _data(dtype, n, ctx.rank, seed, integer_valued)
                    if gloo.unavailable(dtype, op) is None:
                        ref = data.clone()
                        gloo.all_reduce(ref, op, {})
                        digests[f"{case}/gloo"] = _digest(ref)
                    else:  # e.g. int16: build the reference from every rank's data
                        all_data = [_data(dtype, n, r, seed, integer_valued) for r in range(ctx.world_size)]
                        wide = torch.stack([d.to(torch.int64) for d in all_data])
                        red = {"sum": wide.sum(0), "max": wide.max(0).values, "min": wide.min(0).values}
                        ref = red[op].to(dtype) if n else data.clone()
                    results = {}
                    for name in SHM:
                        if label == "offset_view":
                            holder = torch.zeros(n + 8, dtype=dtype)
                            holder[3 : 3 + n] = data
                            out = holder[3 : 3 + n]
                            assert out.is_contiguous() and out.storage_offset() == 3
                        else:
                            out = data.clone()
                        returned = algos.by_name[name].all_reduce(out, op, {})
                        if returned is not out:
                            problems.append(f"{case}/{name}: did not return its input tensor")
                        if label == "offset_view" and (holder[:3].any() or holder[3 + n :].any()):
                            problems.append(f"{case}/{name}: wrote outside the view")
                        results[name] = out
                        digests[f"{case}/{name}"] = _digest(out)
                        exact = not dtype.is_floating_point or integer_valued or op != "sum"
                        if exact:
                            if not torch.equal(out, ref):
                                problems.append(f"{case}/{name}: differs from the reference (exact)")
                        else:
                            rtol, atol = _tolerance(dtype, ctx.world_size)
                            if not torch.allclose(out.double(), ref.double(), rtol=rtol, atol=atol):
                                err = (out.double() - ref.double()).abs().max().item()
                                problems.append(f"{case}/{name}: differs from the reference by {err}")
                    if dtype in FLOATS and op == "sum" and n:
                        # the documented order: rank 0, 1, ...; fp32 accumulation for half types
                        acc_type = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
                        acc = _data(dtype, n, 0, seed, integer_valued).to(acc_type)
                        for r in range(1, ctx.world_size):
                            acc += _data(dtype, n, r, seed, integer_valued).to(acc_type)
                        if not torch.equal(results["shm_one_shot"], acc.to(dtype)):
                            problems.append(f"{case}: not the rank-order sum with {acc_type} accumulation")
                    if not torch.equal(results["shm_one_shot"], results["shm_two_shot"]):
                        problems.append(f"{case}: shm_one_shot and shm_two_shot differ")
    # other shapes and a smaller chunk_bytes (not a multiple of the itemsize for 8-byte types)
    for name in SHM:
        for shape in [(), (3, 5), (2, 3, 4097)]:
            x = torch.full(shape, float(ctx.rank + 1))
            algos.by_name[name].all_reduce(x, "sum", {})
            if not torch.equal(x, torch.full(shape, float(sum(range(1, ctx.world_size + 1))))):
                problems.append(f"{name}: shape {shape} wrong")
        for dtype in (torch.float32, torch.bfloat16, torch.int64):
            x = _data(dtype, 5000, ctx.rank, 7, True)
            ref = x.clone()
            gloo.all_reduce(ref, "sum", {})
            for chunk in (1000, 4096, "16KiB"):
                y = x.clone()
                algos.by_name[name].all_reduce(y, "sum", {"chunk_bytes": chunk})
                if not torch.equal(y, ref):
                    problems.append(f"{name}: chunk_bytes={chunk} {dtype} wrong")
    if algos.channel.native is not None:  # the raw copies trust the bound size: another size is refused
        bound = algos.by_name["shm_one_shot"].bind(torch.Size([10]), torch.float32, "sum", {})
        try:
            bound(torch.zeros(11))
            problems.append("a bound native step took a tensor of another size")
        except ValueError as err:
            if "bound to 10 elements, got a tensor of 11" not in str(err):
                problems.append(f"wrong-size message: {err}")
    name = algos.channel.name
    dist.barrier()
    algos.close()
    algos.close()  # idempotent
    problems += _subgroup_checks(ctx)
    return {"problems": problems, "digests": digests, "name": name}


def _subgroup_checks(ctx: RankContext) -> list[str]:
    """Channels on a subgroup: group ranks, not global ranks, address slots and semaphores."""
    import torch.distributed as dist

    from artune.algorithms import open_algorithms

    world = ctx.world_size
    members = list(range(1, world)) if world > 2 else [ctx.rank]  # [1..W-1], or each rank alone
    groups = {tuple(m): dist.new_group(m) for m in ([[0], [1]] if world == 2 else [members])}
    group = groups.get(tuple(members))
    problems: list[str] = []
    if ctx.rank in members and group is not None:
        algos = open_algorithms(group, timeout=30.0, buffer_bytes=BUFFER_BYTES)
        if algos.channel is None:
            return [f"subgroup {members}: {algos.shm_unavailable_reason}"]
        for name in ("shm_one_shot", "shm_two_shot"):
            for n in (5, 40000):
                x = torch.arange(n, dtype=torch.float32) + ctx.rank
                ref = x.clone()
                algos.by_name["gloo"].all_reduce(ref, "sum", {})
                algos.by_name[name].all_reduce(x, "sum", {})
                if not torch.equal(x, ref):
                    problems.append(f"subgroup {members} {name} n={n}: wrong")
        algos.close()
    dist.barrier()
    return problems


def _check(results: list[dict]) -> None:
    for rank, res in enumerate(results):
        assert not res["problems"], f"rank {rank}: " + "\n".join(res["problems"][:20])
    first = results[0]["digests"]
    for rank, res in enumerate(results[1:], start=1):
        differ = [k for k in first if res["digests"][k] != first[k] and not k.endswith("/gloo")]
        assert not differ, f"rank {rank} differs from rank 0 (bitwise) in {differ[:10]}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("world_size", "paths"), [(2, "n"), (3, "n"), (4, "n"), (3, "p"), (3, "npn")], ids=lambda v: str(v)
)
def test_against_process_group(world_size: int, paths: str) -> None:
    results = run_ranks(_correctness_rank, world_size, paths, timeout=110)
    _check(results)
    name = results[0]["name"].lstrip("/")
    assert not glob.glob(f"/dev/shm/{name}*") and not glob.glob(f"/dev/shm/sem.{name}*")
