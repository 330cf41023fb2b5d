"""SGLang's all-reduce benchmarks: the markdown tables of ``benchmark/kernels/all_reduce/`` and the JIT table.

Two printed formats, each from its script's source (sgl-project/sglang):

- ``benchmark/kernels/all_reduce/benchmark_torch_symm_mem.py`` and
  ``benchmark_mscclpp.py`` print a GitHub markdown table (``tabulate``, or
  the same by hand): ``msg_size`` (``2.0 KiB``) and one ``<impl> <mode>
  time`` column per communicator and mode, in microseconds. Graph columns
  capture 10 calls in a CUDA graph and time 10 replays with CUDA events,
  per call; eager columns time 10 calls back to back between two events.
- ``python/sglang/jit_kernel/benchmark/bench_custom_all_reduce.py`` prints
  ``Size`` (``4K``, ``1M``) and the columns ``NCCL``, ``AOT``, ``JIT``,
  ``FI`` (those that ran) in microseconds, then speedups ``X/NCCL``; every
  backend's ``iters`` (default 50) calls are captured in one CUDA graph,
  one replay is timed between CUDA events after a warm replay, and the
  slowest rank's time is printed.

Neither prints its world size: the caller gives it.
"""

from __future__ import annotations

import re

from artune.errors import EvidenceError
from artune.evidence.sweep import BenchmarkSweep, Column, build

MARKDOWN = "SGLang benchmark/kernels/all_reduce (benchmark_torch_symm_mem.py, benchmark_mscclpp.py)"
JIT = "SGLang jit_kernel/benchmark/bench_custom_all_reduce.py"

#: the markdown tables' communicators -> (kernel, what the script calls)
MARKDOWN_IMPLS: dict[str, tuple[str, str]] = {
    "torch": ("nccl", "torch.distributed.all_reduce on the NCCL group: NCCL chooses its algorithm"),
    "pynccl": ("nccl", "SGLang's PyNcclCommunicator.all_reduce: NCCL chooses its algorithm"),
    "symm mem": ("sglang/torch_symm_mem", "SGLang's TorchSymmMemCommunicator.all_reduce"),
    "msccl": ("mscclpp", "SGLang's PyMscclppCommunicator.all_reduce"),
}
#: the JIT table's backends -> (kernel, what the script calls)
JIT_BACKENDS: dict[str, tuple[str, str]] = {
    "NCCL": ("nccl", "torch.distributed.all_reduce on the NCCL group: NCCL chooses its algorithm"),
    "AOT": ("sglang/custom_ar_v1", "sgl_kernel CustomAllreduce (v1), its own one/two-stage switch"),
    "JIT": ("sglang/custom_ar_v2", "CustomAllReduceV2 with its tuned dispatch, pull thresholds as configured"),
    "FI": ("flashinfer/trtllm", "flashinfer.comm.allreduce_fusion(kAllReduce), trtllm backend"),
}
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_MD_COLUMN = re.compile(r"^(.+) (graph|eager) time$")
_TIMING = {
    "graph": "10 calls captured in a CUDA graph, 10 replays timed with CUDA events, mean per call",
    "eager": "10 calls launched back to back between two CUDA events, mean per call",
}


def _size(text: str, source: str) -> int:
    match = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]+)\s*", text)
    if match is None or match[2] not in _UNITS:
        raise EvidenceError(f"{source}: {text.strip()!r} is not a message size like 2.0 KiB or 4K")
    return round(float(match[1]) * _UNITS[match[2]])


def _world_size(world_size: int | None, benchmark: str, source: str) -> int:
    if world_size is None:
        raise EvidenceError(f"{source}: {benchmark} does not print its world size; give it (--evidence-world-size N)")
    return world_size


def is_markdown(text: str) -> bool:
    """Whether ``text`` holds the ``benchmark/kernels/all_reduce`` markdown table."""
    return bool(re.search(r"^\|\s*msg_size\s*\|", text, re.MULTILINE))


