"""nccl-tests ``all_reduce_perf`` output: the out-of-place and in-place columns.

Format, from nccl-tests' ``src/common.cu`` (NVIDIA/nccl-tests): a first
line ``# nThread T nGpus G minBytes ... iters: N ... graph: K``, the
``# Using devices`` block (one ``#  Rank  r ...`` line per rank), then the
header ``size count type redop root time algbw busbw #wrong time algbw busbw
#wrong`` (older versions: no ``root``, ``error`` for ``#wrong``) under
``out-of-place`` and ``in-place``, and one row per size: bytes, elements,
type, op, root, then per placement time (us), algbw and busbw (GB/s). Lines
may carry an MPI prefix (``[1,0]<stdout>:``).

Timing: ``iters`` calls launched back to back and timed by wall clock after
a device sync, divided by ``iters`` (eager); with ``-G K`` (``graph: K``,
K > 0) the calls are captured in a CUDA graph and the graph is launched K
times (graph mode). Both columns run ``ncclAllReduce`` with NCCL choosing its
algorithm unless the run's environment forced one (``NCCL_ALGO``, not in the
output).

rccl-tests (ROCm/rccl-tests, a fork of nccl-tests, ``src/common.cu``) prints
the same table, and a few things nccl-tests does not, which this reader
reads: a line ``rccl-tests: Version <branch>:<commit>`` after the first one
(the columns then ran RCCL, kernel ``rccl``; the graph is a HIP graph); rank
lines with the PCI domain (``[0000:05:00]``) and, in newer versions,
``# Collective test starting/concluded:`` around the run; with ``-O 0`` (its
``--out_of_place``) only the ``in-place`` group of columns, which this
reader names in-place rather than take it for the out-of-place one; with
``-C 1`` (``--report_cputime``) ``cputime`` columns, which time the host's
CPU, not the collective, and which this reader refuses. Its ``-y`` memory
type and ``-F`` cache flush are not in the output.
"""

from __future__ import annotations

import re

from artune.errors import EvidenceError
from artune.evidence.sweep import BenchmarkSweep, Column, build

BENCHMARK = "nccl-tests all_reduce_perf"
RCCL_BENCHMARK = "rccl-tests all_reduce_perf"
_RCCL = re.compile(r"^rccl-tests: Version (\S+)", re.MULTILINE)
_PREFIX = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_FIRST = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+).*?(?<!warmup )iters:\s*(\d+)")
_GRAPH = re.compile(r"graph:\s*(\d+)")
_TIME = re.compile(r"\s(?:cpu)?time\s")  # rccl-tests -C 1 prints "cputime"
_RANK = re.compile(r"^#\s+Rank\s+\d+\s")
DTYPES = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64"}
FORCED = "ncclAllReduce; NCCL chooses its algorithm unless the run's environment set NCCL_ALGO (not in the output)"
COLUMNS = (
    Column("out-of-place", "nccl", FORCED),
    Column("in-place", "nccl/in_place", FORCED + "; in place"),
)
RCCL_FORCED = "ncclAllReduce of RCCL; RCCL chooses its algorithm unless the run's environment set NCCL_ALGO"
RCCL_COLUMNS = (
    Column("out-of-place", "rccl", RCCL_FORCED),
    Column("in-place", "rccl/in_place", RCCL_FORCED + "; in place"),
)


def is_nccl_tests(text: str) -> bool:
    """Whether ``text`` looks like nccl-tests output."""
    return bool(_FIRST.search(text)) or ("out-of-place" in text and "in-place" in text and "busbw" in text)


def _lines(text: str) -> list[str]:
    return [_PREFIX.sub("", line) for line in text.splitlines()]


def read(text: str, source: str) -> BenchmarkSweep:
    """An ``all_reduce_perf`` run's stdout (one world size; several runs in one file are refused)."""
    lines = _lines(text)
    firsts = [m for line in lines if (m := _FIRST.search(line))]
    if len(firsts) > 1:
        raise EvidenceError(f"{source}: {len(firsts)} nccl-tests runs in one file; give one run per file")
    headers = [i for i, line in enumerate(lines) if line.startswith("#") and " size " in line and _TIME.search(line)]
    if not headers:
        raise EvidenceError(f"{source}: no nccl-tests header line (size count type ... time algbw busbw)")
    names = lines[headers[0]].lstrip("#").split()
    if "redop" not in names:
        raise EvidenceError(f"{source}: the header has no redop column: not all_reduce_perf output ({' '.join(names)})")
    if "cputime" in names:
        raise EvidenceError(
            f"{source}: the columns are cputime (rccl-tests -C 1 / --report_cputime): the host's CPU time, not the "
            "all-reduce's; rerun without -C"
        )
    times = [i for i, name in enumerate(names) if name == "time"]
    rccl = _RCCL.search("\n".join(lines))
    columns = RCCL_COLUMNS if rccl else COLUMNS
    if len(times) == 1 and "in-place" in lines[headers[0] - 1] and "out-of-place" not in lines[headers[0] - 1]:
        columns = columns[1:]  # rccl-tests -O 0: the in-place group alone
    ranks = sum(1 for line in lines if _RANK.match(line))
    world_size = ranks or (int(firsts[0][1]) * int(firsts[0][2]) if firsts else 0)
    if world_size < 2:
        raise EvidenceError(f"{source}: the run names no ranks (no '#  Rank' lines and no nThread/nGpus line)")
    graph = _GRAPH.search(lines[next((i for i, line in enumerate(lines) if _FIRST.search(line)), 0)])
    graphs = int(graph[1]) if graph else 0
    iters = firsts[0][3] if firsts else "iters"
    rows: dict[int, dict[str, float]] = {}
    dtypes: set[str] = set()
    for line in lines[headers[0] + 1 :]:
        fields = line.split()
        if not fields or line.startswith("#") or not fields[0].isdigit():
            continue
        if len(fields) != len(names):
            raise EvidenceError(f"{source}: row {line.strip()!r} has {len(fields)} fields for {len(names)} columns")
        dtypes.add(fields[names.index("type")])
        try:
            rows[int(fields[0])] = {c.name: float(fields[i]) for c, i in zip(columns, times, strict=False)}
        except ValueError:
            raise EvidenceError(f"{source}: a time in {line.strip()!r} is not a number") from None
    if len(dtypes) > 1 or not dtypes <= DTYPES.keys():
        raise EvidenceError(f"{source}: data types {sorted(dtypes)}: give one run of float, half or bfloat16")
    graph_kind = "HIP" if rccl else "CUDA"
    timing = (
        f"{iters} calls captured in a {graph_kind} graph, launched {graphs} times, wall clock per call"
        if graphs
        else f"{iters} calls launched back to back, wall clock after a device sync, per call"
    )
    return build(
        rows,
        list(columns[: len(times)]),
        source=source,
        benchmark=f"{RCCL_BENCHMARK} (version {rccl[1]})" if rccl else BENCHMARK,
        format="nccl-tests",
        world_size=world_size,
        mode="graph" if graphs else "eager",
        timing=timing,
        dtype=DTYPES[dtypes.pop()] if dtypes else "float32",
        resolution_us=0.005,  # two decimals of a microsecond at small sizes; coarser digits are larger times
        multicast=not rccl,  # no AMD GPU has NVLink multicast
    )
