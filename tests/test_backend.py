"""The ``artune`` torch.distributed backend on real ranks: collectives, Work, DDP, errors, teardown."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from artune.errors import RankFailed
from artune.launch import RankContext, run_ranks

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]


def _collectives(ctx: RankContext) -> dict[str, Any]:
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc

    from artune.backend import communicator
    from artune.backend.process_group import ArtuneProcessGroup
    from artune.errors import CallMismatch

    rank, ws = ctx.rank, ctx.world_size
    # this group acts as 2 hosts (ranks 0-1 and 2): its all-reduces run through hier_shm, whose subgroups are
    # made inside the first all-reduce; the DDP test below covers one host (the flat shm algorithms)
    os.environ["ARTUNE_HOST"] = "h0" if rank < 2 else "h1"
    pg = dist.group.WORLD
    out: dict[str, Any] = {"type": type(pg).__name__, "name": pg.group_name, "backend": dist.get_backend()}
    R = dist.ReduceOp
    inputs = [torch.arange(1, 1001, dtype=torch.float32) * (r + 1) - 300 for r in range(ws)]
    stacked = torch.stack(inputs)
    wants = {
        R.SUM: stacked.sum(0),
        R.MAX: stacked.amax(0),
        R.MIN: stacked.amin(0),
        R.AVG: stacked.sum(0) / ws,
        R.PRODUCT: stacked.prod(0),
    }
    for op, want in wants.items():
        t = inputs[rank].clone()
        dist.all_reduce(t, op=op)
        assert torch.allclose(t, want), op
    # integers, a bitwise op (delegated) and bf16 (summed in fp32 by artune's algorithms)
    t = torch.full((33,), rank + 1, dtype=torch.int64)
    dist.all_reduce(t, op=R.BOR)
    assert int(t[0]) == __import__("functools").reduce(lambda a, b: a | b, range(1, ws + 1))
    t = torch.full((1 << 12,), rank + 1, dtype=torch.bfloat16)
    dist.all_reduce(t)
    assert float(t[0]) == ws * (ws + 1) / 2
    # Work: async handle, completed, its future holds the tensors
    t = torch.ones(4096)
    work = dist.all_reduce(t, async_op=True)
    out["work"] = (type(work).__name__, work.is_completed(), work.wait())
    value = work.get_future().wait()
    assert isinstance(value, list) and value[0] is t and float(t[0]) == ws
    # the coalesced form, called on the group as torch's coalescing paths do
    a, b = torch.ones(10), torch.full((3,), 2.0)
    opts = dist.AllreduceCoalescedOptions()
    pg.allreduce_coalesced([a, b], opts).wait()
    assert float(a[0]) == ws and float(b[0]) == 2 * ws
    # every other collective goes to gloo
    dist.barrier()
    x = torch.full((4,), float(rank))
    dist.broadcast(x, src=ws - 1)
    assert float(x[0]) == ws - 1
    gathered = [torch.empty(2) for _ in range(ws)]
    dist.all_gather(gathered, torch.full((2,), float(rank)))
    assert [float(g[0]) for g in gathered] == list(range(ws))
    objects: list[Any] = [None] * ws
    dist.all_gather_object(objects, {"rank": rank})
    assert objects == [{"rank": r} for r in range(ws)]
    flat = torch.empty(2 * ws)
    dist.all_gather_into_tensor(flat, torch.full((2,), float(rank)))
    assert flat.tolist() == [float(r) for r in range(ws) for _ in range(2)]
    from torch._C._distributed_c10d import AllgatherOptions

    again = torch.empty(2 * ws)
    pg._allgather_base(again, torch.full((2,), float(rank)), AllgatherOptions()).wait()  # the older name
    assert torch.equal(again, flat)
    part = torch.empty(2)
    dist.reduce_scatter_tensor(part, torch.arange(2.0 * ws))
    assert part.tolist() == [ws * (2.0 * rank), ws * (2.0 * rank + 1)]
    a2a = torch.empty(ws)
    dist.all_to_all_single(a2a, torch.full((ws,), float(rank)))
    assert a2a.tolist() == [float(r) for r in range(ws)]
    if rank == 0:
        dist.send(torch.tensor([42.0]), dst=1)
    elif rank == 1:
        got = torch.empty(1)
        dist.recv(got, src=0)
        assert float(got[0]) == 42.0
    # functional collectives (DTensor, tensor parallel) reach the backend by the group's name
    r = fc.all_reduce(torch.ones(8) * (rank + 1), "sum", pg)
    assert float(r[0]) == ws * (ws + 1) / 2
    g = fc.all_gather_tensor(torch.full((2,), float(rank)), 0, pg)
    assert g.tolist() == [float(r) for r in range(ws) for _ in range(2)]
    s = fc.reduce_scatter_tensor(torch.ones(2 * ws), "sum", 0, pg)
    assert s.tolist() == [float(ws)] * 2
    # a subgroup is another artune group, with its own name
    sub = dist.new_group([0, 1])
    if rank < 2:
        t = torch.ones(5)
        dist.all_reduce(t, group=sub)
        assert float(t[0]) == 2
        out["sub"] = (type(sub).__name__, sub.group_name != pg.group_name, sub.allreduce_calls["artune"])
    # errors: a mismatched call raises on every rank, sync and from an async handle's wait
    t = torch.ones(100 + rank)
    with pytest.raises(CallMismatch):
        dist.all_reduce(t)
    work = dist.all_reduce(torch.ones(100 + rank), async_op=True)
    out["failed_work"] = (work.is_completed(), work.is_success())
    with pytest.raises(CallMismatch):
        work.wait()
    try:
        fc.all_reduce(torch.ones(50 + rank), "sum", pg).wait()
        out["funcol_error"] = ""
    except Exception as err:
        out["funcol_error"] = f"{type(err).__name__}: {err}"
    # the same Communicator keeps working after a mismatch
    t = torch.ones(7)
    dist.all_reduce(t)
    assert float(t[0]) == ws
    # devices other than CPU and CUDA are refused by name
    try:
        dist.all_reduce(torch.ones(3, device="meta"))
        out["meta"] = ""
    except Exception as err:
        out["meta"] = str(err)
    assert isinstance(pg, ArtuneProcessGroup)
    assert pg._get_backend(torch.device("cpu")).supports_splitting in (True, False)  # what device_id= asks
    comm = communicator()
    out["algorithms"] = (comm.algorithms, comm.hosts)
    out["calls"] = dict(pg.allreduce_calls)
    out["gathers"] = dict(pg.allgather_calls)
    return out


@pytest.mark.timeout(120)
def test_collectives_work_and_errors() -> None:
    # the spelling that keeps NCCL for CUDA tensors: artune is then the whole group, and routes CUDA itself
    results = run_ranks(_collectives, 3, timeout=100, backend="cpu:artune,cuda:nccl")
    for rank, out in enumerate(results):
        assert out["type"] == "ArtuneProcessGroup" and out["backend"] == "cpu:artune,cuda:nccl" and out["name"]
        assert out["work"] == ("ArtuneWork", True, True)
        assert out["failed_work"] == (True, False)
        assert "ranks called all-reduce differently" in out["funcol_error"]
        assert "meta" in out["meta"]
        assert out["algorithms"] == (("gloo", "hier_shm"), 2)
        # sum/max/min/avg, bf16, the async call, the coalesced pair, funcol and the checks ran through artune;
        # product and bor went to gloo
        assert out["calls"]["artune"] >= 10 and out["calls"]["gloo"] == 2, out["calls"]
        # across hosts every all-gather goes to gloo (the all-reduce route is for one host)
        assert out["gathers"]["gloo"] >= 4 and "artune" not in out["gathers"], out["gathers"]
        if rank < 2:
            assert out["sub"] == ("ArtuneProcessGroup", True, 1)


def _gathers(ctx: RankContext) -> dict[str, Any]:
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc

    from artune.backend import process_group
    from artune.errors import CallMismatch

    rank, ws = ctx.rank, ctx.world_size
    pg = dist.group.WORLD

    def part(r: int, n: int, dtype: torch.dtype) -> torch.Tensor:  # any rank can build any rank's input
        x = (torch.arange(n, dtype=torch.float64) * 0.37 - 5 * r).to(dtype)
        if dtype.is_floating_point:
            x[:4] = torch.tensor([-0.0, float("inf"), float("nan"), 1e-40])  # 1e-40: subnormal in float32/bf16
        return x

    def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
        return a.shape == b.shape and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))

    checks = {}
    out = torch.empty(ws * 100, dtype=torch.bfloat16)  # 400 bytes at 2 ranks: summed as int32
    dist.all_gather_into_tensor(out, part(rank, 100, torch.bfloat16))
    checks["into_tensor_bf16"] = same_bits(out, torch.cat([part(r, 100, torch.bfloat16) for r in range(ws)]))
    out = torch.empty(ws, 3, dtype=torch.int8)  # 6 bytes: summed as uint8
    dist.all_gather_into_tensor(out, part(rank, 3, torch.int8))
    checks["into_tensor_int8"] = same_bits(out, torch.stack([part(r, 3, torch.int8) for r in range(ws)]))
    grid = torch.zeros(5, ws)  # the list form into strided views
    dist.all_gather([grid[:, r] for r in range(ws)], part(rank, 5, torch.float32))
    checks["list_strided"] = same_bits(grid.t(), torch.stack([part(r, 5, torch.float32) for r in range(ws)]))
    got = fc.all_gather_tensor(part(rank, 6, torch.float64).view(2, 3), 0, pg)  # functional: the coalesced form
    checks["functional"] = same_bits(got, torch.cat([part(r, 6, torch.float64).view(2, 3) for r in range(ws)]))
    calls_here = dict(pg.allgather_calls)
    process_group.GATHER_MAX_BYTES = 1024  # a larger size not seen before goes to gloo, with the same result
    out = torch.empty(ws * 300, dtype=torch.float32)
    dist.all_gather_into_tensor(out, part(rank, 300, torch.float32))
    checks["over_cap"] = same_bits(out, torch.cat([part(r, 300, torch.float32) for r in range(ws)]))
    calls_capped = dict(pg.allgather_calls)
    # a wrong program (ranks gathering different sizes) raises on every rank instead of hanging
    try:
        dist.all_gather_into_tensor(torch.empty(ws * (8 + rank)), torch.ones(8 + rank))
        mismatch = "no error"
    except CallMismatch as err:
        mismatch = str(err)
    out = torch.empty(ws * 4)  # and the group keeps working
    dist.all_gather_into_tensor(out, torch.full((4,), float(rank)))
    checks["after_mismatch"] = out.tolist() == [float(r) for r in range(ws) for _ in range(4)]
    return {"checks": checks, "here": calls_here, "capped": calls_capped, "mismatch": mismatch}


@pytest.mark.timeout(120)
def test_small_all_gathers_run_through_artune_bit_exact() -> None:
    for out in run_ranks(_gathers, 2, timeout=100, backend="artune"):
        assert all(out["checks"].values()), out["checks"]
        assert out["here"] == {"artune": 4}, out["here"]  # into_tensor x2, the list form, the functional one
        assert out["capped"] == {"artune": 4, "gloo": 1}, out["capped"]
        assert "ranks called all-reduce differently" in out["mismatch"], out["mismatch"]


# ---------------------------------------------------------------- DDP


def _other_torch_paths(world_size: int) -> dict[str, Any]:
    """Tensor parallel (DTensor, functional collectives) and FSDP2 on the current default group."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    def mlp() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))

    pg = dist.group.WORLD
    before = pg.allreduce_calls["artune"]
    mesh = init_device_mesh("cpu", (world_size,))
    tp = parallelize_module(mlp(), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        tp_ok = torch.allclose(tp(x), mlp()(x), atol=1e-5)
    tp_calls = pg.allreduce_calls["artune"] - before
    # FSDP2: all-gathers (through artune, as an all-reduce) and reduce-scatters (to gloo); gradients equal the
    # unsharded mean
    gathers = pg.allgather_calls["artune"]
    sharded, reference = mlp(), mlp()
    for layer in (sharded[0], sharded[2], sharded):
        fully_shard(layer, mesh=mesh)  # its default mesh is the GPU's where there is one (one per rank)
    sharded(torch.randn(8, 16, generator=torch.Generator().manual_seed(dist.get_rank()))).sum().backward()
    for r in range(world_size):
        reference(torch.randn(8, 16, generator=torch.Generator().manual_seed(r))).sum().backward()
    fsdp_ok = all(
        torch.allclose(p.grad.full_tensor(), q.grad / world_size, atol=1e-5)
        for p, q in zip(sharded.parameters(), reference.parameters(), strict=True)
    )
    return {"tp": (tp_ok, tp_calls), "fsdp2": (fsdp_ok, pg.allgather_calls["artune"] > gathers)}


def _ddp_run(ctx: RankContext, steps: int) -> dict[str, Any]:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
    # small buckets: several all-reduces per step
    ddp = DDP(model, bucket_cap_mb=0.004)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + ctx.rank)
    losses, grads = [], []
    for _ in range(steps):
        x, y = torch.randn(16, 32, generator=gen), torch.randn(16, 4, generator=gen)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        grads.append([p.grad.clone() for p in ddp.parameters()])
        losses.append(loss.detach().clone())
        opt.step()
    calls = dict(getattr(dist.group.WORLD, "allreduce_calls", {}))
    del ddp
    out = {"losses": losses, "grads": grads, "calls": calls}
    if calls:  # the artune run: the other torch paths on the same group
        out.update(_other_torch_paths(ctx.world_size))
    return out


