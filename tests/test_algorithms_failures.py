"""Mismatched calls, dead and late peers, unusable shared memory, and leftovers in /dev/shm."""

from __future__ import annotations

import glob
import json
import os
import signal
import time
from pathlib import Path

import pytest
import torch

from artune.errors import CallMismatch, CommunicatorClosed, PeerTimeout, RankFailed, ShmUnavailable
from artune.launch import RankContext, run_ranks

SHM = ("shm_one_shot", "shm_two_shot")
BUFFER_BYTES = 64 << 10


def _assert_gone(name: str) -> None:
    base = name.lstrip("/")
    left = glob.glob(f"/dev/shm/{base}*") + glob.glob(f"/dev/shm/sem.{base}*")
    assert not left, f"left in /dev/shm: {left}"


def _outcome(fn) -> str:
    """'ok', or the exception's type name and message."""
    try:
        fn()
    except Exception as err:
        return f"{type(err).__name__}: {err}"
    return "ok"


# ---------------------------------------------------------------- mismatched calls


def use_path(ctx: RankContext, paths: str) -> None:
    """Rank r runs the compiled round when ``paths[r % len]`` is ``n``, the Python one when ``p``."""
    os.environ["ARTUNE_SHM_NATIVE"] = "1" if paths[ctx.rank % len(paths)] == "n" else "0"


def _mismatch_rank(ctx: RankContext, paths: str) -> dict:
    from artune.algorithms import open_algorithms

    use_path(ctx, paths)
    algos = open_algorithms(None, timeout=10.0, buffer_bytes=BUFFER_BYTES)
    channel = algos.channel
    assert channel is not None
    _assert_gone(channel.name)  # unlinked right after construction
    rank, world = ctx.rank, ctx.world_size
    big = 3 * BUFFER_BYTES // 4  # several chunks of float32
    outcomes: dict[str, str] = {}

    def check_works(tag: str) -> None:
        for name in SHM:
            x = torch.full((1000,), float(rank))
            algos.by_name[name].all_reduce(x, "sum", {})
            assert torch.equal(x, torch.full((1000,), float(sum(range(world))))), (tag, name)

    for name in SHM:
        alg = algos.by_name[name]
        cases = {
            "numel": lambda alg=alg: alg.all_reduce(torch.ones(10 + (rank == 1)), "sum", {}),
            "numel_chunked": lambda alg=alg: alg.all_reduce(torch.ones(big + (rank == 1)), "sum", {}),
            "numel_zero": lambda alg=alg: alg.all_reduce(torch.ones(0 if rank == 0 else 5), "sum", {}),
            "dtype": lambda alg=alg: alg.all_reduce(
                torch.ones(10, dtype=torch.float64 if rank == world - 1 else torch.float32), "sum", {}
            ),
            "op": lambda alg=alg: alg.all_reduce(torch.ones(10), "max" if rank == 0 else "sum", {}),
            "chunking": lambda alg=alg: alg.all_reduce(
                torch.ones(5000), "sum", {"chunk_bytes": 4096 if rank == 0 else 65536}
            ),
        }
        for case, call in cases.items():
            outcomes[f"{name}/{case}"] = _outcome(call)
            check_works(case)
    one, two = algos.by_name["shm_one_shot"], algos.by_name["shm_two_shot"]
    outcomes["algorithm"] = _outcome(lambda: (one if rank == 0 else two).all_reduce(torch.ones(10), "sum", {}))
    check_works("algorithm")
    outcomes["agree_numel"] = _outcome(lambda: channel.agree(10 + rank, torch.float32, "sum", "gloo"))
    outcomes["agree_vs_shm"] = _outcome(
        lambda: (
            channel.agree(10, torch.float32, "sum", "gloo") if rank == 0 else one.all_reduce(torch.ones(10), "sum", {})
        )
    )
    check_works("agree")
    outcomes["agree_same"] = _outcome(lambda: channel.agree(10, torch.float32, "sum", "gloo"))
    outcomes["not_contiguous"] = _outcome(lambda: one.all_reduce(torch.ones(4, 4).t(), "sum", {}))
    check_works("not_contiguous")
    algos.close()
    return outcomes


