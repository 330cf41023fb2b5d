"""TensorRT-LLM's ``tests/microbenchmarks/all_reduce.py --save_csv`` file.

Format, from the script's source (NVIDIA/TensorRT-LLM, e.g. commit
03d89c48c5cee2d7f700f87b02cbe0a3678cced0): a pandas CSV with the columns
``world_size, dtype, size, num_tokens, hidden_size, strategy, fusion[, op],
time (us)``, one row per shape, strategy and fusion; ``size`` is the
message's bytes. Each strategy is forced through ``AllReduce(strategy=...)``.

Timing: ``inner_loop`` (200) calls per timed region, 10 regions between CUDA
events, the median region / 200: launched back to back (eager) or, with
``--enable_cudagraph``, captured in one CUDA graph (graph mode). The CSV
does not record which, so the caller gives the mode.
"""

from __future__ import annotations

import csv
import io

from artune.errors import EvidenceError
from artune.evidence.sweep import BenchmarkSweep, Column, build

BENCHMARK = "TensorRT-LLM tests/microbenchmarks/all_reduce.py --save_csv"
REQUIRED = ("world_size", "dtype", "size", "num_tokens", "hidden_size", "strategy", "fusion", "time (us)")
#: AllReduceStrategy names -> kernel
STRATEGIES: dict[str, str] = {
    "NCCL": "nccl",
    "NCCL_SYMMETRIC": "nccl_symm",
    "ONESHOT": "trtllm/oneshot",
    "TWOSHOT": "trtllm/twoshot",
    "AUTO": "trtllm/auto",
    "UB": "trtllm/ub",
    "MNNVL": "trtllm/mnnvl",
}
DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}


def is_csv(text: str) -> bool:
    """Whether ``text`` starts with the CSV's header."""
    first = text.lstrip().split("\n", 1)[0]
    return all(name in first for name in ("world_size", "strategy", "time (us)"))


def read(
    text: str,
    source: str,
    world_size: int | None = None,
    mode: str | None = None,
    fusion: str = "NONE",
) -> BenchmarkSweep:
    """The plain all-reduce rows (``fusion`` NONE, op allreduce) of one world size, at the ``mode`` the run used."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise EvidenceError(f"{source}: the CSV lacks {', '.join(missing)}: not {BENCHMARK} output")
    rows = [r for r in reader if r["fusion"] == fusion and r.get("op", "allreduce") == "allreduce"]
    if not rows:
        raise EvidenceError(f"{source}: no rows with fusion {fusion} (op allreduce)")
    sizes_ws = sorted({int(r["world_size"]) for r in rows})
    if world_size is None and len(sizes_ws) > 1:
        raise EvidenceError(f"{source}: world sizes {sizes_ws} in one CSV; give one (--evidence-world-size N)")
    ws = world_size if world_size is not None else sizes_ws[0]
    rows = [r for r in rows if int(r["world_size"]) == ws]
    if not rows:
        raise EvidenceError(f"{source}: no rows for world size {ws} (the CSV has {sizes_ws})")
    if mode is None:
        raise EvidenceError(
            f"{source}: the CSV does not record whether the run set --enable_cudagraph; give the mode "
            "(--evidence-mode graph with it, eager without)"
        )
    unknown = sorted({r["strategy"] for r in rows} - STRATEGIES.keys())
    if unknown:
        raise EvidenceError(f"{source}: unknown strategy {', '.join(unknown)}; known: {', '.join(STRATEGIES)}")
    dtypes = {r["dtype"] for r in rows}
    if len(dtypes) != 1 or not dtypes <= DTYPES.keys():
        raise EvidenceError(f"{source}: data types {sorted(dtypes)}: give one run of one dtype")
    shapes: dict[int, set[tuple[str, str]]] = {}
    table: dict[int, dict[str, float]] = {}
    for r in rows:
        size = int(r["size"])
        shapes.setdefault(size, set()).add((r["num_tokens"], r["hidden_size"]))
        try:
            table.setdefault(size, {})[r["strategy"]] = float(r["time (us)"])
        except ValueError:
            raise EvidenceError(f"{source}: time {r['time (us)']!r} is not a number") from None
    doubled = sorted(n for n, s in shapes.items() if len(s) > 1)
    if doubled:
        raise EvidenceError(f"{source}: sizes {doubled} were timed at several shapes (--explore_2d): not one sweep")
    names = [s for s in STRATEGIES if any(s in t for t in table.values())]
    cols = [Column(s, STRATEGIES[s], f"AllReduce(strategy=AllReduceStrategy.{s})") for s in names]
    return build(
        table,
        cols,
        source=source,
        benchmark=BENCHMARK,
        format="trtllm-csv",
        world_size=ws,
        mode=mode,
        timing="200 calls per region, 10 regions between CUDA events, median region / 200"
        + (" (captured in one CUDA graph)" if mode == "graph" else " (launched back to back)"),
        dtype=DTYPES[dtypes.pop()],
    )
