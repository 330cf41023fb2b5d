"""Published per-size all-reduce latency sweeps on NVLink GPUs, as fit and validation data.

Every sweep says which GPU (a preset), world size, timing mode and, per
column, which kernel ran; numbers are from
``shared/reference/gpu-measured.md`` (section ids ``DS..``), in
microseconds. The vLLM sweeps are files in the benchmark's own output format
under ``artune/costmodel/data/`` (package data; their README names each
source), read by ``artune.evidence`` as a user's sweep is; the others, whose
sources printed none of the formats artune reads (symm-mem-recipes', kraken's
tables, Azure's busbw summaries, an issue's list), are typed here. Where the
reference marks a label as inferred, the sweep's ``note`` says so.

A *kernel* is one of the GPU model's, ``scheme/implementation``
(``artune.costmodel.gpu.KERNELS``): the scheme is the catalog's
(``one_shot``, ``two_shot``, ``multicast``, ``library``); the
implementation is ``custom`` (an engine-style kernel using the GPU's SMs:
vLLM's custom all-reduce, SGLang's, Triton's), ``torch`` (the torch
symmetric-memory ops, launched with few blocks) or, for the library, NCCL
as it was run (``nccl``: NCCL chooses; ``nccl_ring``/``nccl_nvls``: forced).

Modes: ``graph`` is pipelined back-to-back calls (CUDA graphs of several
calls, as vLLM's ``benchmark_device_communicators.py`` and nccl-tests ``-G``
time them); ``eager`` is calls timed one at a time (CUDA events around each
call after an L2 flush, as symm-mem-recipes and kraken do, or eager launches
as nccl-tests without ``-G`` and torch.distributed loops do).

Not used, and why (so that "every point" is checkable):

- DS1: held back from the reference file;
- DS3b, DS4, DS8, DS12c, DS15 (SGLang #10571): the GPU is not stated (DS3c
  is used: its own section and the reference's summary place it on H100);
- DS7: vLLM's and SGLang's custom all-reduce switch between one and two
  stages inside the call, and the size unit is unconfirmed;
- DS10 kraken #6: a rerun of #7's columns (within 3%), kept out so kraken
  does not count twice;
- DS11 A100: no A100 family in the model;
- DS12a, DS12b, DS12d: floors at one or three sizes (a sweep's own offset
  absorbs them), MSCCL++ kernels, single-figure statements;
- DS12f: 72 GPUs across an NVL72 rack, beyond one NVLink board's forms;
- DS14, DS5 #53318: fused all-reduce + RMSNorm, not a plain all-reduce;
- DS15 Megatron: reduce-scatter and all-gather, not all-reduce.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from artune import catalog
from artune.costmodel.gpu import KERNELS, model_kernel

if TYPE_CHECKING:
    from artune.evidence import BenchmarkSweep

KiB, MiB = 1 << 10, 1 << 20
NAN = math.nan


@dataclass(frozen=True)
class Sweep:
    """One published sweep: sizes in bytes, one time column (us) per kernel, ``nan`` where not published."""

    id: str
    source: str
    preset: str
    world_size: int
    mode: str
    kernels: tuple[str, ...]
    sizes: tuple[int, ...]
    times: tuple[tuple[float, ...], ...]  # per size, one time per kernel
    note: str = ""

    def __post_init__(self) -> None:
        if len(self.times) != len(self.sizes) or any(len(row) != len(self.kernels) for row in self.times):
            raise ValueError(f"{self.id}: {len(self.sizes)} sizes, {len(self.kernels)} kernels: rows do not match")
        for kernel in self.kernels:
            if kernel not in KERNELS:
                raise ValueError(f"{self.id}: kernel {kernel!r} is none of the model's: {', '.join(KERNELS)}")

    @property
    def choice(self) -> bool:
        """Whether the sweep has more than one kernel (a choice to score)."""
        return len(self.kernels) > 1

    def points(self) -> list[tuple[int, str, float]]:
        """``(bytes, kernel, us)`` for every published time."""
        return [
            (n, k, t)
            for n, row in zip(self.sizes, self.times, strict=True)
            for k, t in zip(self.kernels, row, strict=True)
            if not math.isnan(t)
        ]


#: the evidence kernels (``artune.evidence``'s columns) the forms describe -> the model's kernel, from the catalog
MODEL_KERNELS = {name: k for name, kernel in catalog.KERNELS.items() if (k := model_kernel(kernel)) is not None}


def from_evidence(evidence: BenchmarkSweep, sweep_id: str, preset: str, note: str = "") -> Sweep:
    """A benchmark's output (``artune.evidence.read_evidence``) as fit data on ``preset``'s GPU: the columns
    whose kernel the forms describe (``MODEL_KERNELS``; NCCL's in-place twin, NCCL's symmetric kernels,
    FlashInfer and the engines' whole dispatches are left out), sizes and times as read."""
    keep = [i for i, c in enumerate(evidence.columns) if c.kernel in MODEL_KERNELS]
    if not keep:
        raise ValueError(f"{evidence.source}: no column the cost model has a form for")
    return Sweep(
        sweep_id,
        f"{evidence.benchmark} ({evidence.timing})",
        preset,
        evidence.world_size,
        evidence.mode,
        tuple(MODEL_KERNELS[evidence.columns[i].kernel] for i in keep),
        evidence.sizes,
        tuple(tuple(row[i] for i in keep) for row in evidence.times),
        note,
    )


def _file(name: str, columns: tuple[str, ...]) -> tuple[tuple[int, ...], tuple]:
    """Sizes and times (us) of the sweep file ``name`` in ``artune/costmodel/data/``, ``columns`` in kernel order."""
    from importlib.resources import files

    from artune.evidence import read_text

    found = read_text(files("artune.costmodel").joinpath("data", name).read_text(encoding="utf-8"), name)
    names = [c.name for c in found.columns]
    order = [names.index(c) for c in columns]
    return found.sizes, tuple(tuple(row[i] for i in order) for row in found.times)


_SYMM = ("pynccl", "symm_mem_multimem", "symm_mem_two_shot")


def _us(rows: tuple[tuple[float, tuple[float, ...]], ...], unit: int) -> tuple[tuple[int, ...], tuple]:
    return tuple(int(s * unit) for s, _ in rows), tuple(tuple(t) for _, t in rows)


def _busbw(rows: tuple[tuple[int, float], ...], world_size: int) -> tuple[tuple[int, ...], tuple]:
    """nccl-tests bus bandwidth (GB/s) -> time: t = 2 (p-1)/p bytes / busbw (gpu-measured.md DS11)."""
    factor = 2 * (world_size - 1) / world_size
    return tuple(n for n, _ in rows), tuple((factor * n / (bw * 1e3),) for n, bw in rows)


_VLLM = "vLLM benchmark_device_communicators.py, CUDA graph of 10 calls, bf16"
_DS11_SIZES = tuple(1 << k for k in range(10, 34))


def _ds11(values: str) -> tuple[tuple[int, float], ...]:
    """A DS11 column (busbw GB/s at 1 KiB, 2 KiB, ... 8 GiB) as written in the source."""
    return tuple(zip(_DS11_SIZES, map(float, values.split()), strict=True))


SWEEPS: tuple[Sweep, ...] = (
    Sweep(
        "DS2a",
        f"vLLM PR #42324, SM 9.0 section ({_VLLM})",
        "h100-sxm",
        8,
        "graph",
        ("library/nccl", "multicast/torch", "two_shot/torch"),
        *_file("ds2a-sm90-ws8.json", _SYMM),
        note="world size 8 inferred (the last SM 9.0 table); H100/H200 class",
    ),
    Sweep(
        "DS2b",
        f"vLLM PR #42324, SM 10.0 / B200, world size 2 ({_VLLM})",
        "b200",
        2,
        "graph",
        ("library/nccl", "multicast/torch", "two_shot/torch"),
        *_file("ds2b-sm100-ws2.json", _SYMM),
        note="first rows only (the rest was cut off)",
    ),
    Sweep(
        "DS2c",
        f"vLLM PR #42324, Blackwell world size 2 ({_VLLM})",
        "b300",
        2,
        "graph",
        ("library/nccl", "multicast/torch", "two_shot/torch"),
        *_file("ds2c-sm103-ws2.json", _SYMM),
        note="SM 10.3 (B300) inferred from its NCCL bandwidth and its 4 MiB two-shot limit",
    ),
    Sweep(
        "DS2c4",
        f"vLLM PR #42324, Blackwell world size 4, first rows ({_VLLM})",
        "b300",
        4,
        "graph",
        ("library/nccl", "multicast/torch", "two_shot/torch"),
        *_file("ds2c4-sm103-ws4.json", _SYMM),
        note="the world size 4 block after DS2c, same inferred GPU",
    ),
    Sweep(
        "DS3a",
        f"vLLM PR #24111, H100 TP=2 ({_VLLM})",
        "h100-sxm",
        2,
        "graph",
        ("one_shot/custom", "two_shot/custom", "library/nccl", "multicast/torch", "two_shot/torch"),
        *_file("ds3a-h100-tp2.txt", ("ca_1stage", "ca_2stage", "pynccl", "symm_mem_multimem", "symm_mem_two_shot")),
        note="ca_1stage / ca_2stage: vLLM's custom all-reduce forced to one or two stages",
    ),
    Sweep(
        "DS3c",
        f"vLLM PR #24111, TP=6 ({_VLLM})",
        "h100-sxm",
        6,
        "graph",
        ("one_shot/custom", "two_shot/custom", "library/nccl", "multicast/torch", "two_shot/torch"),
        *_file("ds3c-tp6.txt", ("ca_1stage", "ca_2stage", "pynccl", "symm_mem_multimem", "symm_mem_two_shot")),
        note=(
            "H100 inferred (tentative in the source: its one-shot -> multimem switch between 0.5 and 1 MB "
            "matches vLLM's SM 9.0 world size 6 limit of 512 KB); the only published world size 6 sweep"
        ),
    ),
    Sweep(
        "DS9a",
        "symm-mem-recipes PR #3 (benchmark_all_reduce.py: CUDA events per call after an L2 flush), bf16",
        "h100-sxm",
        8,
        "eager",
        ("library/nccl", "one_shot/custom", "multicast/custom", "one_shot/torch", "two_shot/torch", "multicast/torch"),
        *_us(
            (
                (8, (21.824, 10.848, 11.424, 16.384, 15.296, 11.424)),
                (16, (22.400, 11.168, 11.744, 16.512, 15.488, 11.680)),
                (32, (24.032, 11.424, 11.712, 17.024, 15.648, 11.808)),
                (64, (24.288, 12.192, 11.744, 18.016, 16.352, 11.552)),
                (128, (24.448, 13.920, 11.744, 20.320, 18.176, 13.472)),
                (256, (24.448, 18.304, 12.416, 25.184, 18.688, 12.608)),
            ),
            KiB,
        ),
        note="8xH100 inferred (the repository's README); triton_* columns are the custom kernels, dist_* torch's",
    ),
    Sweep(
        "DS9b",
        "symm-mem-recipes PR #4, 'performance before' (same harness as DS9a), bf16",
        "h100-sxm",
        8,
        "eager",
        ("library/nccl", "one_shot/custom", "one_shot/torch"),
        *_us(
            (
                (8, (25.696, 12.288, 19.040)),
                (16, (26.688, 12.320, 19.232)),
                (32, (30.464, 13.056, 20.640)),
                (64, (30.336, 13.952, 20.928)),
                (128, (30.528, 15.648, 23.392)),
                (256, (30.880, 19.328, 28.768)),
                (512, (31.200, 24.992, 34.016)),
                (1024, (42.912, 37.664, 47.360)),
                (2048, (63.328, 62.176, 71.072)),
            ),
            KiB,
        ),
        note="8xH100 inferred; shape = bf16 elements (4.00k = 8 KiB)",
    ),
    Sweep(
        "DS10",
        "kraken PR #7 (benchmark_all_reduce_bias.py: CUDA events per call after an L2 flush), bf16, hidden 5120",
        "h100-sxm",
        8,
        "eager",
        ("library/nccl", "one_shot/torch", "one_shot/custom", "two_shot/custom"),
        *_us(
            (
                (10240, (30.14, 19.58, 14.27, 18.24)),
                (20480, (30.72, 20.19, 14.59, 18.53)),
                (40960, (33.89, 20.80, 15.58, 19.14)),
                (81920, (34.43, 22.14, 17.50, 19.84)),
                (163840, (27.84, 25.02, 21.89, 20.22)),
                (327680, (28.13, 29.79, 26.21, 22.43)),
                (655360, (28.86, 39.58, 34.53, NAN)),
            ),
            1,
        ),
        note=(
            "8xH100 inferred (torchrun --nproc-per-node 8, kraken's other PRs); the column named nccl_ring runs "
            "dist.all_reduce (NCCL's own choice) then adds the bias; the Triton kernels fuse the bias"
        ),
    ),
    Sweep(
        "DS11h100",
        "Azure AI-benchmarking-guide ND H100 v5: nccl-tests all_reduce_perf -g 8, NCCL_ALGO=NVLS, fp32, in-place",
        "h100-sxm",
        8,
        "eager",
        ("library/nccl_nvls",),
        *_busbw(
            _ds11(
                "0.07 0.14 0.27 0.53 0.95 1.71 2.72 5.40 10.86 21.35 43.70 81.93 "
                "128.73 172.13 234.45 295.53 361.78 400.61 423.38 438.46 466.35 472.36 475.54 478.87"
            ),
            8,
        ),
        note="one process driving 8 GPUs, no CUDA graph",
    ),
    Sweep(
        "DS11h200",
        "Azure AI-benchmarking-guide ND H200 v5: nccl-tests all_reduce_perf -g 8, NCCL_ALGO=NVLS, fp32, in-place",
        "h200",
        8,
        "eager",
        ("library/nccl_nvls",),
        *_busbw(
            _ds11(
                "0.06 0.12 0.23 0.47 0.93 1.84 3.72 7.39 14.75 29.38 52.96 88.78 "
                "138.44 181.94 240.41 300.91 368.11 412.45 432.24 442.72 467.58 472.57 477.41 479.98"
            ),
            8,
        ),
        note="one process driving 8 GPUs, no CUDA graph",
    ),
    Sweep(
        "DS11gb200",
        "Azure AI-benchmarking-guide ND GB200 v6: nccl-tests all_reduce_perf -g 4, NCCL_ALGO=Ring, fp32, in-place",
        "b200",
        4,
        "eager",
        ("library/nccl_ring",),
        *_busbw(
            _ds11(
                "0.10 0.19 0.38 0.76 1.46 2.88 5.71 11.29 22.41 44.07 80.48 110.43 "
                "146.27 253.46 331.09 422.62 550.73 574.19 593.53 618.74 646.87 666.63 673.06 679.61"
            ),
            4,
        ),
        note="GB200 (NVLink 5 as B200), one process driving 4 GPUs, no CUDA graph",
    ),
    Sweep(
        "DS12e",
        "ByteDance-Seed/Triton-distributed issue #57: torch.distributed NCCL all-reduce, 8xH100, eager",
        "h100-sxm",
        8,
        "eager",
        ("library/nccl",),
        (
            128,
            KiB,
            16 * KiB,
            32 * KiB,
            64 * KiB,
            128 * KiB,
            256 * KiB,
            512 * KiB,
            MiB,
            2 * MiB,
            4 * MiB,
            8 * MiB,
            16 * MiB,
        ),
        tuple(
            (t,) for t in (19.19, 19.50, 20.71, 22.65, 23.05, 23.71, 24.76, 25.24, 32.42, 290.73, 59.43, 90.51, 135.68)
        ),
        note="2 MiB (290.73 us) is an outlier as reported; kept, the robust fit down-weights it",
    ),
)


def sweep(sweep_id: str) -> Sweep:
    """The sweep with ``sweep_id``; ``KeyError`` listing the ids when unknown."""
    for s in SWEEPS:
        if s.id == sweep_id:
            return s
    raise KeyError(f"unknown sweep {sweep_id!r}; sweeps: {', '.join(s.id for s in SWEEPS)}")
