"""Engine adapters (vLLM, SGLang) on CPU: availability logic with faked facts, and artune's wiring against
stand-ins for the engines' classes.

The stand-ins below are NOT vLLM or SGLang: they are small modules written
here, placed on ``sys.path`` under the engines' module names, with the
constructor and call surface artune's adapters use (taken from the engines'
public sources). They reduce for real over the gloo group, so what these
tests check is artune's side: construction arguments, agreement across
ranks, per-call dispatch, refusals and close. The real engines have not run.
"""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from artune import catalog
from artune.algorithms.engines import ENGINES, engine_reasons, sglang, vllm
from artune.errors import ArtuneError
from artune.launch import RankContext, run_ranks

FAKE_VLLM = '''
"""Stand-in for vllm.distributed.device_communicators.custom_all_reduce (tests only)."""
import os
import torch
import torch.distributed as dist

made = []


class CustomAllreduce:
    def __init__(self, group, device, max_size=8192 * 1024, symm_mem_enabled=False):
        assert dist.get_backend(group) != "nccl"
        self.group, self.device, self.max_size = group, device, max_size
        self.disabled = os.environ.get("FAKE_ENGINE_DISABLED") == "1"
        self.finalized = False
        self.closed = 0
        made.append(self)

    def finalize_p2p(self):
        self.finalized = True

    def custom_all_reduce(self, inp):
        n = inp.numel() * inp.element_size()
        if self.disabled or n % 16 or n >= self.max_size:
            return None
        out = inp.clone()
        dist.all_reduce(out, group=self.group)
        return out

    def close(self):
        self.closed += 1
'''

FAKE_SGLANG = '''
"""Stand-in for sglang.srt.distributed.device_communicators.custom_all_reduce_v2 (tests only)."""
import enum
import os
from collections import namedtuple
import torch
import torch.distributed as dist

made = []
Config = namedtuple("Config", "num_push_blocks num_pull_blocks num_mc_blocks")


class AllReduceAlgo(enum.Enum):  # an SGLang version without TWO_SHOT_PUSH
    ONE_SHOT_PUSH = enum.auto()
    ONE_SHOT_PULL = enum.auto()
    TWO_SHOT_PULL = enum.auto()


class CustomAllReduceV2:
    def __init__(self, group, device):
        self.group, self.device = group, device
        self.disabled = os.environ.get("FAKE_ENGINE_DISABLED") == "1"
        self.max_push_size = 1024 * (1 + dist.get_rank(group))  # ranks differ: artune must take the smallest
        self.max_pull_size = 4096
        self.config = Config(8, 16, None)
        self.override_algo = None
        self.calls = []
        self.closed = 0
        made.append(self)

    def custom_all_reduce(self, inp):
        self.calls.append(self.override_algo)
        out = inp.clone()
        dist.all_reduce(out, group=self.group)
        return out

    def close(self):
        self.closed += 1
'''


