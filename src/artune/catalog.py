"""The registry of algorithm names: every name a table may use is defined here, once.

An ``AlgorithmSpec`` is data about an algorithm (who runs it, which
parameters it needs, the static conditions under which its engine uses it)
and the vocabulary the rest of artune speaks about it: its scheme (how it
moves the data: one-shot, two-shot, multicast, or the collective library's
own choice) and the kernels it runs under the names the engines' benchmarks
give them (``artune.evidence``'s columns). The cost model's forms, the
evidence's kernel of an engine's choice and the review's families are all
read from here (``scheme_of``, ``KERNELS``), so a new algorithm is described
once.

It is a leaf module: the table model checks names against it and ``explain``
evaluates the static conditions; the runnable implementations live in
``artune.algorithms`` and refer to these specs by name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from enum import Enum

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


class Scheme(str, Enum):
    """How an all-reduce moves the data: what the cost model has a form for, and what the review calls its family."""

    ONE_SHOT = "one_shot"  # every rank reads every peer's input and reduces all of it: one round
    TWO_SHOT = "two_shot"  # reduce-scatter, then all-gather: two rounds, 2 (p-1)/p of the bytes each way
    MULTICAST = "multicast"  # the switch reduces and multicasts (NVLink SHARP, multimem): no peer copies
    LIBRARY = "library"  # the collective library's own all-reduce (NCCL, gloo, MPI), which picks its algorithm

    @property
    def label(self) -> str:
        """The scheme in prose: ``one-shot``, ``two-shot``, ``multicast``, ``library``."""
        return self.value.replace("_", "-")


@dataclass(frozen=True)
class Kernel:
    """A kernel an algorithm runs, named as the engines' benchmarks name their columns (``artune.evidence``).

    ``implementation`` is whose code moves the bytes: ``custom`` (an engine's
    own CUDA kernel), ``torch`` (PyTorch's symmetric-memory op, a fixed grid),
    ``nccl`` (NCCL choosing its algorithm), ``nccl_symm`` (NCCL's kernels on
    registered windows), ``flashinfer``, ``shm`` (artune's shared memory),
    ``gloo``, ``mpi``. ``scheme`` is ``None`` where the kernel picks its own
    (FlashInfer's).
    """

    name: str
    scheme: Scheme | None
    implementation: str


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
    #: the platforms it runs on (``Platform.kind``: cuda, rocm, cpu); ``None``: any
    kinds: frozenset[str] | None = None
    #: the kernels it stands for; the first is what it runs unless its engine picks one per call (vLLM's custom
    #: all-reduce: 1-stage, 2-stage above a size); none for an algorithm made of others (``hier_shm``)
    kernels: tuple[Kernel, ...] = ()

    @property
    def scheme(self) -> Scheme | None:
        """How it moves the data: its first kernel's scheme (``None``: no kernel, or one that picks its own)."""
        return self.kernels[0].scheme if self.kernels else None

    def kind_unmet(self, kind: str | None) -> str | None:
        """Why it cannot run on a ``kind`` platform, or ``None`` (a ``kind`` of ``None``: any platform)."""
        if kind is None or self.kinds is None or kind in self.kinds:
            return None
        return f"runs on {' and '.join(_KIND_NAMES[k] for k in sorted(self.kinds))} only, not on {_KIND_NAMES[kind]}"

    def topology_unmet(self, hosts: int) -> str | None:
        """Why it cannot run for ranks on ``hosts`` hosts, or ``None``."""
        if self.topology == "one_host" and hosts > 1:
            return f"runs only with every rank on one host, not across {hosts} hosts"
        if self.topology == "across_hosts" and hosts == 1:
            return "runs only when the ranks span several hosts"
        return None


_HALF_AND_FP32 = frozenset({"float32", "float16", "bfloat16"})
_HALF = frozenset({"float16", "bfloat16"})
_BF16 = frozenset({"bfloat16"})
_VLLM_WORLD_SIZES = frozenset({2, 4, 6, 8})
_CUDA = frozenset({"cuda"})
_ROCM = frozenset({"rocm"})
_KIND_NAMES = {"cuda": "CUDA", "rocm": "ROCm", "cpu": "CPU"}


def _library(name: str) -> tuple[Kernel, ...]:
    """A process-group backend's one kernel: the library's own all-reduce, under its name."""
    return (Kernel(name, Scheme.LIBRARY, name),)


def _vllm_symm_mem(kind: str, summary: str, scheme: Scheme) -> AlgorithmSpec:
    """vLLM's torch symmetric-memory path ``symm_mem_<kind>``: vLLM builds its communicator only where
    multicast works, for two-shot too. Its world sizes are no condition here: the release's own code decides
    them (its table, or a default it falls back on), and artune's reading evaluates that code."""
    conditions = Conditions(dtypes=_BF16, align=4, multicast=True)
    kernels = (Kernel(f"symm_mem/{kind}", scheme, "torch"),)
    return AlgorithmSpec(f"symm_mem_{kind}", "vllm", summary, conditions=conditions, kernels=kernels, kinds=_CUDA)


def _shm(name: str, summary: str, scheme: Scheme) -> AlgorithmSpec:
    """One of artune's shared-memory algorithms: one host, its own kernel under its name."""
    return AlgorithmSpec(
        name, "artune", summary, topology="one_host", kernels=(Kernel(name, scheme, "shm"),), kinds=frozenset({"cpu"})
    )


def _sglang(
    name: str,
    summary: str,
    scheme: Scheme,
    params: tuple[str, ...] = ("blocks",),
    multicast: bool = False,
    also: tuple[Kernel, ...] = (),
) -> AlgorithmSpec:
    """An SGLang v2 algorithm: 16-byte aligned sizes, its own kernel ``sglang/<name>`` (and ``also``)."""
    kernels = (Kernel(f"sglang/{name}", scheme, "custom"), *also)
    conditions = Conditions(align=16, multicast=multicast)
    return AlgorithmSpec(name, "sglang", summary, params, conditions, kernels=kernels, kinds=_CUDA)


def _rocm_custom(name: str, engine: str, summary: str, *kernels: Kernel) -> AlgorithmSpec:
    """A custom all-reduce over HIP IPC of vLLM's lineage on ROCm: its world sizes, dtypes and 16-byte sizes."""
    conditions = Conditions(world_sizes=_VLLM_WORLD_SIZES, dtypes=_HALF_AND_FP32, align=16)
    return AlgorithmSpec(name, engine, summary, conditions=conditions, kernels=kernels, kinds=_ROCM)


#: QuickReduce's levels (``QuickReduceRegime``, set once per process by ``VLLM_ROCM_QUICK_REDUCE_QUANTIZATION``
#: in vLLM, ``ROCM_QUICK_REDUCE_QUANTIZATION`` in SGLang): level -> the world sizes that run it (INT3 only at
#: two ranks, from the vLLM release that added it) and the bytes each rank sends per byte of fp16 input (its
#: codec's transmitted tile: ``bits / 16`` plus one fp16 scale per 32 elements; mk1-project/quickreduce
#: ``csrc/core/allreduce.h``, ``kRankTileStride`` over the 4 KiB fp16 tile: Q8 2176, Q6 1664, Q4 1152 bytes)
QUICK_REDUCE_LEVELS: dict[str, tuple[frozenset[int], float]] = {
    "fp": (frozenset({2, 4, 8}), 1.0),
    "int8": (frozenset({2, 4, 8}), 8.5 / 16),
    "int6": (frozenset({2, 4, 8}), 6.5 / 16),
    "int4": (frozenset({2, 4, 8}), 4.5 / 16),
    "int3": (frozenset({2}), 3.5 / 16),
}


def _quick_reduce(level: str) -> AlgorithmSpec:
    """QuickReduce at one quantization level: a two-shot kernel on ROCm that sends each rank's shard
    compressed by the level's codec (lossy below ``fp``), fp16 and bf16 only (bf16 cast to fp16 by default),
    16-byte aligned sizes. From vLLM 0.33, INT4 runs AITER's FlyDSL kernel where AITER provides it."""
    world_sizes, _ratio = QUICK_REDUCE_LEVELS[level]
    kernels = (Kernel(f"quickreduce/{level}", Scheme.TWO_SHOT, f"quickreduce_{level}"),)
    if level == "int4":
        kernels += (Kernel("flydsl/qr_int4", Scheme.TWO_SHOT, "flydsl"),)
    quantized = "full precision" if level == "fp" else f"quantized to {level.upper()} on the wire (lossy)"
    return AlgorithmSpec(
        f"quick_ar_{level}",
        "vllm",
        f"QuickReduce all-reduce, {quantized} (vLLM's and SGLang's port of mk1-project/quickreduce)",
        conditions=Conditions(world_sizes=world_sizes, dtypes=_HALF, align=16),
        kernels=kernels,
        kinds=_ROCM,
    )


SPECS: dict[str, AlgorithmSpec] = {
    spec.name: spec
    for spec in (
        # process-group all-reduce, named after its torch.distributed backend
        AlgorithmSpec(
            "gloo", "torch", "torch.distributed.all_reduce on a gloo process group", kernels=_library("gloo")
        ),
        AlgorithmSpec(
            "nccl", "torch", "NCCL all-reduce (torch.distributed or the engine's pynccl)", kernels=_library("nccl")
        ),
        # on ROCm torch's "nccl" backend and the engines' pynccl load RCCL: a ROCm table names it for what runs
        # (a ROCm table that says nccl still reads, and runs the same process group)
        AlgorithmSpec(
            "rccl",
            "torch",
            "RCCL all-reduce on ROCm (torch.distributed's nccl backend there, or the engine's pynccl)",
            kernels=_library("rccl"),
            kinds=_ROCM,
        ),
        AlgorithmSpec("mpi", "torch", "torch.distributed.all_reduce on an MPI process group", kernels=_library("mpi")),
        # artune's CPU algorithms
        _shm("shm_one_shot", "shared memory: every rank reduces all slots", Scheme.ONE_SHOT),
        _shm("shm_two_shot", "shared memory: reduce-scatter then all-gather", Scheme.TWO_SHOT),
        AlgorithmSpec(
            "hier_shm",
            "artune",
            "across hosts: shared-memory reduce in each host, process-group all-reduce among host leaders, "
            "shared-memory broadcast",
            topology="across_hosts",
            kinds=frozenset({"cpu"}),
        ),
        # vLLM (vllm/distributed/device_communicators)
        # built for ROCm too, from the same source (hipified): its caps there are vLLM's ROCm dispatch's
        AlgorithmSpec(
            "custom_ar",
            "vllm",
            "vLLM custom all-reduce over CUDA (or HIP) IPC peer memory",
            # its world sizes are the release's (_SUPPORTED_WORLD_SIZES, and what its own code admits), read by
            # evaluating that code, never a list kept here
            conditions=Conditions(dtypes=_HALF_AND_FP32, align=16),
            # it picks per call (artune.formats.vllm.rules.custom_ar_kernel)
            kernels=(
                Kernel("custom_ar/1stage", Scheme.ONE_SHOT, "custom"),
                Kernel("custom_ar/2stage", Scheme.TWO_SHOT, "custom"),
            ),
        ),
        _vllm_symm_mem("multimem", "torch symmetric memory multimem all-reduce (NVLS)", Scheme.MULTICAST),
        # vLLM 0.29 on runs FlashInfer's standalone all-reduce first by default (VLLM_ALLREDUCE_USE_FLASHINFER=1):
        # should_use_fi_ar takes 2-D fp16/bf16/fp32 inputs, any alignment; its world sizes are its table's rows
        AlgorithmSpec(
            "flashinfer_ar",
            "vllm",
            "FlashInfer's all-reduce in vLLM (MNNVL backend on one host, TRT-LLM where multicast is missing)",
            conditions=Conditions(dtypes=_HALF_AND_FP32),
            # its backend by the machine (artune.formats.vllm.rules.kernel); each picks one-shot or two-shot itself
            kernels=(Kernel("flashinfer/mnnvl", None, "flashinfer"), Kernel("flashinfer/trtllm", None, "flashinfer")),
            kinds=_CUDA,
        ),
        # artune runs the torch ops under the same names (artune.algorithms.cuda); one-shot is not in
        # vLLM's table but is a torch op, and SGLang's torch_symm_mem path uses it
        AlgorithmSpec(
            "symm_mem_one_shot",
            "torch",
            "torch symmetric memory one-shot all-reduce (every rank reads every peer's buffer)",
            conditions=Conditions(dtypes=frozenset({"bfloat16", "float32"}), align=4),
            kernels=(Kernel("symm_mem_one_shot", Scheme.ONE_SHOT, "torch"),),  # no benchmark prints it: its own name
            kinds=_CUDA,
        ),
        _vllm_symm_mem("two_shot", "torch symmetric memory two-shot all-reduce", Scheme.TWO_SHOT),
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
            # one kernel that picks one or two stages itself, as SGLang's benchmark prints it (its AOT column)
            kernels=(Kernel("sglang/custom_ar_v1", None, "custom"),),
        ),
        # SGLang custom_all_reduce_v2 (needs 16-byte aligned sizes): each its own kernel, picked by table
        _sglang("2shot_push", "SGLang two-shot push", Scheme.TWO_SHOT),
        # an early SGLang v2 config shape (A') has a Lamport two-shot band; its grid is not in the configs
        _sglang("2shot_lamport", "SGLang two-shot with Lamport flags", Scheme.TWO_SHOT, params=()),
        # vLLM's PushAllReduce (its benchmark's push_ar column) is a port of this kernel
        _sglang(
            "1shot_push", "SGLang one-shot push", Scheme.ONE_SHOT, also=(Kernel("push_ar", Scheme.ONE_SHOT, "custom"),)
        ),
        _sglang("1shot_pull", "SGLang one-shot pull", Scheme.ONE_SHOT),
        _sglang("2shot_pull_mc", "SGLang two-shot pull with NVLink multicast", Scheme.MULTICAST, multicast=True),
        _sglang("2shot_pull", "SGLang two-shot pull", Scheme.TWO_SHOT),
        # TensorRT-LLM (AllReduceStrategyType; its lookup tables hold these four)
        AlgorithmSpec(
            "trtllm_oneshot",
            "trtllm",
            "TensorRT-LLM ONESHOT: fused one-shot all-reduce over IPC peer memory",
            kernels=(Kernel("trtllm/oneshot", Scheme.ONE_SHOT, "custom"),),
            kinds=_CUDA,
        ),
        AlgorithmSpec(
            "trtllm_twoshot",
            "trtllm",
            "TensorRT-LLM TWOSHOT: fused reduce-scatter + all-gather over IPC",
            kernels=(Kernel("trtllm/twoshot", Scheme.TWO_SHOT, "custom"),),
            kinds=_CUDA,
        ),
        AlgorithmSpec(
            "nccl_symmetric",
            "trtllm",
            "TensorRT-LLM NCCL_SYMMETRIC: NCCL on symmetric (window) memory",
            kernels=(Kernel("nccl_symm", Scheme.LIBRARY, "nccl_symm"),),
            kinds=_CUDA,
        ),
        # ROCm (vllm/distributed/device_communicators, sglang/srt/distributed/device_communicators)
        *(_quick_reduce(level) for level in QUICK_REDUCE_LEVELS),
        # AITER's CustomAllreduce (aiter/dist/device_communicators/custom_all_reduce.py): vLLM's ROCm custom
        # all-reduce by default (VLLM_ROCM_USE_AITER_CUSTOM_AR) and SGLang's on HIP (SGLANG_USE_AITER_AR); a
        # fork of vLLM's kernel whose C++ picks one or two stages per call
        _rocm_custom(
            "aiter_ar",
            "aiter",
            "AITER's custom all-reduce over HIP IPC peer memory (vLLM's and SGLang's default on ROCm)",
            Kernel("aiter_ar/1stage", Scheme.ONE_SHOT, "custom"),
            Kernel("aiter_ar/2stage", Scheme.TWO_SHOT, "custom"),
        ),
        # SGLang's legacy CustomAllreduce on HIP in its deterministic mode (SGLANG_USE_1STAGE_ALLREDUCE=1, or
        # deterministic inference): sgl-kernel's one-stage kernel with a fixed reduction order, every size
        # (above its buffer in pieces), on any ROCm node
        _rocm_custom(
            "custom_ar_v1_1stage",
            "sglang",
            "SGLang's deterministic one-stage custom all-reduce on ROCm (fixed reduction order, any size)",
            Kernel("sglang/deterministic_1stage", Scheme.ONE_SHOT, "custom"),
        ),
    )
}

#: every kernel an algorithm stands for, by its name; each belongs to one algorithm
KERNELS: dict[str, Kernel] = {k.name: k for spec in SPECS.values() for k in spec.kernels}
#: the algorithm each kernel of ``KERNELS`` belongs to
ALGORITHM_OF_KERNEL: dict[str, str] = {k.name: spec.name for spec in SPECS.values() for k in spec.kernels}


def scheme_of(name: str) -> Scheme | None:
    """The scheme of an algorithm or a kernel named ``name``; ``None`` for one without (or an unknown name)."""
    if name in SPECS:
        return SPECS[name].scheme
    kernel = KERNELS.get(name)
    return kernel.scheme if kernel is not None else None


def unavailable(
    world_size: int, dtype: str | None, nbytes: int, multicast: bool, hosts: int = 1, kind: str | None = None
) -> dict[str, str]:
    """Algorithm name -> why its static conditions, topology or platform (``kind``; ``None``: any) rule it out
    for this call."""
    return {
        name: why
        for name, spec in SPECS.items()
        if (
            why := spec.kind_unmet(kind)
            or spec.conditions.unmet(world_size, dtype, nbytes, multicast)
            or spec.topology_unmet(hosts)
        )
    }


def available(
    world_size: int, dtype: str | None, nbytes: int, multicast: bool, hosts: int = 1, kind: str | None = None
) -> frozenset[str]:
    """The algorithms whose static conditions hold for this call: what ``decide`` may choose from."""
    return frozenset(
        name for name, align in _runnable(world_size, dtype, multicast, hosts, kind) if nbytes % align == 0
    )


@functools.lru_cache(maxsize=4096)
def _runnable(
    world_size: int, dtype: str | None, multicast: bool, hosts: int, kind: str | None
) -> tuple[tuple[str, int], ...]:
    """(name, alignment) of the algorithms whose conditions hold at some size: of the conditions only the
    alignment depends on the message, so an oracle's many probes check the rest once per call shape."""
    ruled_out = unavailable(world_size, dtype, 0, multicast, hosts, kind)  # 0 bytes meets every alignment
    return tuple((name, spec.conditions.align) for name, spec in SPECS.items() if name not in ruled_out)


def spec(name: str) -> AlgorithmSpec:
    """The spec for ``name``; ``KeyError`` with the known names when it is unknown."""
    try:
        return SPECS[name]
    except KeyError:
        raise KeyError(f"unknown algorithm {name!r}; known: {', '.join(sorted(SPECS))}") from None
