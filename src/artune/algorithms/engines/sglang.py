"""SGLang's custom all-reduce v2 (``CustomAllReduceV2``) as ``1shot_push``, ``1shot_pull``, ``2shot_push``,
``2shot_pull`` (where this has run: docs/status.md).

Facts used (SGLang ``python/sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py``,
newest public version): ``CustomAllReduceV2(group,
device, ...)`` builds its workspace in torch symmetric memory on ``group``
(a gloo group over the tensor-parallel ranks) and sets ``disabled`` when
the world size is not in its tuned configs or a single-node group lacks full
NVLink. Its ``override_algo`` (an ``AllReduceAlgo``) makes
``custom_all_reduce`` run that algorithm for every size up to the workspace,
which is how artune drives one algorithm per name. That override path never
uses multicast, so ``2shot_pull_mc`` is not offered (``MC_REASON``). Each
algorithm's grid (``config.num_push_blocks`` / ``num_pull_blocks``) is fixed
when the class is built, so ``blocks`` is a declared parameter with the one
value this instance runs; a plan asking for another is refused, never
silently run with a different grid. Graph mode needs SGLang's ``capture()``
context around the caller's capture, which the Communicator does not drive:
not capturable (``CAPTURE_REASON``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed as dist

from artune.algorithms import engines
from artune.algorithms.base import Algorithm
from artune.algorithms.engines import agreed_problem, cpu_group, gather
from artune.errors import ArtuneError

MODULE = "sglang.srt.distributed.device_communicators.custom_all_reduce_v2"
#: artune name -> (SGLang AllReduceAlgo member, workspace attribute bounding its size, config grid attribute)
ALGOS: dict[str, tuple[str, str, str]] = {
    "1shot_push": ("ONE_SHOT_PUSH", "max_push_size", "num_push_blocks"),
    "1shot_pull": ("ONE_SHOT_PULL", "max_pull_size", "num_pull_blocks"),
    "2shot_pull": ("TWO_SHOT_PULL", "max_pull_size", "num_pull_blocks"),
    "2shot_push": ("TWO_SHOT_PUSH", "max_two_shot_push_size", "num_push_blocks"),
}
NAMES = (*ALGOS, "2shot_pull_mc")
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MC_REASON = (
    "SGLang's CustomAllReduceV2 uses multicast only through its own size heuristic; its per-call override "
    "(override_algo) runs without multicast, so 2shot_pull_mc cannot be chosen per call"
)
CAPTURE_REASON = (
    "SGLang's CustomAllReduceV2 must wrap the CUDA-graph capture in its capture() context (to register the "
    "captured inputs with every peer afterwards); artune's Communicator does not drive that, so it runs "
    "eagerly only"
)


def names_unavailable(engine: Any, algo_enum: Any) -> dict[str, str]:
    """Per artune name, why this built ``CustomAllReduceV2`` cannot run it (absent when it can)."""
    reasons = {"2shot_pull_mc": MC_REASON}
    for name, (member, size_attr, _) in ALGOS.items():
        if not hasattr(algo_enum, member):
            reasons[name] = f"this SGLang's AllReduceAlgo has no {member}"
        elif int(getattr(engine, size_attr, 0) or 0) <= 0:
            reasons[name] = f"SGLang's CustomAllReduceV2 was built without a workspace for it ({size_attr} is 0)"
    return reasons


class _Shared:
    """One ``CustomAllReduceV2`` behind several names: closed with the last of them."""

    def __init__(self, engine: Any, group: Any, owned_group: bool, users: int) -> None:
        self.engine = engine
        self.group = group
        self.owned_group = owned_group
        self.users = users

    def release(self) -> None:
        self.users -= 1
        if self.users > 0:
            return
        with contextlib.suppress(Exception):
            self.engine.close()
        if self.owned_group:
            with contextlib.suppress(Exception):
                dist.destroy_process_group(self.group)


class SglangAllReduce(Algorithm):
    """One of SGLang's v2 algorithms, forced per call through ``override_algo`` (CUDA tensors)."""

    devices = frozenset({"cuda"})
    capturable = False

    def __init__(self, name: str, shared: _Shared, algo: Any, capacity: int, blocks: int | None) -> None:
        self.name = name
        self._shared = shared
        self._algo = algo
        #: the largest message this algorithm's workspace takes (bytes, inclusive)
        self.capacity = int(capacity)
        #: the grid the engine was built with, ``None`` when this SGLang does not expose it
        self.blocks = blocks
        self._closed = False

    def unavailable(self, dtype: torch.dtype, op: str) -> str | None:
        if op != "sum":
            return f"SGLang's custom all-reduce only sums (not {op!r})"
        if dtype not in DTYPES:
            return f"SGLang's custom all-reduce takes float32, float16 and bfloat16, not {dtype}"
        return None

    def unfit(self, nbytes: int, dtype: torch.dtype) -> str | None:
        if nbytes % 16:
            return f"SGLang's custom all-reduce needs a multiple of 16 bytes ({nbytes} is not)"
        if nbytes > self.capacity:
            return f"{self.name} takes at most {self.capacity} bytes here (its workspace); {nbytes} asked"
        return None

    def tunable_space(self) -> dict[str, tuple[object, ...]]:
        """``blocks``: the one grid this instance runs (SGLang fixes it when the class is built)."""
        return {} if self.blocks is None else {"blocks": (self.blocks,)}

    def bind(
        self, shape: torch.Size, dtype: torch.dtype, op: str, params: Mapping[str, object]
    ) -> Callable[[torch.Tensor], object]:
        wanted = params.get("blocks") if params else None
        if wanted is not None and (self.blocks is None or int(wanted) != self.blocks):  # type: ignore[call-overload]
            raise ArtuneError(
                f"{self.name}: the plan asks for blocks={wanted}, but SGLang's CustomAllReduceV2 here runs "
                f"{self.blocks if self.blocks is not None else 'a grid it does not report'} (fixed when it is "
                "built); tune on this machine or drop blocks from the plan"
            )
        return super().bind(shape, dtype, op, params)

    def all_reduce(self, tensor: torch.Tensor, op: str, params: Mapping[str, object]) -> torch.Tensor:
        if self._closed:
            raise ArtuneError(f"{self.name}: the SGLang adapter is closed")
        why = self.unavailable(tensor.dtype, op) or self.unfit(tensor.numel() * tensor.element_size(), tensor.dtype)
        if why is not None:
            raise ArtuneError(f"{self.name}: {why}")
        engine = self._shared.engine
        engine.override_algo = self._algo
        try:
            out = engine.custom_all_reduce(tensor)
        finally:
            engine.override_algo = None  # SGLang's own heuristic again for anyone else using the instance
        if out.data_ptr() != tensor.data_ptr():
            tensor.copy_(out.view(tensor.shape))
        return tensor

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._shared.release()