@pytest.mark.timeout(60)
@pytest.mark.parametrize("paths", ["n", "npn"])
def test_mismatched_calls_raise_on_every_rank_and_channel_survives(paths: str) -> None:
    world = 3
    results = run_ranks(_mismatch_rank, world, paths, timeout=55)
    for key in results[0]:
        texts = [res[key] for res in results]
        if key == "agree_same":
            assert texts == ["ok"] * world
            continue
        if key == "not_contiguous":
            assert all(t.startswith("ValueError: ") and "contiguous" in t for t in texts), texts
            continue
        assert all(t.startswith("CallMismatch: ") for t in texts), (key, texts)
        assert len(set(texts)) == 1, f"{key}: ranks got different messages: {texts}"
    assert "(differing: numel)" in results[0]["shm_one_shot/numel"]
    assert "(differing: dtype)" in results[0]["shm_two_shot/dtype"]
    assert "(differing: op)" in results[0]["shm_one_shot/op"]
    assert "(differing: algorithm)" in results[0]["algorithm"]
    assert "(differing: algorithm)" in results[0]["agree_vs_shm"]
    assert "(differing: chunk)" in results[0]["shm_one_shot/chunking"]
    assert "rank 1: numel=11" in results[0]["shm_one_shot/numel"]


def _default_chunk_rank(ctx: RankContext) -> dict[str, str]:
    from artune.algorithms import open_algorithms
    from artune.algorithms.shm.algorithms import DEFAULT_CHUNK_BYTES

    algos = open_algorithms(None, timeout=10.0, buffer_bytes=4 * DEFAULT_CHUNK_BYTES)
    one = algos.by_name["shm_one_shot"]
    x = torch.ones(DEFAULT_CHUNK_BYTES)  # 4 MiB of float32: fits one slot, goes in DEFAULT_CHUNK_BYTES chunks
    explicit = {"chunk_bytes": DEFAULT_CHUNK_BYTES if ctx.rank else 4 * DEFAULT_CHUNK_BYTES}
    try:
        return {
            "same": _outcome(lambda: one.all_reduce(x, "sum", explicit if ctx.rank else {})),
            "whole_slot": _outcome(lambda: one.all_reduce(x, "sum", {} if ctx.rank else explicit)),
        }
    finally:
        algos.close()


@pytest.mark.timeout(60)
def test_default_chunk_is_below_a_large_slot() -> None:
    """Without ``chunk_bytes`` a 4 MiB slot is used in 1 MiB chunks: the same rounds as asking for 1 MiB."""
    for result in run_ranks(_default_chunk_rank, 2, timeout=55):
        assert result["same"] == "ok"
        assert result["whole_slot"].startswith("CallMismatch: ") and "(differing: chunk)" in result["whole_slot"]


# ---------------------------------------------------------------- dead and late peers

TIMEOUT = 3.0


def _write_and_wait(out_dir: str, rank: int, result: dict, survivors: tuple[int, ...]) -> None:
    """Write this rank's result, then wait for the other survivors' (they must not look dead early)."""
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not all(Path(out_dir, f"rank{r}.json").exists() for r in survivors):
        time.sleep(0.05)


def _dead_before_rank(ctx: RankContext, out_dir: str) -> None:
    import torch.distributed as dist

    from artune.algorithms import open_algorithms

    algos = open_algorithms(None, timeout=TIMEOUT, buffer_bytes=BUFFER_BYTES)
    assert algos.channel is not None
    result: dict = {"name": algos.channel.name}
    dist.barrier()
    if ctx.rank == 2:
        os._exit(0)
    time.sleep(0.2)
    for name in ("shm_one_shot", "gloo"):
        start = time.monotonic()
        try:
            algos.by_name[name].all_reduce(torch.ones(100), "sum", {})
            result[name] = "ok"
        except PeerTimeout as err:
            result[name] = {"missing": list(err.missing), "seconds": time.monotonic() - start, "text": str(err)}
        result[name + "_again"] = _outcome(lambda n=name: algos.by_name[n].all_reduce(torch.ones(1), "sum", {}))
    result["two_shot_after"] = _outcome(lambda: algos.by_name["shm_two_shot"].all_reduce(torch.ones(1), "sum", {}))
    result["agree_after"] = _outcome(lambda: algos.channel.agree(1, torch.float32, "sum", "gloo"))
    _write_and_wait(out_dir, ctx.rank, result, survivors=(0, 1))
    algos.close()
    os._exit(0)  # skip destroy_process_group with a dead peer


