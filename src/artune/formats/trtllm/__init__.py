"""TensorRT-LLM's all-reduce lookup tables in and out.

``read`` turns a checkout's ``customAllReduceUtils.h`` (with its enums) into
shape tables that decide as the header does (``header``, ``enums``, ``cxx``
read the C++ text; nothing is compiled); ``checks`` holds the reviewer's
findings (codes ``R1xx``); ``write`` prints a table as the header's block;
``generator`` writes and reads the CSV of TensorRT-LLM's heuristic code
generator. ``ENGINE`` is what TensorRT-LLM gives artune
(``artune.formats.engine.EnginePlugin``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from artune.errors import TableError
from artune.formats.engine import EngineImport, EnginePlugin, Oracle
from artune.formats.trtllm.read import FILES, HEADER

if TYPE_CHECKING:
    from artune.formats.export import Export
    from artune.review.types import BenchCommand
    from artune.table.types import Table


def _read(path: str) -> EngineImport:
    from artune.formats.trtllm.read import read_trtllm

    return read_trtllm(path)


def _write(tables: Sequence[Table], command: str, arch: str | None, standalone: bool) -> Export:
    """The header's block for one shape table of a CUDA arch (its SM number keys the block)."""
    from artune.formats.trtllm.read import sm_of
    from artune.formats.trtllm.write import export_trtllm

    sm = sm_of(tables[0].platform.arch)
    if sm is None or not tables[0].by_shape:
        raise TableError(f"{tables[0].name}: --to trtllm needs a shape table for a CUDA arch (e.g. 9.0)")
    return export_trtllm(tables[0], command, sm)


def _bench(
    arch: str, world_size: int, ranges: Sequence[tuple[str, int, int | None]], hosts: int, stem: str
) -> tuple[BenchCommand, ...]:
    """TensorRT-LLM's all-reduce microbenchmark per mode, as CSV."""
    from artune.review.benchmarks import modes_of, spans, trtllm_commands

    return tuple(trtllm_commands(world_size, modes_of(ranges), spans(ranges), stem + ".csv"))


def _oracle() -> Oracle:
    from artune.oracles.trtllm import ORACLE

    return ORACLE


ENGINE = EnginePlugin(
    name="trtllm",
    label="TensorRT-LLM",
    read=_read,
    files=FILES,
    table_file=HEADER,
    write=_write,
    bench=_bench,
    oracle=_oracle,
    code_prefix="R",
)