def _write_fakes(root: Path) -> None:
    files = {
        "vllm/distributed/device_communicators/custom_all_reduce.py": FAKE_VLLM,
        "vllm/distributed/parallel_state.py": "_WORLD = None\n",
        "sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py": FAKE_SGLANG,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        for parent in path.relative_to(root).parents:
            if str(parent) != ".":
                (root / parent / "__init__.py").touch()


# ------------------------------------------------------------ availability logic (no engine)


def test_every_engine_name_is_in_the_catalog() -> None:
    for names, adapter in ENGINES.values():
        assert all(name in catalog.SPECS for name in names)
        assert adapter.startswith("artune.algorithms.engines.")
    assert set(sglang.NAMES) == set(ENGINES["sglang"][0])
    assert ENGINES["vllm"][0] == (vllm.NAME,)


def test_engine_reasons_say_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import artune.algorithms.engines as engines

    monkeypatch.setattr(engines, "installed", lambda module: module == "sglang")
    reasons = engine_reasons()
    assert reasons["custom_ar"] == "vllm is not installed"
    assert "sglang is installed" in reasons["2shot_pull"] and "NCCL" in reasons["2shot_pull"]


def test_vllm_open_problem_names_world_size_and_the_p2p_check() -> None:
    assert "[2, 4, 6, 8], not 3" in str(vllm.open_problem(3, True, True))
    assert "not 1" in str(vllm.open_problem(1, True, True))
    why = str(vllm.open_problem(4, world_group_ready=False, skip_p2p_check=False))
    assert "gpu_p2p_access_check" in why and "VLLM_SKIP_P2P_CHECK=1" in why
    assert vllm.open_problem(8, world_group_ready=True, skip_p2p_check=False) is None
    assert vllm.open_problem(2, world_group_ready=False, skip_p2p_check=True) is None


def test_vllm_adapter_refuses_what_vllm_refuses() -> None:
    adapter = vllm.VllmCustomAllReduce(SimpleNamespace(close=lambda: None), max_size=1024)
    assert adapter.unavailable(torch.bfloat16, "sum") is None
    assert "only sums" in str(adapter.unavailable(torch.float32, "max"))
    assert "not torch.int32" in str(adapter.unavailable(torch.int32, "sum"))
    assert "multiple of 16" in str(adapter.unfit(24, torch.float32))
    assert adapter.unfit(1008, torch.float32) is None
    assert "below its 1024-byte buffer" in str(adapter.unfit(1024, torch.float32))  # strict, as vLLM
    assert adapter.capturable is False and "capture()" in vllm.CAPTURE_REASON
    assert adapter.tunable_space() == {}


def test_sglang_names_unavailable_from_the_engine_facts() -> None:
    class Algo:
        ONE_SHOT_PUSH = ONE_SHOT_PULL = TWO_SHOT_PULL = TWO_SHOT_PUSH = object()

    engine = SimpleNamespace(max_push_size=1024, max_pull_size=0, max_two_shot_push_size=2048)
    reasons = sglang.names_unavailable(engine, Algo)
    assert reasons["2shot_pull_mc"] == sglang.MC_REASON and "override_algo" in sglang.MC_REASON
    assert "max_pull_size is 0" in reasons["1shot_pull"] and "max_pull_size is 0" in reasons["2shot_pull"]
    assert "1shot_push" not in reasons and "2shot_push" not in reasons
    old = SimpleNamespace(max_push_size=1024, max_pull_size=4096)  # older SGLang: no two-shot push
    del Algo.TWO_SHOT_PUSH
    assert "no TWO_SHOT_PUSH" in sglang.names_unavailable(old, Algo)["2shot_push"]


# ------------------------------------------------------------ wiring against the stand-ins, on two gloo ranks


def _open(ctx: RankContext, fakes: str) -> dict:
    import torch.distributed as dist

    import artune.algorithms.engines as engines
    from artune.algorithms import open_algorithms

    engines.current_cuda_device = lambda: torch.device("cuda", ctx.rank)  # no GPU here: the stand-ins ignore it
    out: dict = {}
    # 1. installed on rank 0 only: nothing is imported anywhere, the reason names rank 1
    if ctx.rank == 0:
        sys.path.insert(0, fakes)
        importlib.invalidate_caches()
    found, reasons = engines.open_engine_algorithms(dist.group.WORLD, timeout=30)
    out["partial"] = (sorted(found), reasons["custom_ar"], reasons["1shot_push"])
    if ctx.rank == 1:
        sys.path.insert(0, fakes)
        importlib.invalidate_caches()
    # 2. the P2P check would need vLLM's world group: refused with the reason, vLLM's class never built
    os.environ.pop("VLLM_SKIP_P2P_CHECK", None)
    found, reasons = engines.open_engine_algorithms(dist.group.WORLD, timeout=30)
    fake_vllm = importlib.import_module(vllm.MODULE)
    out["no_p2p"] = (sorted(found), reasons["custom_ar"], len(fake_vllm.made))
    for algorithm in found.values():
        algorithm.close()
    # 3. the engines disable themselves: reasons, and the built instances are closed
    os.environ["VLLM_SKIP_P2P_CHECK"] = "1"
    os.environ["FAKE_ENGINE_DISABLED"] = "1"
    found, reasons = engines.open_engine_algorithms(dist.group.WORLD, timeout=30)
    fake_sglang = importlib.import_module(sglang.MODULE)
    out["disabled"] = (sorted(found), reasons["custom_ar"], reasons["2shot_pull"])
    out["disabled_closed"] = (fake_vllm.made[-1].closed, fake_sglang.made[-1].closed)
    del os.environ["FAKE_ENGINE_DISABLED"]
    # 4. through open_algorithms(cuda=True): the CUDA opening collects the engines with their reasons
    algorithms = open_algorithms(dist.group.WORLD, timeout=30, use_shm=False, cuda=True)
    try:
        ca = algorithms.by_name["custom_ar"]
        engine = fake_vllm.made[-1]
        out["vllm_built"] = (engine.group is dist.group.WORLD, str(engine.device), engine.max_size, engine.finalized)
        x = torch.full((64,), float(ctx.rank + 1))
        out["vllm_sum"] = ca.bind(x.shape, x.dtype, "sum", {})(x) is not None and x.tolist() == [3.0] * 64
        out["vllm_flags"] = (ca.devices, ca.capturable, ca.unfit(20, torch.float32))
        with pytest.raises(ArtuneError, match="should_custom_ar is false"):
            engine.max_size = 16  # the engine refuses a call artune thought fit: an error, never a silent skip
            ca.all_reduce(torch.ones(8), "sum", {})
        sg = importlib.import_module(sglang.MODULE).made[-1]
        runs = {}
        for name in ("1shot_push", "1shot_pull", "2shot_pull"):
            y = torch.full((16,), float(ctx.rank + 1))
            algorithms.by_name[name].all_reduce(
                y, "sum", {"blocks": algorithms.by_name[name].tunable_space()["blocks"][0]}
            )
            runs[name] = (y.tolist() == [3.0] * 16, sg.calls[-1].name, sg.override_algo)
        out["sglang_runs"] = runs
        push = algorithms.by_name["1shot_push"]
        out["sglang_push"] = (push.capacity, push.unfit(1040, torch.float32), push.tunable_space(), push.capturable)
        with pytest.raises(ArtuneError, match=r"blocks=4.*runs 8"):
            push.bind(torch.Size([16]), torch.float32, "sum", {"blocks": 4})
        out["unavailable"] = {n: algorithms.unavailable[n] for n in ("2shot_push", "2shot_pull_mc")}
    finally:
        algorithms.close()
    out["closed"] = (fake_vllm.made[-1].closed, sg.closed)
    # 5. a group without a gloo part (as a plain "nccl" group): the adapters get a new gloo group over the same
    #    ranks, and the last one closed destroys it
    import artune.algorithms.torch_dist as process_group

    process_group.backend_parts = lambda group=None: {"cuda": "nccl"}
    found, _ = engines.open_engine_algorithms(dist.group.WORLD, timeout=30)
    made = fake_vllm.made[-1].group
    out["own_group"] = (made is not dist.group.WORLD, str(dist.get_backend(made)), dist.get_process_group_ranks(made))
    for algorithm in found.values():
        algorithm.close()
    try:
        dist.get_backend(made)
        out["own_group_destroyed"] = False
    except (ValueError, RuntimeError):
        out["own_group_destroyed"] = True
    return out


def test_adapters_drive_engine_stand_ins_on_two_ranks(tmp_path: Path) -> None:
    _write_fakes(tmp_path)
    results = run_ranks(_open, 2, str(tmp_path), timeout=120)
    for rank, out in enumerate(results):
        assert out["partial"] == ([], "vllm is not installed on rank 1", "sglang is not installed on rank 1"), rank
        names, why, built = out["no_p2p"]
        assert "custom_ar" not in names and "VLLM_SKIP_P2P_CHECK=1" in why and built == 0
        assert out["disabled"][0] == []
        assert "disabled itself" in out["disabled"][1] and "disabled itself" in out["disabled"][2]
        assert out["disabled_closed"] == (1, 1)
        assert out["vllm_built"] == (True, f"cuda:{rank}", 8 << 20, True)
        assert out["vllm_sum"] is True
        assert out["vllm_flags"] == (frozenset({"cuda"}), False, out["vllm_flags"][2])
        assert "multiple of 16" in out["vllm_flags"][2]
        assert out["sglang_runs"] == {
            "1shot_push": (True, "ONE_SHOT_PUSH", None),
            "1shot_pull": (True, "ONE_SHOT_PULL", None),
            "2shot_pull": (True, "TWO_SHOT_PULL", None),
        }
        capacity, unfit, space, capturable = out["sglang_push"]
        assert capacity == 1024 and "at most 1024 bytes" in str(unfit) and space == {"blocks": (8,)}
        assert capturable is False
        assert "no TWO_SHOT_PUSH" in out["unavailable"]["2shot_push"]
        assert out["unavailable"]["2shot_pull_mc"] == sglang.MC_REASON
        assert out["closed"] == (1, 1)  # one engine instance behind three names: closed once
        assert out["own_group"] == (True, "gloo", [0, 1])
        assert out["own_group_destroyed"] is True
