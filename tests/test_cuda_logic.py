"""The CUDA path's logic on CPU: availability rules with faked facts, GPU facts, staging, per-device tables."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from artune import catalog
from artune.algorithms.cuda import rules
from artune.algorithms.cuda.symm_mem import SymmMemAlgorithm
from artune.algorithms.engines import ENGINES, engine_reasons
from artune.algorithms.torch_dist import ProcessGroupAlgorithm
from artune.communicator import devices, modes
from artune.communicator.selfcheck import _device
from artune.errors import ArtuneError
from artune.gpufacts import GpuFacts, peer_summary
from artune.measure.records import Header
from artune.settings import Settings
from artune.table import dump_table
from artune.table.family import conservative_default
from artune.table.types import Platform

H100 = rules.SymmMemFacts(
    module="",
    ops=frozenset(op for ops in rules.OPS.values() for op in ops),
    cuda_runtime="12.8",
    capability=(9, 0),
    world_size=8,
    same_host=True,
    peer_access="all",
)


def _facts(**changes: object) -> rules.SymmMemFacts:
    from dataclasses import replace

    return replace(H100, **changes)  # type: ignore[arg-type]


def test_symm_mem_opens_on_a_hopper_node_and_says_why_not_elsewhere() -> None:
    assert all(rules.open_unavailable(name, H100) is None for name in rules.OPS)
    cases = {
        "does not import": _facts(module="torch.distributed._symmetric_memory does not import (x)"),
        "two_shot_all_reduce_ is not in this torch": _facts(ops=frozenset({"one_shot_all_reduce"})),
        "not built with CUDA": _facts(cuda_runtime=""),
        "CUDA runtime >= 12.3": _facts(cuda_runtime="12.1"),
        "compute capability >= 8.0": _facts(capability=(7, 5)),
        "different hosts": _facts(same_host=False),
        "peer access": _facts(peer_access="missing 0->1"),
    }
    for words, facts in cases.items():
        assert words in str(rules.open_unavailable("symm_mem_two_shot", facts)), words
    # one-shot falls back to the op without _out; multimem needs Hopper
    assert rules.open_unavailable("symm_mem_one_shot", _facts(ops=frozenset({"one_shot_all_reduce"}))) is None
    assert "9.0" in str(rules.open_unavailable("symm_mem_multimem", _facts(capability=(8, 0))))
    assert rules.open_unavailable("symm_mem_two_shot", _facts(world_size=1, peer_access="single GPU")) is None


def test_symm_mem_call_and_size_rules() -> None:
    assert rules.call_unavailable(torch.bfloat16, "sum") is None
    assert rules.call_unavailable(torch.float32, "sum") is None
    assert "'sum' only" in str(rules.call_unavailable(torch.float32, "max"))
    assert "float16" in str(rules.call_unavailable(torch.float16, "sum"))
    assert rules.size_unfit(4096, 2, 1 << 20) is None
    assert "multiple of 4" in str(rules.size_unfit(2062, 2, 1 << 20))
    assert "larger than the symmetric buffer" in str(rules.size_unfit(2 << 20, 4, 1 << 20))
    assert "multicast" in str(rules.multicast_unavailable("symm_mem_multimem", False))
    assert rules.multicast_unavailable("symm_mem_two_shot", False) is None


def test_two_ranks_on_one_gpu_are_named_with_the_fix() -> None:
    """NCCL refuses a duplicate GPU at its first call (seen on the H200: 'Duplicate GPU detected'); the
    ranks' GPU UUIDs, gathered when the CUDA algorithms open, say so first, with the fix."""
    from artune.algorithms.cuda import shared_gpu

    assert shared_gpu(["a", "b", "c"]) is None
    assert shared_gpu(["", ""]) is None  # a torch that does not tell the UUID: no claim
    why = shared_gpu(["a", "b", "b", "a"])
    assert why is not None and "ranks 1 and 2 share one GPU (GPU-b)" in why
    assert "torch.cuda.set_device(local_rank)" in why


def test_every_cuda_and_engine_name_is_in_the_catalog_with_a_reason() -> None:
    for name in rules.OPS:
        assert name in catalog.SPECS
    reasons = engine_reasons()
    for names, _ in ENGINES.values():
        for name in names:
            assert name in catalog.SPECS and reasons[name]
    assert "custom_ar" in reasons and "2shot_pull_mc" in reasons