@pytest.mark.timeout(60)
def test_peer_dead_before_the_call(tmp_path: Path) -> None:
    with pytest.raises(RankFailed, match="rank 2"):
        run_ranks(_dead_before_rank, 3, str(tmp_path), timeout=50)
    for rank in (0, 1):
        res = json.loads((tmp_path / f"rank{rank}.json").read_text())
        shm = res["shm_one_shot"]
        assert shm["missing"] == [2], shm
        assert shm["seconds"] < TIMEOUT, shm  # liveness check: faster than the deadline
        assert "died" in shm["text"]
        assert res["shm_one_shot_again"].startswith("CommunicatorClosed: ")
        assert "create a new communicator" in res["shm_one_shot_again"]
        assert res["two_shot_after"].startswith("CommunicatorClosed: ")
        assert res["agree_after"].startswith("CommunicatorClosed: ")
        assert isinstance(res["gloo"], dict) and res["gloo"]["missing"] == [2], res["gloo"]
        assert res["gloo_again"].startswith("CommunicatorClosed: ")
    _assert_gone(res["name"])


def _killed_while_creating_rank(ctx: RankContext, out_dir: str) -> None:
    from artune.algorithms import open_algorithms
    from artune.algorithms.shm import segment

    if ctx.rank == 0:  # SIGKILL itself right after creating the segment, before telling anyone it exists
        create = segment._create

        def create_then_die(prefix: str, layout: segment.Layout) -> None:
            create(prefix, layout)
            Path(out_dir, "prefix").write_text(prefix)
            os.kill(os.getpid(), signal.SIGKILL)

        segment._create = create_then_die
    outcome = _outcome(lambda: open_algorithms(None, timeout=TIMEOUT, buffer_bytes=BUFFER_BYTES))
    Path(out_dir, f"rank{ctx.rank}.json").write_text(json.dumps(outcome))
    os._exit(0)  # skip destroy_process_group with a dead peer


@pytest.mark.timeout(60)
def test_rank_killed_while_creating_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RankFailed, match="rank 0"):
        run_ranks(_killed_while_creating_rank, 3, str(tmp_path), timeout=50)
    prefix = (tmp_path / "prefix").read_text()
    for rank in (1, 2):
        outcome = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert outcome != "ok", f"rank {rank} opened shared memory its creator never announced"
    _assert_gone(prefix)  # the survivors knew the name in advance and unlinked it


