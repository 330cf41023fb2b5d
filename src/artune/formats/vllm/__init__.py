"""vLLM: its communicators' dispatch read from a checkout or a release, its size tables written back.

``ENGINE`` is what vLLM gives artune (``artune.formats.engine.EnginePlugin``);
its members import the reading code when first called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from artune import rocm
from artune.formats.engine import EngineImport, EnginePlugin, Oracle
from artune.formats.vllm.code import FILES
from artune.formats.vllm.reference import SOURCE_FILE

if TYPE_CHECKING:
    from artune.formats.export import Export
    from artune.review.types import BenchCommand
    from artune.table.check import Finding
    from artune.table.family import TableSet
    from artune.table.types import Table


def _read(path: str) -> EngineImport:
    from artune.formats.vllm.read import read_vllm

    return read_vllm(path)


def _read_under(path: str, switches: Mapping[str, str], dtype: str, arch: str) -> EngineImport:
    """On an AMD arch its ROCm tables alone (the communicators it starts there under ``switches``)."""
    from artune.formats.vllm.read import read_vllm, rocm_tables

    return rocm_tables(path, switches, dtype) if rocm.is_gfx(arch) else read_vllm(path, switches, dtype)


def _dtype_findings(path: str) -> tuple[Finding, ...]:
    from artune.formats.vllm.read import dtype_findings

    return dtype_findings(path)


def _write(tables: Sequence[Table], command: str, arch: str | None, standalone: bool) -> Export:
    from artune.formats.vllm.write import export_vllm

    return export_vllm(list(tables), command)


def _bench(
    arch: str, world_size: int, ranges: Sequence[tuple[str, int, int | None]], hosts: int, stem: str
) -> tuple[BenchCommand, ...]:
    """vLLM's device-communicator benchmark over the ranges' probes (it times CUDA graphs), as JSON."""
    from artune.review.benchmarks import spans, vllm_command

    return (vllm_command(world_size, spans(ranges), stem + ".json", hosts),)


def _reference() -> TableSet:
    from artune.formats.vllm.reference import table_set

    return table_set()


def _reference_findings() -> tuple[Finding, ...]:
    from artune.formats.vllm.reference import findings

    return findings()


def _kernel(
    algorithm: str, world_size: int, nbytes: int, multicast: bool, forced: str | None
) -> tuple[str, str] | None:
    """Its custom all-reduce's 1-stage or 2-stage kernel (C++ decides per call), FlashInfer's backend by the
    machine."""
    from artune.formats.vllm.rules import custom_ar_kernel, kernel

    found = kernel(algorithm, world_size, nbytes, multicast, forced)
    if found is None:
        return None
    return found, custom_ar_kernel(world_size, nbytes, forced)[1] if algorithm == "custom_ar" else ""


def _oracle() -> Oracle:
    from artune.oracles.vllm import ORACLE

    return ORACLE


ENGINE = EnginePlugin(
    name="vllm",
    label="vLLM",
    read=_read,
    files=FILES,
    table_file=SOURCE_FILE,
    wheel=(
        "vllm/distributed/device_communicators/",
        "vllm/distributed/parallel_state.py",
        "vllm/envs.py",
        "vllm/platforms/cuda.py",
        "vllm/config/parallel.py",
        "vllm/config/compilation.py",  # PassConfig.default_fi_allreduce_fusion_max_size_mb: FlashInfer's bound
        "vllm/compilation/collective_fusion.py",
        "vllm/compilation/passes/fusion/allreduce_rms_fusion.py",
    ),
    write=_write,
    writes_sets=True,
    modeless=True,
    kernel=_kernel,
    read_under=_read_under,
    dtype_findings=_dtype_findings,
    reference=_reference,
    reference_findings=_reference_findings,
    bench=_bench,
    oracle=_oracle,
    code_prefix="V",
)