class FakeBuffer:
    """A CPU stand-in for the symmetric buffer: what the algorithm stages into."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.group_name = "g"
        self.storage = torch.zeros(nbytes, dtype=torch.uint8)

    def view(self, dtype: torch.dtype, numel: int) -> torch.Tensor:
        return self.storage[: numel * torch.empty((), dtype=dtype).element_size()].view(dtype)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("name", list(rules.OPS))
def test_symm_mem_stages_in_reduces_in_the_buffer_and_copies_out(name: str) -> None:
    """The op sees the staged buffer, never the caller's tensor; the caller gets the result (two ranks faked)."""
    buffer = FakeBuffer(1 << 12)
    algorithm = SymmMemAlgorithm(name, buffer)  # type: ignore[arg-type]
    seen: list[torch.Tensor] = []

    def fake(inp: torch.Tensor, op: str, group: str, out: torch.Tensor | None = None) -> torch.Tensor:
        assert op == "sum" and group == "g"
        seen.append(inp)
        if algorithm._op_name == "one_shot_all_reduce_out":
            return out.copy_(inp * 2)  # type: ignore[union-attr]
        if algorithm._op_name == "one_shot_all_reduce":
            return inp * 2
        return inp.mul_(2)

    algorithm._op = fake
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    call = algorithm.bind(x.shape, x.dtype, "sum", {})
    call(x)
    assert torch.equal(x, torch.arange(6, dtype=torch.float32).reshape(2, 3) * 2)
    assert seen[0].data_ptr() == buffer.storage.data_ptr()
    assert algorithm.capturable and algorithm.devices == frozenset({"cuda"})
    assert algorithm.unfit(8 << 10, torch.float32) is not None and algorithm.unfit(64, torch.float32) is None


def test_gpu_facts_round_trip_into_the_log_header() -> None:
    facts = GpuFacts("NVIDIA H200", "9.0", 132, 139.8, 8, "580.1", "13.0", "2.27.3", "2.11.0", "all", "yes", "")
    assert facts.platform() == Platform("cuda", "9.0", "NVIDIA H200, 132 SMs")
    assert GpuFacts.from_dict(facts.as_dict()) == facts
    assert facts.fingerprint() == GpuFacts.from_dict(facts.as_dict()).fingerprint()
    assert "8x NVIDIA H200 (sm_90, 132 SMs" in facts.describe()
    with pytest.raises(ArtuneError, match="malformed"):
        GpuFacts.from_dict({"name": "x"})
    gpu = {**facts.as_dict(), "fingerprint": facts.fingerprint(), "mode": "graph", "timing": "CUDA graph"}
    header = Header.for_this_machine(8, gpu)
    assert header.platform == {"kind": "cuda", "arch": "9.0", "device": "NVIDIA H200, 132 SMs"}
    assert Header.from_dict(header.to_dict()) == header
    eager = Header.for_this_machine(8, {**gpu, "mode": "eager"})
    assert "mode" in str(header.mismatch(eager))


def test_peer_summary() -> None:
    assert peer_summary([[True]]) == "single GPU"
    assert peer_summary([[True, True], [True, True]]) == "all"
    assert peer_summary([[True, False], [False, True]]) == "none"
    assert peer_summary([[True, True, True], [True, True, False], [True, True, True]]) == "missing 1->2"


def test_modes_and_devices() -> None:
    assert modes.call_mode(True, "eager") == "graph" and modes.call_mode(False, "eager") == "eager"
    assert modes.capturing(torch.zeros(1)) is False  # a CPU tensor never is (and CUDA is never asked)
    gloo = ProcessGroupAlgorithm(name="gloo", devices=frozenset({"cpu"}))
    nccl = ProcessGroupAlgorithm(name="nccl", devices=frozenset({"cuda"}))
    assert devices.baselines({"gloo": gloo, "nccl": nccl}) == {"cpu": "gloo", "cuda": "nccl"}
    assert nccl.capturable and not gloo.capturable
    assert _device(nccl) == "cuda" and _device(gloo) == "cpu"


def test_cuda_table_is_the_given_one_the_cached_one_or_the_conservative_default(tmp_path: Path) -> None:
    settings = Settings(cache_dir=tmp_path)
    platform = Platform("cuda", "10.7", "Rubin, 160 SMs")
    given = conservative_default(platform)
    assert devices.cuda_table(given, platform, "abc", settings) is given
    cpu_table = conservative_default(Platform("cpu", "x86_64"))
    default = devices.cuda_table(cpu_table, platform, "abc", settings)
    assert default.plans[0].fallback == "nccl" and "artune tune --device cuda" in default.origin
    dump_table(given, tmp_path / "tables" / "abc.toml")
    cached = devices.cuda_table(cpu_table, platform, "abc", settings)
    assert "measured CUDA table" in cached.origin and cached.platform.arch == "10.7"


def _multicast_facts(ctx) -> dict[str, object]:
    import artune
    from artune.algorithms import open_algorithms

    with artune.Communicator(timeout=20) as comm:
        plain = comm.multicast
    algos = open_algorithms(None, timeout=20.0, use_shm=False, cuda=True)  # asked for CUDA on a CPU-only host
    try:
        return {"plain": plain, "asked": algos.multicast, "why": dict(algos.unavailable)}
    finally:
        algos.close()


def test_a_machine_without_cuda_algorithms_says_nothing_of_multicast_and_one_without_cuda_says_no() -> None:
    from artune.launch import run_ranks

    if torch.cuda.is_available():
        pytest.skip("this host has CUDA: bench/gpu_check.py reports the real fact")
    for res in run_ranks(_multicast_facts, 2, timeout=100):
        assert res["plain"] is None  # a gloo group opens no CUDA algorithms: CPU tables decide for any machine
        assert res["asked"] is False
        assert "no CUDA device" in str(res["why"]["symm_mem_multimem"])