@pytest.mark.timeout(120)
def test_ddp_equals_gloo_step_for_step_and_tp_fsdp2_run() -> None:
    gloo = run_ranks(_ddp_run, 2, 5, timeout=100)
    ours = run_ranks(_ddp_run, 2, 5, timeout=100, backend="artune")
    for rank in range(2):
        assert ours[rank]["calls"]["artune"] >= 5  # every step's buckets went through the Communicator
        assert ours[rank]["tp"] == (True, 1)  # the row-parallel layer's all-reduce went through artune
        assert ours[rank]["fsdp2"] == (True, True)  # gradients right, its all-gathers ran through artune
        for step in range(5):
            # with 2 ranks both sum a + b exactly once: bit-identical, not just close
            assert torch.equal(ours[rank]["losses"][step], gloo[rank]["losses"][step]), (rank, step)
            for mine, theirs in zip(ours[rank]["grads"][step], gloo[rank]["grads"][step], strict=True):
                assert torch.equal(mine, theirs), (rank, step)


def _ddp_peer_dies(ctx: RankContext, result_path: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ["ARTUNE_TIMEOUT"] = "5"
    ddp = DDP(torch.nn.Linear(8, 8))
    for _ in range(2):  # good steps: the Communicator exists, DDP has rebuilt its buckets (a gloo broadcast)
        ddp(torch.randn(4, 8)).sum().backward()
    if ctx.rank == 1:
        os._exit(0)
    try:
        ddp(torch.randn(4, 8)).sum().backward()
        Path(result_path).write_text("no error")
    except Exception as err:
        Path(result_path).write_text(f"{type(err).__name__}: {err}")
    dist.group.WORLD.shutdown()


@pytest.mark.timeout(60)
def test_ddp_sees_a_dead_peer_as_an_error_not_a_crash(tmp_path: Path) -> None:
    result = tmp_path / "result.txt"
    with pytest.raises(RankFailed):
        run_ranks(_ddp_peer_dies, 2, str(result), timeout=40, backend="artune", env={"ARTUNE_TIMEOUT": "5"})
    text = result.read_text()
    assert text.startswith("RuntimeError") and "rank(s) [1]" in text, text
    # the fix in the backend's words: a DDP user made a process group, never a Communicator
    assert "communicator" not in text.lower() and 'init_process_group("artune") again' in text, text


# ---------------------------------------------------------------- unmodified programs, teardown

_PROGRAM = """
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

def worker(rank, world_size, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("artune", rank=rank, world_size=world_size)   # no `import artune` anywhere
    ddp = DDP(torch.nn.Linear(64, 64))
    for _ in range(3):
        ddp(torch.randn(8, 64)).sum().backward()
    assert type(dist.group.WORLD).__name__ == "ArtuneProcessGroup"
    assert dist.group.WORLD.allreduce_calls["artune"] >= 3
    dist.destroy_process_group()      # the DDP module still holds the group: its inner gloo must go anyway
    print(f"rank {rank} ok", flush=True)  # one write: the ranks share stdout

if __name__ == "__main__":
    mp.spawn(worker, args=(int(sys.argv[1]), int(sys.argv[2])), nprocs=int(sys.argv[1]))
"""


def _entry_point() -> str:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["entry-points"]["torch.backends"]["artune"]


def _fake_install(where: Path) -> None:
    """Declare the entry point the way an installed distribution does (what `pip install` writes)."""
    info = where / "artune_entry_point_probe-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: artune-entry-point-probe\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[torch.backends]\nartune = {_entry_point()}\n")


