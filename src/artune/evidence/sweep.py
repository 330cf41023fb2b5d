"""One benchmark sweep as data: its world size, timing mode, columns (each the kernel it ran) and times.

A *kernel* names what a column ran, in one vocabulary across benchmarks, so
that an engine's choice can be looked up in any sweep (``artune.evidence.
kernels``): ``custom_ar/1stage`` and ``custom_ar/2stage`` (vLLM's
``CustomAllreduce`` kernels), ``symm_mem/multimem`` and ``symm_mem/two_shot``
(vLLM's torch symmetric-memory paths), ``flashinfer/trtllm`` and
``flashinfer/mnnvl`` (FlashInfer's all-reduce by backend), ``push_ar``
(vLLM's push one-shot), ``nccl`` (``ncclAllReduce``, NCCL choosing its
algorithm), ``nccl_symm`` (NCCL's symmetric-memory kernels on registered
windows), ``nccl/in_place`` (nccl-tests' in-place column), ``trtllm/...``
(TensorRT-LLM's strategies), ``sglang/...`` (SGLang's communicators) and
``mscclpp``. Each column also says how the benchmark forced it.

Times are microseconds per all-reduce; ``nan`` where the benchmark printed
none (``N/A``, a cut-off row, a size the communicator refused).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise
from statistics import median

from artune.errors import EvidenceError
from artune.sizes import format_size

MODES = ("graph", "eager")


@dataclass(frozen=True)
class Column:
    """One printed column: its name in the file, the kernel it ran and how the benchmark forced that kernel."""

    name: str
    kernel: str
    forced: str


@dataclass(frozen=True)
class BenchmarkSweep:
    """One sweep of one benchmark at one world size and timing mode."""

    source: str  # the file it was read from
    benchmark: str  # the benchmark that printed it, e.g. "vLLM benchmarks/kernels/benchmark_device_communicators.py"
    format: str  # the reader's name: vllm-text, vllm-json, nccl-tests, sglang-markdown, sglang-jit, trtllm-csv
    world_size: int
    mode: str  # "graph" or "eager": the table mode whose calls the timing stands for
    timing: str  # the benchmark's timing method, one sentence
    dtype: str  # catalog dtype name: bfloat16, float16, float32
    columns: tuple[Column, ...]
    sizes: tuple[int, ...]  # bytes per rank, ascending
    times: tuple[tuple[float, ...], ...]  # per size, one time (us) per column; nan: not measured
    resolution_us: float = 0.0  # the printed precision (half a unit of the last digit), 0 when full precision
    multicast: bool = True  # whether the machine had NVLink multicast (every NVSwitch board artune knows)
    arch: str = ""  # where the file says; usually the caller names it
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise EvidenceError(f"{self.source}: timing mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.world_size < 2:
            raise EvidenceError(f"{self.source}: world size {self.world_size}: an all-reduce sweep needs 2 or more")
        if not self.sizes:
            raise EvidenceError(f"{self.source}: no sizes were read; is this a complete {self.benchmark} output?")
        if list(self.sizes) != sorted(set(self.sizes)):
            raise EvidenceError(f"{self.source}: sizes must be distinct; the file repeats one")
        if len(self.times) != len(self.sizes) or any(len(row) != len(self.columns) for row in self.times):
            raise EvidenceError(f"{self.source}: {len(self.sizes)} sizes and {len(self.columns)} columns do not match")
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise EvidenceError(f"{self.source}: a column is printed twice: {', '.join(names)}")

    def column(self, kernel: str) -> Column | None:
        """The column that ran ``kernel`` (``None`` when the sweep did not measure it)."""
        for column in self.columns:
            if column.kernel == kernel:
                return column
        return None

    def time(self, size: int, column: Column) -> float | None:
        """The time (us) ``column`` printed at ``size``; ``None`` where it printed none."""
        value = self.times[self.sizes.index(size)][self.columns.index(column)]
        return None if math.isnan(value) else value

    def fastest(self, size: int) -> tuple[Column, float] | None:
        """The fastest column at ``size`` and its time; ``None`` when no column printed a time there."""
        row = self.times[self.sizes.index(size)]
        found = [(t, i) for i, t in enumerate(row) if not math.isnan(t)]
        if not found:
            return None
        t, i = min(found)
        return self.columns[i], t

    @property
    def noise(self) -> float:
        """The sweep's own relative noise on one time: the larger of its print precision and its
        non-monotonicity.

        A kernel cannot get faster on a larger message, so a column's time
        dropping from one size to the next is noise; the estimate is the mean
        relative drop over every adjacent pair of sizes of every column (a rise
        counts 0), with the printed precision relative to the median time as
        the floor. 0 when neither shows any.
        """
        drops = []
        for j in range(len(self.columns)):
            series = [row[j] for row in self.times if not math.isnan(row[j])]
            drops += [max(0.0, (a - b) / b) for a, b in pairwise(series)]
        measured = [t for row in self.times for t in row if not math.isnan(t)]
        floor = self.resolution_us / median(measured) if measured and self.resolution_us else 0.0
        return max(floor, sum(drops) / len(drops) if drops else 0.0)

    def describe(self) -> str:
        """One line: the benchmark, world size, mode and size range."""
        return (
            f"{self.benchmark} ({self.format}), world size {self.world_size}, {self.mode} mode, {self.dtype}, "
            f"{len(self.sizes)} sizes {format_size(self.sizes[0])}-{format_size(self.sizes[-1])}, "
            f"columns {', '.join(c.name for c in self.columns)}"
        )


def build(
    rows: dict[int, dict[str, float]],
    columns: list[Column],
    **fields: object,
) -> BenchmarkSweep:
    """A sweep from ``{size: {column name: us}}``: sizes ascending, ``nan`` where a column printed nothing."""
    sizes = tuple(sorted(rows))
    times = tuple(tuple(rows[n].get(c.name, math.nan) for c in columns) for n in sizes)
    return BenchmarkSweep(columns=tuple(columns), sizes=sizes, times=times, **fields)  # type: ignore[arg-type]
