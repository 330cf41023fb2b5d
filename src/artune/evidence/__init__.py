"""Evidence: the engines' own benchmark outputs, read as printed, and tables scored on them as the engines run.

- ``read_evidence(path)`` reads vLLM's ``benchmark_device_communicators.py``
  (table or JSON), nccl-tests ``all_reduce_perf``, SGLang's all-reduce
  benchmarks and TensorRT-LLM's ``all_reduce.py --save_csv`` into one
  ``Evidence`` (a ``BenchmarkSweep``): world size, timing mode, columns
  (each with the kernel it ran and how it was forced) and times.
- ``score_table(table, evidence)`` scores a table's row on the sweep as the
  engine runs it, down to the kernel; ``best_row(engine, evidence, arch)``
  finds the best row the engine's own knobs allow on it (``artune review
  --evidence`` scores both sides of a change and the best row with these).

docs/evidence.md describes the formats, the columns-to-kernels map and the
scoring.
"""

from __future__ import annotations

from artune.evidence.best import BestRow, best_row
from artune.evidence.read import FORMATS, detect, read_evidence, read_text
from artune.evidence.score import EvidenceScore, SizeScore, score_table
from artune.evidence.sweep import BenchmarkSweep, Column

__all__ = [
    "FORMATS",
    "BenchmarkSweep",
    "BestRow",
    "Column",
    "EvidenceScore",
    "SizeScore",
    "best_row",
    "detect",
    "read_evidence",
    "read_text",
    "score_table",
]