@pytest.mark.timeout(90)
def test_unmodified_program_uses_the_entry_point_and_exits_cleanly(tmp_path: Path) -> None:
    from artune.launch import free_port

    _fake_install(tmp_path)
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_PROGRAM))
    paths = [str(tmp_path), str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    proc = subprocess.run(
        [sys.executable, str(script), "2", str(free_port())], env=env, capture_output=True, text=True, timeout=80
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count(" ok") == 2
    assert "terminate called" not in proc.stderr


def test_entry_point_is_declared_and_registers() -> None:
    import torch.distributed as dist

    module, _, func = _entry_point().partition(":")
    assert (module, func) == ("artune.backend", "autoload")
    getattr(__import__(module, fromlist=[func]), func)()
    assert "ARTUNE" in dist.Backend._plugins
    assert dist.Backend.backend_capability["artune"] == ["cpu", "cuda"]


def test_installed_metadata_declares_the_entry_point() -> None:
    try:
        dist_info = importlib.metadata.distribution("artune")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("artune is not installed (pip install -e .)")
    declared = {ep.name: ep.value for ep in dist_info.entry_points if ep.group == "torch.backends"}
    if not declared and dist_info.locate_file("").resolve() != (ROOT / "src").resolve():
        pytest.skip("the installed artune is another checkout, installed before the entry point existed")
    assert declared == {"artune": _entry_point()}
