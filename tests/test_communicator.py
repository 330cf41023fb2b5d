"""The Communicator end to end on real ranks: table selection, agreement, dispatch, fallback, faults."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from artune.launch import RankContext, run_ranks
from artune.table import dump_table
from artune.table.bundled import cpu_default

MiB = 1 << 20


def _reference(rank_inputs: list[torch.Tensor]) -> torch.Tensor:
    """Sum in rank order with fp32 accumulation: what every artune algorithm computes."""
    acc = rank_inputs[0].to(torch.float32)
    for x in rank_inputs[1:]:
        acc = acc + x.to(torch.float32)
    return acc.to(rank_inputs[0].dtype)


def _inputs(world_size: int, numel: int, dtype: torch.dtype, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(-8, 8, (numel,), generator=gen).to(dtype) for _ in range(world_size)]


def _three_band_table(tmp_path: Path) -> Path:
    """A table whose bands route small sizes to one-shot, 16 KiB-512 KiB to two-shot and larger ones to gloo."""
    path = tmp_path / "t.toml"
    dump_table(cpu_default(), path)
    text = path.read_text().replace('upto = "inf"', 'upto = "512KiB"').replace('"1MiB"', '"16KiB"')
    path.write_text(text)
    return path


def _dispatch(ctx: RankContext, table_path: str) -> dict:
    import artune

    out: dict = {}
    with artune.Communicator(table=table_path, timeout=20, buffer_bytes=64 * 1024) as comm:
        out["algorithms"] = comm.algorithms
        out["table"] = comm.table.name
        for numel in (0, 1, 1000, 100_000, 300_001):
            for dtype in (torch.float32, torch.bfloat16):
                inputs = _inputs(ctx.world_size, numel, dtype, seed=numel)
                t = inputs[ctx.rank].clone()
                decision = comm.decide(t)
                comm.all_reduce(t)
                assert torch.equal(t, _reference(inputs)), (numel, dtype, decision.algorithm)
                out.setdefault("chosen", set()).add(decision.algorithm)
        # forced algorithm and parameters
        for name in comm.algorithms:
            inputs = _inputs(ctx.world_size, 5000, torch.float32, seed=1)
            t = inputs[ctx.rank].clone()
            comm.all_reduce(t, algorithm=name)
            assert torch.equal(t, _reference(inputs)), name
        # a non-contiguous view is reduced through a copy and written back
        base = torch.arange(40, dtype=torch.float32).reshape(8, 5) * (ctx.rank + 1)
        view = base[:, 1]
        comm.all_reduce(view)
        factor = sum(range(1, ctx.world_size + 1))
        assert torch.equal(base[:, 1], torch.arange(1, 40, 5, dtype=torch.float32) * factor)
        # a tensor that requires grad is reduced outside autograd, as torch.distributed does
        leaf = torch.ones(4, 4, requires_grad=True)
        comm.all_reduce(leaf.t())
        assert torch.equal(leaf.detach(), torch.full((4, 4), float(ctx.world_size)))
        # max/min, and an integer dtype
        t = torch.tensor([float(ctx.rank), -float(ctx.rank)])
        comm.all_reduce(t, op="max")
        assert t.tolist() == [ctx.world_size - 1, 0.0]
        t = torch.full((7,), ctx.rank + 1, dtype=torch.int32)
        comm.all_reduce(t)
        assert t.tolist() == [factor] * 7
        # a forced algorithm is honoured after the table's route for the same call was cached
        t = torch.ones(5000)
        comm.all_reduce(t)
        try:
            comm.all_reduce(t, algorithm="gloo" if ctx.rank == 0 else "shm_one_shot")
        except artune.CallMismatch as err:
            out["forced_mismatch"] = str(err)
        # errors the user can make
        for tensor, bad in (
            (torch.ones(4), {"op": "mean"}),
            (torch.ones(4), {"algorithm": "warp_drive"}),
            (torch.ones(4, device="meta"), {}),
        ):
            try:
                comm.all_reduce(tensor, **bad)
            except artune.ArtuneError as err:
                out.setdefault("errors", []).append(str(err))
        # shared memory holds CPU tensors only: a CUDA tensor would go to the process group
        out["on_cuda"] = comm.available(torch.float32, "sum", "cuda")
    try:
        comm.all_reduce(torch.ones(4))
    except artune.CommunicatorClosed as err:
        out["closed"] = str(err)
    return out


@pytest.mark.timeout(180)
@pytest.mark.parametrize("world_size", [2, 3])
def test_dispatch_matches_reference(tmp_path: Path, world_size: int) -> None:
    results = run_ranks(_dispatch, world_size, str(_three_band_table(tmp_path)), timeout=150)
    first = results[0]
    assert set(first["algorithms"]) == {"gloo", "shm_one_shot", "shm_two_shot"}
    assert first["chosen"] == {"shm_one_shot", "shm_two_shot", "gloo"}
    assert "table= argument" in first["table"]
    assert any("op 'mean' is not supported" in e for e in first["errors"])
    assert any("'warp_drive'" in e for e in first["errors"])
    assert any("no algorithm here can reduce torch.float32 on meta" in e for e in first["errors"])
    assert first["on_cuda"] == frozenset({"gloo"})
    assert "closed" in first["closed"]
    assert "(differing: algorithm)" in first["forced_mismatch"]


def _wrong_two_shot(ctx: RankContext, table_path: str) -> dict:
    import logging

    import artune
    from artune.algorithms.shm.algorithms import ShmTwoShot

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("artune").addHandler(handler)
    if ctx.rank == 1:  # a silent bug on one rank: one element off by one, no error
        os.environ["ARTUNE_SHM_NATIVE"] = "0"  # the bug goes into the Python round, which this rank then runs
        prepare = ShmTwoShot._prepare

        def wrong_prepare(self: ShmTwoShot, *args: Any) -> Any:
            step = prepare(self, *args)

            def wrong_step(x: torch.Tensor, index: int) -> None:
                step(x, index)
                if x.numel():
                    x.view(-1)[0] += 1

            return wrong_step

        ShmTwoShot._prepare = wrong_prepare  # type: ignore[method-assign]
    out: dict = {}
    with artune.Communicator(table=table_path, timeout=20, buffer_bytes=64 * 1024) as comm:
        out["algorithms"] = comm.algorithms
        out["disabled"] = dict(comm.disabled)
        inputs = _inputs(ctx.world_size, 50_000, torch.float32, seed=3)  # 200 KB: the table says two-shot
        t = inputs[ctx.rank].clone()
        out["decision"] = comm.decide(t).algorithm
        comm.all_reduce(t)
        out["right"] = torch.equal(t, _reference(inputs))
        try:
            comm.all_reduce(t, algorithm="shm_two_shot")
        except artune.ArtuneError as err:
            out["forced"] = str(err)
    out["warnings"] = [r.getMessage() for r in records if r.levelname == "WARNING"]
    return out


@pytest.mark.timeout(120)
def test_self_check_disables_a_wrong_algorithm_on_every_rank(tmp_path: Path) -> None:
    results = run_ranks(_wrong_two_shot, 3, str(_three_band_table(tmp_path)), timeout=100)
    for rank, res in enumerate(results):
        assert res["algorithms"] == ("gloo", "shm_one_shot"), rank
        assert list(res["disabled"]) == ["shm_two_shot"]
        assert "wrong on rank 1" in res["disabled"]["shm_two_shot"]
        assert res["decision"] == "gloo"  # the plan's fallback, since two-shot is out
        assert res["right"], rank
        assert "failed the start-up self-check" in res["forced"]
    assert any("shm_two_shot failed the start-up self-check" in w for w in results[0]["warnings"])


def _disagree(ctx: RankContext, paths: list[str]) -> str:
    import artune

    try:
        artune.Communicator(table=paths[ctx.rank], timeout=10)
    except artune.AgreementError as err:
        return str(err)
    return "no error"


@pytest.mark.timeout(120)
def test_ranks_with_different_tables_refuse_to_start(tmp_path: Path) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    dump_table(cpu_default(), a)
    b.write_text(a.read_text().replace('below = "1MiB"', 'below = "2MiB"'))
    messages = run_ranks(_disagree, 2, [str(a), str(b)], timeout=60)
    for message in messages:
        assert "ranks disagree on table_digest" in message
        assert "a.toml" in message and "b.toml" in message


def _selection(ctx: RankContext) -> dict:
    import logging

    import artune

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("artune").addHandler(handler)
    torch.set_num_threads(4)  # 2 ranks x 4 threads on this host's cores: the Communicator must warn
    with artune.Communicator(timeout=10) as comm:
        first = comm.table.name
        decision = comm.decide(torch.ones(16))
    torch.set_num_threads(1)
    warned = any("torch threads" in r.getMessage() for r in records)
    records.clear()
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[ctx.rank % len(cpus)]})  # one thread per rank, each on its own CPU
    with artune.Communicator(timeout=10):
        pinned_warned = any("torch threads" in r.getMessage() for r in records)
    os.sched_setaffinity(0, cpus)
    with artune.Communicator(timeout=10, shm=False) as comm:
        no_shm = (comm.algorithms, comm.shm_unavailable_reason, comm.decide(torch.ones(16)).algorithm)
        t = torch.ones(16)
        comm.all_reduce(t)  # the table says shm_one_shot; only gloo exists here: fallback
        assert t.tolist() == [ctx.world_size] * 16
    return {
        "first": first,
        "reason": decision.reason,
        "no_shm": no_shm,
        "warned": warned,
        "pinned_warned": pinned_warned,
    }


@pytest.mark.timeout(120)
def test_table_selection_order(tmp_path: Path) -> None:
    from artune import machine
    from artune.table.cache import install_table

    cache = tmp_path / "cache"
    env = {"ARTUNE_CACHE_DIR": str(cache)}
    result = run_ranks(_selection, 2, timeout=60, env=env)[0]
    assert "bundled default" in result["first"] and "run 'artune tune'" in result["first"]
    assert result["warned"] == (len(os.sched_getaffinity(0)) < 2 * 4)
    assert result["pinned_warned"] == (len(os.sched_getaffinity(0)) < 2)
    assert result["no_shm"][0] == ("gloo",)
    assert result["no_shm"][1] == "disabled (shm=False)"
    assert result["no_shm"][2] == "gloo"
    measured = cpu_default().with_changes(origin="")
    install_table(measured, cache, machine.fingerprint())
    result = run_ranks(_selection, 2, timeout=60, env=env)[0]
    assert "this machine's measured table" in result["first"]
    explicit = tmp_path / "mine.toml"
    dump_table(cpu_default(), explicit)
    env.update(ARTUNE_TABLE=str(explicit), ARTUNE_ALGORITHM="gloo")
    result = run_ranks(_selection, 2, timeout=60, env=env)[0]
    assert "(ARTUNE_TABLE)" in result["first"]
    assert "gloo forced" in result["reason"]


def _mismatch_and_death(ctx: RankContext) -> dict:
    import artune

    out: dict = {}
    with artune.Communicator(timeout=5, buffer_bytes=64 * 1024) as comm:
        # different element counts that the table would send to different algorithms
        numel = 1000 if ctx.rank == 0 else 400_000
        try:
            comm.all_reduce(torch.ones(numel))
        except artune.CallMismatch as err:
            out["mismatch"] = str(err)
        t = torch.ones(10)
        comm.all_reduce(t)  # still usable after a mismatch
        out["after"] = t.tolist()
        if ctx.rank == 1:
            os._exit(0)  # dies without a word
        try:
            comm.all_reduce(torch.ones(10))
        except artune.PeerTimeout as err:
            out["timeout"] = (str(err), err.missing)
        try:
            comm.all_reduce(torch.ones(10))
        except artune.CommunicatorClosed as err:
            out["closed"] = str(err)
    return out


def _mismatch_probe(ctx: RankContext, result_path: str) -> None:
    import json

    # rank 1 dies on purpose, so rank 0 reports through a file instead of run_ranks' result
    Path(result_path).write_text(json.dumps(_mismatch_and_death(ctx), default=list))


@pytest.mark.timeout(120)
def test_survivor_sees_mismatch_timeout_and_closed(tmp_path: Path) -> None:
    import json

    from artune.errors import RankFailed

    result = tmp_path / "rank0.json"
    with pytest.raises(RankFailed):
        run_ranks(_mismatch_probe, 2, str(result), timeout=60)
    out = json.loads(result.read_text())
    assert "1000" in out["mismatch"] and "400000" in out["mismatch"]
    assert out["after"] == [2.0] * 10
    message, missing = out["timeout"]
    assert missing == [1] and "rank(s) [1]" in message
    assert "create a new one" in out["closed"]


@pytest.mark.timeout(120)
def test_torchrun(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, torch, torch.distributed as dist
            import artune

            dist.init_process_group("gloo")
            with artune.Communicator(timeout=20) as comm:
                t = torch.full((4096,), float(dist.get_rank() + 1))
                comm.all_reduce(t)
                assert t[0].item() == 3.0, t[0]
                sys.stdout.write(f"rank {dist.get_rank()} {comm.decide(t).algorithm}\\n")  # one write: no interleaving
            dist.destroy_process_group()
            """
        )
    )
    torchrun = Path(sys.executable).with_name("torchrun")
    env = {**os.environ, "ARTUNE_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [str(torchrun), "--standalone", "--nproc-per-node", "2", str(script)],
        capture_output=True,
        text=True,
        timeout=100,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(line for line in result.stdout.splitlines() if line.startswith("rank")) == [
        "rank 0 shm_one_shot",
        "rank 1 shm_one_shot",
    ]


def _shm_too_big(ctx: RankContext) -> dict:
    import logging

    import artune

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("artune").addHandler(handler)
    for _ in range(2):  # a second Communicator does not repeat the warning
        with artune.Communicator(timeout=10) as comm:
            reason = comm.shm_unavailable_reason
            algorithms = comm.algorithms
            t = torch.ones(16)
            comm.all_reduce(t)  # still right, on gloo
            assert t.tolist() == [ctx.world_size] * 16
    with artune.Communicator(timeout=10, shm=False):
        pass  # asked for: no warning
    warnings = [(r.levelno, r.getMessage()) for r in records if "shared memory is not used" in r.getMessage()]
    return {"reason": reason, "algorithms": algorithms, "warnings": warnings}


@pytest.mark.timeout(120)
def test_shared_memory_unused_on_one_host_warns_once_on_one_rank(tmp_path: Path) -> None:
    """A buffer /dev/shm cannot hold: gloo for every size, said at WARNING (default logging shows it)."""
    env = {"ARTUNE_CACHE_DIR": str(tmp_path), "ARTUNE_SHM_BYTES": "256GiB"}
    first, second = run_ranks(_shm_too_big, 2, timeout=90, env=env)
    assert first["algorithms"] == ("gloo",) and "enlarge /dev/shm" in first["reason"]
    ((level, message),) = first["warnings"]
    assert level == logging.WARNING
    assert "every all-reduce runs on gloo" in message and first["reason"] in message
    assert "ARTUNE_SHM_BYTES=256GiB: unset it (the default 4MiB fits)" in message
    assert second["warnings"] == [] and second["reason"] == first["reason"]