def read_markdown(text: str, source: str, world_size: int | None = None, mode: str | None = None) -> BenchmarkSweep:
    """The markdown table, at ``mode`` (default: graph where the table has graph columns)."""
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    parsed = []
    for name in header[1:]:
        match = _MD_COLUMN.match(name)
        if match is None or match[1] not in MARKDOWN_IMPLS:
            raise EvidenceError(
                f"{source}: unknown column {name!r} in {MARKDOWN} output; known: "
                + ", ".join(f"'<{impl}> graph|eager time'" for impl in MARKDOWN_IMPLS)
            )
        parsed.append((name, match[1], match[2]))
    modes = {m for _, _, m in parsed}
    chosen = mode or ("graph" if "graph" in modes else "eager")
    if chosen not in modes:
        raise EvidenceError(f"{source}: the table has no {chosen} columns (it has {', '.join(sorted(modes))})")
    cols = [Column(name, *MARKDOWN_IMPLS[impl]) for name, impl, m in parsed if m == chosen]
    rows: dict[int, dict[str, float]] = {}
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if set("".join(cells)) <= {"-", ":"}:
            continue
        if len(cells) != len(header):
            raise EvidenceError(f"{source}: row {line!r} has {len(cells)} cells for {len(header)} columns")
        values = dict(zip(header, cells, strict=True))
        rows[_size(cells[0], source)] = {c.name: _us(values[c.name], source) for c in cols if values[c.name]}
    other = sorted(name for name, _, m in parsed if m != chosen)
    return build(
        rows,
        cols,
        source=source,
        benchmark=MARKDOWN,
        format="sglang-markdown",
        world_size=_world_size(world_size, MARKDOWN, source),
        mode=chosen,
        timing=_TIMING[chosen],
        dtype="bfloat16",
        notes=(f"left out ({'eager' if chosen == 'graph' else 'graph'} mode): {', '.join(other)}",) if other else (),
    )


def _us(value: str, source: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise EvidenceError(f"{source}: {value!r} is not a time in microseconds") from None


def is_jit(text: str) -> bool:
    """Whether ``text`` holds ``bench_custom_all_reduce.py``'s table."""
    return bool(re.search(r"^\s*Size\s+NCCL\b", text, re.MULTILINE))


def read_jit(text: str, source: str, world_size: int | None = None) -> BenchmarkSweep:
    """``bench_custom_all_reduce.py``'s table (graph mode)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if re.match(r"^\s*Size\s+NCCL\b", line))
    names = [t for t in lines[at].split()[1:] if not t.endswith("/NCCL")]
    unknown = [n for n in names if n not in JIT_BACKENDS]
    if unknown:
        raise EvidenceError(f"{source}: unknown column {', '.join(unknown)} in {JIT} output; known: NCCL AOT JIT FI")
    cols = [Column(n, *JIT_BACKENDS[n]) for n in names]
    rows: dict[int, dict[str, float]] = {}
    for line in lines[at + 1 :]:
        fields = line.split()
        if not fields or set(line.strip()) <= {"-"}:
            continue
        if not re.fullmatch(r"[0-9]+[KMG]?B?", fields[0]):
            break
        if len(fields) < 1 + len(cols):
            raise EvidenceError(f"{source}: row {line.strip()!r} has fewer times than columns {' '.join(names)}")
        size = int(fields[0][:-1]) if fields[0].endswith("B") else _size(fields[0], source)
        rows[size] = {c.name: _us(v, source) for c, v in zip(cols, fields[1:], strict=False) if v != "n/a"}
    return build(
        rows,
        cols,
        source=source,
        benchmark=JIT,
        format="sglang-jit",
        world_size=_world_size(world_size, JIT, source),
        mode="graph",
        timing="iters (default 50) calls in one CUDA graph, one replay between CUDA events after a warm one, "
        "slowest rank",
        dtype="bfloat16",
        resolution_us=0.05,  # one decimal of a microsecond
    )
