"""SGLang: its custom all-reduce v2 configs and dispatch read from a checkout or a release, written back.

``ENGINE`` is what SGLang gives artune (``artune.formats.engine.EnginePlugin``);
its members import the reading code when first called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from artune import rocm
from artune.formats.engine import EngineImport, EnginePlugin, Oracle
from artune.formats.sglang.read import FILES
from artune.formats.sglang.reference import SOURCE_FILE

if TYPE_CHECKING:
    from artune.formats.export import Export
    from artune.review.types import BenchCommand
    from artune.table.check import Finding
    from artune.table.family import TableSet
    from artune.table.types import Table


def _read(path: str) -> EngineImport:
    from artune.formats.sglang.read import read_sglang

    return read_sglang(path)


def _read_under(path: str, switches: Mapping[str, str], dtype: str, arch: str) -> EngineImport:
    """On an AMD arch its ROCm tables alone; SGLang's reading does not change with the messages' dtype."""
    from artune.formats.sglang.read import read_sglang, rocm_tables

    return rocm_tables(path, switches) if rocm.is_gfx(arch) else read_sglang(path, switches)


def _write(tables: Sequence[Table], command: str, arch: str | None, standalone: bool) -> Export:
    from artune.formats.sglang.write import export_sglang

    return export_sglang(tables[0], command, arch, standalone)


def _bench(
    arch: str, world_size: int, ranges: Sequence[tuple[str, int, int | None]], hosts: int, stem: str
) -> tuple[BenchCommand, ...]:
    """SGLang's custom all-reduce benchmark times what the installed SGLang runs (graph mode), not each
    algorithm: on one host artune's tuner times every algorithm its rows name, in both modes, beside it."""
    from artune.review.benchmarks import artune_command, modes_of, sglang_command, spans

    if hosts > 1:  # artune's tuner times one host's ranks: across hosts, the engine's benchmark answers
        return (sglang_command(world_size, spans(ranges), stem + ".txt", hosts),)
    graph = spans([r for r in ranges if r[0] == "graph"])
    ours = artune_command(world_size, modes_of(ranges), f"artune-evidence/{arch}-ws{world_size}-artune")
    return (*([sglang_command(world_size, graph, stem + ".txt")] if graph else []), ours)


def _reference() -> TableSet:
    from artune.formats.sglang.reference import table_set

    return table_set()


def _reference_findings() -> tuple[Finding, ...]:
    from artune.formats.sglang.reference import findings

    return findings()


def _oracle() -> Oracle:
    from artune.oracles.sglang import ORACLE

    return ORACLE


ENGINE = EnginePlugin(
    name="sglang",
    label="SGLang",
    read=_read,
    files=FILES,
    table_file=SOURCE_FILE,
    wheel=("sglang/srt/distributed/", "sglang/srt/environ.py", "sglang/kernels/ops/communication/all_reduce.py"),
    checkout_prefix="python/",
    write=_write,
    read_under=_read_under,
    reference=_reference,
    reference_findings=_reference_findings,
    bench=_bench,
    oracle=_oracle,
    code_prefix="S",
)
