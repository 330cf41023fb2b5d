"""vLLM's ``benchmarks/kernels/benchmark_device_communicators.py``: its printed table and its ``--output-json``.

Format, from the script's own source (vllm-project/vllm, e.g. commit
048d679ad54ec6df015408444a6d42a2fbc80c77): rank 0 prints a banner
``World Size: N, Data Type: torch.bfloat16, Hidden Size: 8192``, then a
header ``Tensor Shape`` ``Tensor Size`` and one column per communicator that
ran (sorted by name), then ``Best (Speedup vs PyNccl)``; each row is
``(seq_len, 8192)``, ``0.50 MB`` and the times in milliseconds with three
decimals (``N/A`` where a communicator refused the size). ``--output-json``
writes ``world_size``, ``dtype``, ``hidden_size``, ``num_trials``,
``cuda_graph_capture_cycles`` and ``results: {seq_len: {"timings": {name:
ms}}}``.

Timing: each communicator's calls are captured in a CUDA graph of
``CUDA_GRAPH_CAPTURE_CYCLES`` (10) back-to-back all-reduces, replayed
``num_trials`` (default 50) times after warm-up, wall clock
(``time.perf_counter``) around the replays divided by trials x 10: pipelined
graph-mode time per call. Sizes are the tensor's bytes, ``seq_len x hidden``
elements of the dtype (the shape, not the rounded ``MB`` column; a version
that prints only a size column is read from it, snapped to whole rows).
"""

from __future__ import annotations

import json
import re

from artune.errors import EvidenceError
from artune.evidence.sweep import BenchmarkSweep, Column, build

BENCHMARK = "vLLM benchmarks/kernels/benchmark_device_communicators.py"
MiB = 1 << 20
GRAPH_CALLS = 10  # CUDA_GRAPH_CAPTURE_CYCLES in the script
ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4}

#: every column the script prints -> (kernel, how the script forced it)
COLUMNS: dict[str, tuple[str, str]] = {
    "ca_1stage": ("custom_ar/1stage", "CustomAllreduce with VLLM_CUSTOM_ALLREDUCE_ALGO=1stage (set around the call)"),
    "ca_2stage": ("custom_ar/2stage", "CustomAllreduce with VLLM_CUSTOM_ALLREDUCE_ALGO=2stage (set around the call)"),
    "push_ar": ("push_ar", "PushAllReduce.all_reduce, called directly"),
    "pynccl": ("nccl", "PyNcclCommunicator.all_reduce: NCCL chooses its algorithm (NCCL_ALGO as the run set it)"),
    "pynccl-symm": ("nccl_symm", "torch.ops.vllm.all_reduce_symmetric_with_copy: NCCL on a registered window"),
    "symm_mem_multimem": ("symm_mem/multimem", "SymmMemCommunicator(force_multimem=True)"),
    "symm_mem_two_shot": ("symm_mem/two_shot", "SymmMemCommunicator(force_multimem=False)"),
    "flashinfer_trtllm": ("flashinfer/trtllm", "FlashInferAllReduce with VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm"),
    "flashinfer_mnnvl": ("flashinfer/mnnvl", "FlashInferAllReduce with VLLM_FLASHINFER_ALLREDUCE_BACKEND=mnnvl"),
}

_BANNER = re.compile(r"World Size:\s*(\d+),\s*Data Type:\s*torch\.(\w+),\s*Hidden Size:\s*(\d+)")
_ROW = re.compile(r"^\s*(?:\((\d+),\s*(\d+)\)\s+)?([0-9.]+)\s*MB\s+(.*)$")


def columns(names: list[str], source: str) -> list[Column]:
    """The columns for ``names``; an unknown name is an error naming the ones this reader knows."""
    unknown = [n for n in names if n not in COLUMNS]
    if unknown:
        raise EvidenceError(
            f"{source}: unknown column {', '.join(unknown)} in {BENCHMARK} output; known: {', '.join(COLUMNS)}. "
            "A newer script prints a communicator this reader has no kernel for: add it to "
            "artune.evidence.vllm_bench.COLUMNS with the kernel it runs"
        )
    return [Column(n, *COLUMNS[n]) for n in names]


def _timing(trials: int | str, calls: int = GRAPH_CALLS) -> str:
    return (
        f"CUDA graph of {calls} back-to-back all-reduces, replayed {trials} times after warm-up; wall clock "
        f"(time.perf_counter) over the replays / (trials x {calls})"
    )


def _dtype(name: str, source: str) -> str:
    if name not in ITEMSIZE:
        raise EvidenceError(f"{source}: data type torch.{name} is not one of {', '.join(ITEMSIZE)}")
    return name


