"""Graph mode on real ranks with a faked capture state: the graph plan, no agreement inside, unseen calls refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from artune.launch import RankContext, run_ranks

TWO_PLANS = """
schema = 1
[platform]
kind = "cpu"
arch = "any"
[provenance]
source = "measured"
[[plan]]
world_size = 2
mode = "eager"
fallback = "gloo"
bands = [{ upto = "1024TiB", algorithm = "shm_one_shot" }]
[[plan]]
world_size = 2
mode = "graph"
fallback = "gloo"
bands = [{ upto = "1024TiB", algorithm = "shm_two_shot" }]
"""


def _graph_rank(ctx: RankContext, table_path: str) -> dict:
    import artune
    from artune.algorithms import open_algorithms
    from artune.communicator import modes

    out: dict = {}
    capture = {"on": False}
    real = modes.capturing
    modes.capturing = lambda tensor: capture["on"]  # the faked capture state
    try:
        with artune.Communicator(table=table_path, timeout=20) as comm:
            channel = comm._algorithms.channel
            agreed: list[int] = []
            agree = channel.agree
            channel.agree = lambda *a: (agreed.append(1), agree(*a))[1]
            x = torch.full((1000,), float(ctx.rank + 1))
            out["eager"] = comm.decide(x).algorithm
            comm.all_reduce(x)  # first sight, outside a capture: agreed, both routes bound
            out["eager_sum"] = x[0].item()
            w = torch.ones(10)
            comm.all_reduce(w, algorithm="gloo")  # the process group: agreed over shm before the call
            out["eager_agreements"] = len(agreed)
            capture["on"] = True
            out["graph"] = comm.decide(x).algorithm
            y = torch.full((1000,), float(ctx.rank + 1))
            comm.all_reduce(y)
            out["graph_sum"] = y[0].item()
            comm.all_reduce(w, algorithm="gloo")
            out["graph_agreements"] = len(agreed) - out["eager_agreements"]  # none inside the capture
            try:
                comm.all_reduce(torch.ones(77))  # never seen outside a capture
            except artune.ArtuneError as err:
                out["unseen"] = str(err)
            capture["on"] = False
            z = torch.ones(77)
            comm.all_reduce(z)  # still usable, ranks still in step
            out["after"] = z[0].item()
            # a message the chosen algorithm cannot take (as symm_mem refuses misaligned or oversized ones)
            # goes to the next candidate, here the fallback, and the reason says so; forcing it is an error
            comm._algorithms.by_name["shm_one_shot"].unfit = lambda nbytes, dtype: (
                "larger than its buffer" if nbytes > 8192 else None
            )
            big = torch.ones(10_000)
            decision = comm.decide(big)
            out["unfit"] = (decision.algorithm, "shm_one_shot skipped: larger than its buffer" in decision.reason)
            comm.all_reduce(big)
            out["unfit_sum"] = big[0].item()
            try:
                comm.all_reduce(torch.ones(10_000), algorithm="shm_one_shot")
            except artune.ArtuneError as err:
                out["unfit_forced"] = str(err)
        # asking for the CUDA algorithms reports why each is missing (identical on every rank): on CPU, no
        # device; on a GPU host, two ranks on one GPU
        algorithms = open_algorithms(None, timeout=10, use_shm=False, cuda=True)
        out["cuda_unavailable"] = dict(algorithms.unavailable)
        out["cuda_names"] = sorted(algorithms.by_name)
        algorithms.close()
    finally:
        modes.capturing = real
    return out


@pytest.mark.timeout(120)
def test_graph_mode_from_capture_state(tmp_path: Path) -> None:
    table = tmp_path / "two-plans.toml"
    table.write_text(TWO_PLANS)
    results = run_ranks(_graph_rank, 2, str(table), timeout=100)
    for out in results:
        assert out["eager"] == "shm_one_shot" and out["graph"] == "shm_two_shot"
        assert out["eager_sum"] == 3.0 and out["graph_sum"] == 3.0 and out["after"] == 2.0
        assert out["eager_agreements"] == 1 and out["graph_agreements"] == 0
        assert "first seen inside a CUDA graph capture" in out["unseen"] and "warm-up" in out["unseen"]
        assert out["unfit"] == ("gloo", True) and out["unfit_sum"] == 2.0
        assert "cannot take this message: larger than its buffer" in out["unfit_forced"]
        assert out["cuda_names"] == ["gloo"]
        for name in ("symm_mem_one_shot", "symm_mem_two_shot", "symm_mem_multimem"):
            if torch.cuda.is_available():  # both ranks on the current GPU: nothing can reduce CUDA tensors
                assert "ranks 0 and 1 share one GPU" in out["cuda_unavailable"][name]
                assert out["cuda_unavailable"]["nccl"] == out["cuda_unavailable"][name]
            else:
                assert out["cuda_unavailable"][name] == "no CUDA device on this rank"
        assert "custom_ar" in out["cuda_unavailable"]
    assert results[0] == results[1]


def test_cuda_tests_skip_cleanly_without_a_gpu() -> None:
    """The marker the GPU tests use: here it must skip, there it runs."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (the GPU path is exercised by bench/gpu_check.py)")
    from artune.gpufacts import gpu_facts

    assert gpu_facts().capability
