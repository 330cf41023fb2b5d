"""vLLM's custom all-reduce (``CustomAllreduce``) as ``custom_ar``.

Where this has run: docs/status.md.

Facts used (vLLM ``vllm/distributed/device_communicators/custom_all_reduce.py``,
commit 00d618aa): ``CustomAllreduce(group, device,
max_size=8 MiB)`` takes a non-NCCL (gloo) group and exchanges CUDA IPC
buffers over it; newer versions defer the P2P check and buffer set-up to a
collective ``finalize_p2p()``. It disables itself (``disabled``) for
world sizes outside 2, 4, 6, 8, for ranks on several nodes, for more than
two GPUs without full NVLink and when the P2P check fails. ``custom_all_reduce``
is out of place and returns ``None`` unless ``should_custom_ar`` holds:
size a multiple of 16 bytes and strictly below ``max_size``. The kernel
sums; vLLM runs it for fp32, fp16 and bf16. vLLM chooses between its one-
and two-stage kernels inside the C++ op by size and world size, so the
stage cannot be chosen per call: there is one name and no tunable.

Graph mode: during a capture vLLM's op records the input's address and its
``capture()`` context exchanges those addresses' IPC handles after the
capture ends. The Communicator does not wrap the caller's capture in that
context, so the adapter is not capturable (``CAPTURE_REASON``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist

from artune.algorithms import engines
from artune.algorithms.base import Algorithm
from artune.algorithms.engines import agreed_problem, cpu_group, gather
from artune.errors import ArtuneError

NAME = "custom_ar"
MODULE = "vllm.distributed.device_communicators.custom_all_reduce"
WORLD_SIZES = (2, 4, 6, 8)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
#: vLLM's own default buffer (its per-arch table only lowers it)
DEFAULT_MAX_SIZE = 8 << 20
CAPTURE_REASON = (
    "vLLM's CustomAllreduce must wrap the CUDA-graph capture in its capture() context (to exchange the "
    "captured inputs' IPC handles afterwards); artune's Communicator does not drive that, so custom_ar "
    "runs eagerly only"
)


def open_problem(world_size: int, world_group_ready: bool, skip_p2p_check: bool) -> str | None:
    """Why ``CustomAllreduce`` cannot be built on a plain process group of ``world_size`` here, or ``None``."""
    if world_size not in WORLD_SIZES:
        return f"vLLM's CustomAllreduce takes world sizes {list(WORLD_SIZES)}, not {world_size}"
    if not (world_group_ready or skip_p2p_check):
        return (
            "vLLM's P2P check (all_reduce_utils.gpu_p2p_access_check) needs vLLM's world group "
            "(vllm.distributed.parallel_state.init_distributed_environment); set VLLM_SKIP_P2P_CHECK=1 to "
            "trust the driver's P2P report instead"
        )
    return None


def _world_group_ready() -> bool:
    try:
        from vllm.distributed import parallel_state

        return getattr(parallel_state, "_WORLD", None) is not None
    except Exception:
        return False


class VllmCustomAllReduce(Algorithm):
    """``custom_ar``: vLLM's ``CustomAllreduce`` on a gloo group over the Communicator's ranks (CUDA tensors)."""

    name = NAME
    devices = frozenset({"cuda"})
    capturable = False

    def __init__(self, engine: Any, max_size: int, group: Any = None, owned_group: bool = False) -> None:
        self._engine = engine
        #: the largest message + 1 (vLLM's bound is strict); the smallest over the ranks
        self.max_size = int(max_size)
        self._group = group
        self._owned_group = owned_group
        self._closed = False

    def unavailable(self, dtype: torch.dtype, op: str) -> str | None:
        if op != "sum":
            return f"vLLM's custom all-reduce only sums (not {op!r})"
        if dtype not in DTYPES:
            return f"vLLM's custom all-reduce takes float32, float16 and bfloat16, not {dtype}"
        return None

    def unfit(self, nbytes: int, dtype: torch.dtype) -> str | None:
        if nbytes % 16:
            return f"vLLM's custom all-reduce needs a multiple of 16 bytes ({nbytes} is not)"
        if nbytes >= self.max_size:
            return f"vLLM's custom all-reduce takes messages below its {self.max_size}-byte buffer ({nbytes} bytes)"
        return None

    def all_reduce(self, tensor: torch.Tensor, op: str, params: Mapping[str, object]) -> torch.Tensor:
        if self._closed:
            raise ArtuneError("custom_ar: the vLLM adapter is closed")
        why = self.unavailable(tensor.dtype, op) or self.unfit(tensor.numel() * tensor.element_size(), tensor.dtype)
        if why is not None:
            raise ArtuneError(f"custom_ar: {why}")
        out = self._engine.custom_all_reduce(tensor)
        if out is None:  # should_custom_ar refused a call unfit() accepted: never pretend it ran
            raise ArtuneError(
                f"custom_ar: vLLM's CustomAllreduce refused a {tuple(tensor.shape)} {tensor.dtype} tensor "
                "(should_custom_ar is false)"
            )
        tensor.copy_(out)  # vLLM's op is out of place
        return tensor

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._engine.close()
        if self._owned_group:
            with contextlib.suppress(Exception):
                dist.destroy_process_group(self._group)


def open_engine(
    group: Any, *, timeout: float, max_size: int = DEFAULT_MAX_SIZE
) -> tuple[dict[str, Algorithm], dict[str, str]]:
    """``{"custom_ar": adapter}`` when vLLM's ``CustomAllreduce`` comes up on every rank, else the reason.

    Collective over ``group``. Every wait is bounded by the gloo group's
    timeout (``timeout`` seconds when artune creates that group).
    """
    problem = open_problem(
        dist.get_world_size(group), _world_group_ready(), os.environ.get("VLLM_SKIP_P2P_CHECK", "0") == "1"
    )
    why = agreed_problem(problem or "", group)  # every rank takes part, whatever its own answer
    if why:
        return {}, {NAME: why}
    local = ""
    try:
        module = __import__(MODULE, fromlist=["CustomAllreduce"])
        engine_class = module.CustomAllreduce
    except Exception as err:
        local = f"importing {MODULE} failed: {type(err).__name__}: {err}"
    why = agreed_problem(local, group)
    if why:
        return {}, {NAME: why}
    gloo, owned = cpu_group(group, timeout)
    engine: Any = None
    try:
        engine = engine_class(gloo, engines.current_cuda_device(), max_size=max_size)
        finalize = getattr(engine, "finalize_p2p", None)
        if finalize is not None:  # newer vLLM: the P2P check and the IPC buffers come here (collective)
            finalize()
        if engine.disabled:
            local = (
                "vLLM's CustomAllreduce disabled itself (its log says why: ranks on several nodes, more than "
                "two GPUs without full NVLink, or a failed P2P check)"
            )
    except Exception as err:
        local = f"building vLLM's CustomAllreduce failed: {type(err).__name__}: {err}"[:300]
    why = agreed_problem(local, group)
    if why:
        adapter = VllmCustomAllReduce(engine, 0, gloo, owned)
        adapter.close()
        return {}, {NAME: why}
    sizes = [int(s) for s in gather(int(engine.max_size), group)]  # type: ignore[call-overload]
    return {NAME: VllmCustomAllReduce(engine, min(sizes), gloo, owned)}, {}
