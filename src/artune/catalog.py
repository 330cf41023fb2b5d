"""The registry of algorithm names: every name a table may use is defined here, once.

An ``AlgorithmSpec`` is data about an algorithm (who runs it, which
parameters it needs, the static conditions under which its engine uses it).
It is a leaf module: the table model checks names against it and ``explain``
evaluates the static conditions; the runnable implementations live in
``artune.algorithms`` and refer to these specs by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64")
#: the chunk the shared-memory algorithms reduce in by default (their ``chunk_bytes``); the cost model reads it too
SHM_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Conditions:
    """Static conditions an engine checks before using an algorithm; ``None`` means any."""

    world_sizes: frozenset[int] | None = None
    dtypes: frozenset[str] | None = None
    align: int = 1  # nbytes must be a multiple of this
    multicast: bool = False  # needs NVLink multicast (NVLS) at run time

    def unmet(self, world_size: int, dtype: str | None, nbytes: int, multicast: bool) -> str | None:
        """Why the conditions fail for this call, or ``None`` when they hold.

        A ``dtype`` of ``None`` skips the dtype condition.
        """
        if self.world_sizes is not None and world_size not in self.world_sizes:
            return f"world_size={world_size} not in {sorted(self.world_sizes)}"
        if dtype is not None and self.dtypes is not None and dtype not in self.dtypes:
            return f"dtype {dtype} not in {sorted(self.dtypes)}"
        if nbytes % self.align:
            return f"{nbytes} bytes is not a multiple of {self.align}"
        if self.multicast and not multicast:
            return "multicast (NVLS) is not available"
        return None


@dataclass(frozen=True)
class AlgorithmSpec:
    """One known algorithm name."""

    name: str
    engine: str  # who runs it: "artune", "vllm", "sglang", "torch" (process-group backends)
    summary: str
    required_params: tuple[str, ...] = ()
    conditions: Conditions = field(default_factory=Conditions)
    #: where it runs: "one_host" (shared memory of one machine), "across_hosts" (needs ranks on 2+ hosts), "any"
    topology: str = "any"

    def topology_unmet(self, hosts: int) -> str | None:
        """Why it cannot run for ranks on ``hosts`` hosts, or ``None``."""
        if self.topology == "one_host" and hosts > 1:
            return f"runs only with every rank on one host, not across {hosts} hosts"
        if self.topology == "across_hosts" and hosts == 1:
            return "runs only when the ranks span several hosts"
        return None


_HALF_AND_FP32 = frozenset({"float32", "float16", "bfloat16"})
_BF16 = frozenset({"bfloat16"})
_VLLM_WORLD_SIZES = frozenset({2, 4, 6, 8})
_ALIGN16 = Conditions(align=16)

SPECS: dict[str, AlgorithmSpec] = {
    spec.name: spec
    for spec in (
        # process-group all-reduce, named after its torch.distributed backend
        AlgorithmSpec("gloo", "torch", "torch.distributed.all_reduce on a gloo process group"),
        AlgorithmSpec("nccl", "torch", "NCCL all-reduce (torch.distributed or the engine's pynccl)"),
        AlgorithmSpec("mpi", "torch", "torch.distributed.all_reduce on an MPI process group"),
        # artune's CPU algorithms
        AlgorithmSpec("shm_one_shot", "artune", "shared memory: every rank reduces all slots", topology="one_host"),
        AlgorithmSpec("shm_two_shot", "artune", "shared memory: reduce-scatter then all-gather", topology="one_host"),
        AlgorithmSpec(
            "hier_shm",
            "artune",
            "across hosts: shared-memory reduce in each host, process-group all-reduce among host leaders, "
            "shared-memory broadcast",
            topology="across_hosts",
        ),
        # vLLM (vllm/distributed/device_communicators)
        AlgorithmSpec(
            "custom_ar",
            "vllm",
            "vLLM custom all-reduce over CUDA IPC peer memory",
            conditions=Conditions(world_sizes=_VLLM_WORLD_SIZES, dtypes=_HALF_AND_FP32, align=16),
        ),
        # vLLM builds its symmetric-memory communicator only for the world sizes in its
        # table and only where multicast works, for two-shot too
        AlgorithmSpec(
            "symm_mem_multimem",
            "vllm",
            "torch symmetric memory multimem all-reduce (NVLS)",
            conditions=Conditions(world_sizes=_VLLM_WORLD_SIZES, dtypes=_BF16, align=4, multicast=True),
        ),
        # vLLM 0.29 on runs FlashInfer's standalone all-reduce first by default (VLLM_ALLREDUCE_USE_FLASHINFER=1):
        # should_use_fi_ar takes 2-D fp16/bf16/fp32 inputs, any alignment; its world sizes are its table's rows
        AlgorithmSpec(
            "flashinfer_ar",
            "vllm",
            "FlashInfer's all-reduce in vLLM (MNNVL backend on one host, TRT-LLM where multicast is missing)",
            conditions=Conditions(dtypes=_HALF_AND_FP32),
        ),
        # artune runs the torch ops under the same names (artune.algorithms.cuda); one-shot is not in
        # vLLM's table but is a torch op, and SGLang's torch_symm_mem path uses it
        AlgorithmSpec(
            "symm_mem_one_shot",
            "torch",
            "torch symmetric memory one-shot all-reduce (every rank reads every peer's buffer)",
            conditions=Conditions(dtypes=frozenset({"bfloat16", "float32"}), align=4),
        ),
        AlgorithmSpec(
            "symm_mem_two_shot",
            "vllm",
            "torch symmetric memory two-shot all-reduce",
            conditions=Conditions(world_sizes=_VLLM_WORLD_SIZES, dtypes=_BF16, align=4, multicast=True),
        ),
        # SGLang's legacy CustomAllreduce (custom_all_reduce.py), which dispatch_custom_allreduce picks where v2
        # is off or declines the group: sgl_kernel's all-reduce, a port of vLLM's custom all-reduce
        # (sgl-kernel/csrc/allreduce/custom_all_reduce.cuh, "adapted from vLLM v0.8.2") with its own one/two-stage
        # switch in C++; float32, float16 and bfloat16 only. Its world sizes and sizes are the class's own
        # (_SUPPORTED_WORLD_SIZES, max_size), read from the release, not stated here.
        AlgorithmSpec(
            "custom_ar_v1",
            "sglang",
            "SGLang's legacy CustomAllreduce: sgl-kernel's port of vLLM's custom all-reduce over CUDA IPC",
            conditions=Conditions(dtypes=_HALF_AND_FP32, align=16),
        ),
        # SGLang custom_all_reduce_v2 (needs 16-byte aligned sizes)
        AlgorithmSpec("2shot_push", "sglang", "SGLang two-shot push", ("blocks",), _ALIGN16),
        # an early SGLang v2 config shape (A') has a Lamport two-shot band; its grid is not in the configs
        AlgorithmSpec("2shot_lamport", "sglang", "SGLang two-shot with Lamport flags", (), _ALIGN16),
        AlgorithmSpec("1shot_push", "sglang", "SGLang one-shot push", ("blocks",), _ALIGN16),
        AlgorithmSpec("1shot_pull", "sglang", "SGLang one-shot pull", ("blocks",), _ALIGN16),
        AlgorithmSpec(
            "2shot_pull_mc",
            "sglang",
            "SGLang two-shot pull with NVLink multicast",
            ("blocks",),
            Conditions(align=16, multicast=True),
        ),
        AlgorithmSpec("2shot_pull", "sglang", "SGLang two-shot pull", ("blocks",), _ALIGN16),
        # TensorRT-LLM (AllReduceStrategyType; its lookup tables hold these four)
        AlgorithmSpec(
            "trtllm_oneshot", "trtllm", "TensorRT-LLM ONESHOT: fused one-shot all-reduce over IPC peer memory"
        ),
        AlgorithmSpec("trtllm_twoshot", "trtllm", "TensorRT-LLM TWOSHOT: fused reduce-scatter + all-gather over IPC"),
        AlgorithmSpec("nccl_symmetric", "trtllm", "TensorRT-LLM NCCL_SYMMETRIC: NCCL on symmetric (window) memory"),
    )
}


def unavailable(world_size: int, dtype: str | None, nbytes: int, multicast: bool, hosts: int = 1) -> dict[str, str]:
    """Algorithm name -> why its static conditions (or topology) rule it out for this call."""
    return {
        name: why
        for name, spec in SPECS.items()
        if (why := spec.conditions.unmet(world_size, dtype, nbytes, multicast) or spec.topology_unmet(hosts))
    }


def available(world_size: int, dtype: str | None, nbytes: int, multicast: bool, hosts: int = 1) -> frozenset[str]:
    """The algorithms whose static conditions hold for this call: what ``decide`` may choose from."""
    return frozenset(SPECS) - unavailable(world_size, dtype, nbytes, multicast, hosts).keys()


def spec(name: str) -> AlgorithmSpec:
    """The spec for ``name``; ``KeyError`` with the known names when it is unknown."""
    try:
        return SPECS[name]
    except KeyError:
        raise KeyError(f"unknown algorithm {name!r}; known: {', '.join(sorted(SPECS))}") from None