def _grid(engine: Any, attribute: str) -> int | None:
    value = getattr(getattr(engine, "config", None), attribute, None)
    return int(value) if isinstance(value, int) else None


def open_engine(group: Any, *, timeout: float) -> tuple[dict[str, Algorithm], dict[str, str]]:
    """SGLang's v2 algorithms that come up on every rank, and why each other name cannot.

    Collective over ``group``; every wait is bounded by the gloo group's timeout.
    """
    local = ""
    engine_class: Any = None
    algo_enum: Any = None
    try:
        module = __import__(MODULE, fromlist=["CustomAllReduceV2"])
        engine_class, algo_enum = module.CustomAllReduceV2, module.AllReduceAlgo
    except Exception as err:
        local = f"importing {MODULE} failed: {type(err).__name__}: {err}"[:300]
    why = agreed_problem(local, group)
    if why:
        return {}, dict.fromkeys(NAMES, why)
    gloo, owned = cpu_group(group, timeout)
    engine: Any = None
    try:
        engine = engine_class(gloo, engines.current_cuda_device())
        if engine.disabled:
            local = (
                "SGLang's CustomAllReduceV2 disabled itself (world size not in its tuned configs, or a "
                "single-node group without full NVLink)"
            )
    except Exception as err:
        local = f"building SGLang's CustomAllReduceV2 failed: {type(err).__name__}: {err}"[:300]
    why = agreed_problem(local, group)
    if why:
        _Shared(engine, gloo, owned, 1).release()
        return {}, dict.fromkeys(NAMES, why)
    local_reasons = names_unavailable(engine, algo_enum)
    reasons = {name: agreed_problem(local_reasons.get(name, ""), group) for name in NAMES}
    runnable = [name for name in ALGOS if not reasons[name]]
    shared = _Shared(engine, gloo, owned, max(len(runnable), 1))
    if not runnable:
        shared.release()
    local_shape = {name: (int(getattr(engine, ALGOS[name][1])), _grid(engine, ALGOS[name][2])) for name in runnable}
    shapes = gather(local_shape, group)  # every rank must bound sizes and report grids alike
    found: dict[str, Algorithm] = {}
    for name in runnable:
        capacity = min(int(s[name][0]) for s in shapes)  # type: ignore[index]
        grids = {s[name][1] for s in shapes}  # type: ignore[index]
        blocks = grids.pop() if len(grids) == 1 else None
        found[name] = SglangAllReduce(name, shared, getattr(algo_enum, ALGOS[name][0]), capacity, blocks)
    return found, {n: r for n, r in reasons.items() if r}