def _dead_during_rank(ctx: RankContext, out_dir: str, paths: str) -> None:
    import torch.distributed as dist

    from artune.algorithms import open_algorithms
    from artune.algorithms.shm.channel import ShmChannel

    use_path(ctx, paths)  # rank 1 runs the Python round (its rounds are patched below)

    algos = open_algorithms(None, timeout=TIMEOUT, buffer_bytes=BUFFER_BYTES)
    channel = algos.channel
    assert channel is not None
    result: dict = {"name": channel.name}
    dist.barrier()
    if ctx.rank == 1:  # SIGKILL itself in the middle of a chunked two-shot, after 3 rounds
        rounds = [0]
        plain = ShmChannel.plain_round

        def dying_round(self: ShmChannel) -> None:
            rounds[0] += 1
            if rounds[0] == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            plain(self)

        channel.plain_round = dying_round.__get__(channel)  # type: ignore[method-assign]
    start = time.monotonic()
    try:
        algos.by_name["shm_two_shot"].all_reduce(torch.ones(10 * BUFFER_BYTES // 4), "sum", {})
        result["shm_two_shot"] = "ok"
    except PeerTimeout as err:
        result["shm_two_shot"] = {
            "missing": list(err.missing),
            "seconds": time.monotonic() - start,
            "text": str(err),
        }
    _write_and_wait(out_dir, ctx.rank, result, survivors=(0, 2))
    algos.close()
    os._exit(0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("paths", ["p", "npn"])
def test_peer_killed_during_the_call(tmp_path: Path, paths: str) -> None:
    with pytest.raises(RankFailed, match="rank 1"):
        run_ranks(_dead_during_rank, 3, str(tmp_path), paths, timeout=50)
    assert not (tmp_path / "rank1.json").exists()
    for rank in (0, 2):
        res = json.loads((tmp_path / f"rank{rank}.json").read_text())
        # rank 1 first; a live peer still on its way may be named too, the message says who died
        assert res["shm_two_shot"]["missing"][0] == 1, res
        assert "rank(s) [1] died" in res["shm_two_shot"]["text"], res
        assert res["shm_two_shot"]["seconds"] < TIMEOUT, res
    _assert_gone(res["name"])


def _late_rank(ctx: RankContext) -> dict:
    import torch.distributed as dist

    from artune.algorithms import open_algorithms

    algos = open_algorithms(None, timeout=1.0, buffer_bytes=BUFFER_BYTES)
    assert algos.channel is not None
    result: dict = {"name": algos.channel.name}
    dist.barrier()
    if ctx.rank == 1:
        time.sleep(2.5)  # alive, but later than the others' deadline
    else:
        for name in ("shm_one_shot", "gloo"):
            start = time.monotonic()
            try:
                algos.by_name[name].all_reduce(torch.ones(100), "sum", {})
                result[name] = "ok"
            except PeerTimeout as err:
                result[name] = {"missing": list(err.missing), "seconds": time.monotonic() - start}
    algos.close()
    return result


@pytest.mark.timeout(60)
def test_peer_late_beyond_the_deadline() -> None:
    results = run_ranks(_late_rank, 2, timeout=50)
    shm = results[0]["shm_one_shot"]
    assert shm["missing"] == [1] and 1.0 <= shm["seconds"] < 2.0, shm
    gloo = results[0]["gloo"]
    assert isinstance(gloo, dict) and 1.0 <= gloo["seconds"] < 2.0, gloo
    _assert_gone(results[0]["name"])


# ---------------------------------------------------------------- shared memory unavailable


def _unavailable_rank(ctx: RankContext) -> dict:
    import torch.distributed as dist

    from artune.algorithms import open_algorithms
    from artune.algorithms.shm import ShmChannel, segment

    free = os.statvfs("/dev/shm").f_bavail * os.statvfs("/dev/shm").f_frsize
    out: dict = {}
    algos = open_algorithms(None, timeout=5.0, buffer_bytes=free)  # needs ~2 * (W + 1) * free
    out["too_small_channel"] = algos.channel is None
    out["too_small"] = algos.shm_unavailable_reason
    out["names_without_shm"] = sorted(algos.by_name)
    algos.close()
    out["direct"] = _outcome(lambda: ShmChannel(None, timeout=5.0, buffer_bytes=1 << 40))
    out["disabled"] = open_algorithms(None, timeout=5.0, use_shm=False).shm_unavailable_reason

    real_host_id = segment.host_id
    if ctx.rank == 1:
        segment.host_id = lambda: "elsewhere/other-boot"
    out["other_host"] = _outcome(lambda: ShmChannel(None, timeout=5.0, buffer_bytes=BUFFER_BYTES))
    segment.host_id = real_host_id

    real_init = segment.Segment.__init__
    if ctx.rank == 1:

        def failing_init(self, prefix, layout, rank, native=None):  # type: ignore[no-untyped-def]
            out["open_failed_prefix"] = prefix
            raise OSError(13, "Permission denied (simulated)")

        segment.Segment.__init__ = failing_init  # type: ignore[method-assign]
    out["open_failed"] = _outcome(lambda: ShmChannel(None, timeout=5.0, buffer_bytes=BUFFER_BYTES))
    segment.Segment.__init__ = real_init  # type: ignore[method-assign]
    dist.barrier()
    if ctx.rank == 1:
        _assert_gone(out["open_failed_prefix"])  # rank 0 created it; every rank unlinked it
    out["after"] = _outcome(lambda: ShmChannel(None, timeout=5.0, buffer_bytes=BUFFER_BYTES).close())
    return out


@pytest.mark.timeout(60)
def test_shm_unavailable_is_agreed_with_a_clear_reason() -> None:
    results = run_ranks(_unavailable_rank, 2, timeout=55)
    for key in ("too_small", "direct", "other_host", "open_failed", "disabled"):
        texts = [r[key] for r in results]
        assert len(set(texts)) == 1, f"{key}: ranks disagree: {texts}"
    first = results[0]
    assert first["too_small_channel"] is True
    assert first["names_without_shm"] == ["gloo"]
    reason = first["too_small"]
    assert "bytes" in reason and "/dev/shm" in reason and "--shm-size" in reason, reason
    assert "smaller buffer" in reason
    assert first["direct"].startswith("ShmUnavailable: ") and "--shm-size" in first["direct"]
    assert first["other_host"].startswith("ShmUnavailable: ") and "host" in first["other_host"]
    assert first["open_failed"].startswith("ShmUnavailable: ") and "rank(s) {1:" in first["open_failed"]
    assert first["disabled"] and "use_shm=False" in first["disabled"]
    assert all(r["after"] == "ok" for r in results)


# ---------------------------------------------------------------- in-process checks


def test_errors_are_artune_errors() -> None:
    for cls in (CallMismatch, PeerTimeout, ShmUnavailable, CommunicatorClosed):
        assert issubclass(cls, Exception)
    err = PeerTimeout("x", missing=(2,))
    assert err.missing == (2,)