def is_text(text: str) -> bool:
    """Whether ``text`` looks like the script's printed table."""
    return "Device Communicator Benchmark Results" in text or bool(_BANNER.search(text))


def read_text(text: str, source: str) -> BenchmarkSweep:
    """The printed table (rank 0's stdout, with or without the log lines around it)."""
    banner = _BANNER.search(text)
    if banner is None:
        raise EvidenceError(
            f"{source}: no 'World Size: N, Data Type: torch.X, Hidden Size: H' line; paste the whole table "
            f"{BENCHMARK} prints, banner included"
        )
    world_size, dtype, hidden = int(banner[1]), _dtype(banner[2], source), int(banner[3])
    lines = text[banner.end() :].splitlines()
    header_at = next((i for i, line in enumerate(lines) if re.match(r"\s*(Tensor Shape|Tensor Size|Size)\b", line)), -1)
    if header_at < 0:
        raise EvidenceError(f"{source}: no header line (Tensor Shape, Tensor Size, ...) after the banner")
    tokens = lines[header_at].split()
    try:
        end = tokens.index("Best")
    except ValueError:
        end = len(tokens)
    start = 4 if tokens[:2] == ["Tensor", "Shape"] else 2 if tokens[:2] == ["Tensor", "Size"] else 1
    cols = columns(tokens[start:end], source)
    row_bytes = hidden * ITEMSIZE[dtype]
    rows: dict[int, dict[str, float]] = {}
    for number, line in enumerate(lines[header_at + 1 :], header_at + 2):
        if not line.strip() or set(line.strip()) <= {"-", "="}:
            continue
        if line.startswith(("All times", "Speedup column")):
            break
        match = _ROW.match(line)
        if match is None:
            raise EvidenceError(f"{source}: line {number} after the banner is not a result row: {line.strip()!r}")
        values = match[4].split()[: len(cols)]
        if len(values) < len(cols):
            raise EvidenceError(f"{source}: row {line.strip()!r} has {len(values)} times for {len(cols)} columns")
        if match[1]:
            size = int(match[1]) * int(match[2]) * ITEMSIZE[dtype]
        else:  # a version that prints the size alone: 2 decimals of MB, snapped to whole rows of the hidden size
            size = max(1, round(float(match[3]) * MiB / row_bytes)) * row_bytes
        rows[size] = {c.name: _ms(v, source, line) for c, v in zip(cols, values, strict=True) if v != "N/A"}
    return build(
        rows,
        cols,
        source=source,
        benchmark=BENCHMARK,
        format="vllm-text",
        world_size=world_size,
        mode="graph",
        timing=_timing("num_trials (default 50)"),
        dtype=dtype,
        resolution_us=0.5,  # three decimals of a millisecond
    )


def _ms(value: str, source: str, line: str) -> float:
    try:
        return float(value) * 1000
    except ValueError:
        raise EvidenceError(f"{source}: {value!r} in {line.strip()!r} is neither a time in ms nor N/A") from None


def is_json(data: object) -> bool:
    """Whether parsed JSON looks like the script's ``--output-json``."""
    return isinstance(data, dict) and "results" in data and "cuda_graph_capture_cycles" in data


def read_json(text: str, source: str) -> BenchmarkSweep:
    """The ``--output-json`` file."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise EvidenceError(f"{source}: not JSON ({err})") from None
    if not is_json(data):
        raise EvidenceError(f"{source}: JSON without results and cuda_graph_capture_cycles: not {BENCHMARK} output")
    try:
        world_size = int(data["world_size"])
        dtype = _dtype(str(data["dtype"]).removeprefix("torch."), source)
        hidden = int(data["hidden_size"])
        cycles = int(data["cuda_graph_capture_cycles"])
        results = {int(seq): entry["timings"] for seq, entry in data["results"].items()}
    except (KeyError, TypeError, ValueError) as err:
        raise EvidenceError(f"{source}: {BENCHMARK} JSON is missing or mistypes {err}") from None
    names = list(dict.fromkeys(name for timings in results.values() for name in timings))
    cols = columns(names, source)
    rows = {
        seq * hidden * ITEMSIZE[dtype]: {name: float(ms) * 1000 for name, ms in timings.items()}
        for seq, timings in results.items()
    }
    notes = () if cycles == GRAPH_CALLS else (f"graphs of {cycles} calls, not the script's {GRAPH_CALLS}",)
    return build(
        rows,
        cols,
        source=source,
        benchmark=BENCHMARK,
        format="vllm-json",
        world_size=world_size,
        mode="graph",
        timing=_timing(data.get("num_trials", "num_trials"), cycles),
        dtype=dtype,
        notes=notes,
    )
