"""vLLM's published all-reduce dispatch as artune tables (``reference:vllm``): what vLLM 0.33.0 runs by default.

The figures are vLLM 0.33.0's, as released: custom all-reduce and torch
symmetric-memory size limits per compute capability and world size
(``vllm/distributed/device_communicators/all_reduce_utils.py``), the
multimem world sizes of its symmetric-memory communicator (``symm_mem.py``),
FlashInfer's all-reduce limits (``FI_ALLREDUCE_FUSION_MAX_SIZE_MB`` in
``vllm/compilation/passes/fusion/allreduce_rms_fusion.py``, keyed
``major*10+minor``) and their one-host MNNVL tuning
(``FI_MNNVL_ALLREDUCE_MAX_SIZE_MB``), with the facts of that release's code:
FlashInfer's all-reduce is on by default (since 0.29) and asked first,
custom all-reduce keeps ``min(row, 8 MiB)`` (``< max_size``) where symmetric
memory starts and its 8 MiB default elsewhere, symmetric memory takes
``<= limit``. ``artune.formats.vllm.rules`` turns them into tables exactly as
it does for ``vllm==0.33.0`` read from the wheel (a test compares the two), so
both decide as vLLM does, under the same rules: no fallback between arches
(an arch vLLM has no row for runs custom_ar below 8 MiB and nothing else) and
nccl for every world size without a path.

vLLM's other checks (custom_ar: fp32/fp16/bf16, ``nbytes % 16 == 0``;
symmetric memory: bf16, ``nbytes % 4 == 0``, multicast; FlashInfer:
fp16/bf16/fp32, 2-D) are the catalog's ``Conditions`` of those algorithms,
applied at decide time through ``available``. vLLM ignores the graph/eager
mode, so both modes get the same bands.
"""

from __future__ import annotations

from artune.formats.vllm.checks import reader_findings
from artune.formats.vllm.figures import Figures
from artune.formats.vllm.rack import rack_plans
from artune.formats.vllm.rules import Dispatch, default_path
from artune.formats.vllm.rules import table_set as vllm_table_set
from artune.table.check import Finding
from artune.table.family import TableSet
from artune.table.types import Provenance

KiB = 1024
MiB = 1024 * KiB

ORIGIN = "reference:vllm"
RELEASE = "vLLM 0.33.0"
SOURCE_FILE = "vllm/distributed/device_communicators/all_reduce_utils.py"

# Exclusive upper bounds in bytes (custom_ar: nbytes < limit), per arch and world size.
CUSTOM_AR_LIMITS: dict[str, dict[int, int]] = {
    "9.0": {2: 64 * MiB, 4: 32 * MiB, 6: 512 * KiB, 8: 256 * KiB},
    "10.0": {2: 2 * MiB, 4: 2 * MiB, 6: 1 * MiB, 8: 1 * MiB},
    "10.3": {2: 4 * MiB, 4: 4 * MiB, 6: 8 * MiB, 8: 4 * MiB},
    "10.7": {2: 4 * MiB, 4: 4 * MiB, 6: 8 * MiB, 8: 4 * MiB},
}
# Inclusive upper bounds in bytes (nbytes <= limit), per arch and world size.
SYMM_MEM_LIMITS: dict[str, dict[int, int]] = {
    "9.0": {2: 64 * MiB, 4: 32 * MiB, 6: 64 * MiB, 8: 64 * MiB},
    "10.0": {2: 8 * MiB, 4: 32 * MiB, 6: 128 * MiB, 8: 128 * MiB},
    "10.3": {2: 4 * MiB, 4: 32 * MiB, 6: 32 * MiB, 8: 64 * MiB},
    "10.7": {2: 4 * MiB, 4: 32 * MiB, 6: 32 * MiB, 8: 64 * MiB},
}
MULTIMEM_WORLD_SIZES: dict[str, tuple[int, ...]] = {
    "9.0": (4, 6, 8),
    "10.0": (6, 8),
    "10.3": (6, 8),
    "10.7": (6, 8),
}
# FlashInfer's all-reduce: inclusive bounds in MB (binary), per arch and world size
FLASHINFER_MB: dict[str, dict[int, float]] = {
    "9.0": {2: 64, 4: 2, 8: 0.5},
    "10.0": {2: 64, 4: 32, 8: 1, 16: 64},
    "10.3": {2: 64, 4: 64, 8: 4, 16: 64},
    "10.7": {2: 64, 4: 64, 8: 2},
}
# ...and on one host (MNNVL backend) where tuned: (arch, world size, nodes) -> MB
FLASHINFER_MNNVL_MB: dict[tuple[str, int, int], float] = {
    ("10.0", 8, 1): 128,
    ("10.0", 8, 2): 128,
    ("10.3", 4, 1): 80,
    ("10.3", 8, 1): 128,
    ("10.3", 8, 2): 128,
    ("10.3", 16, 4): 8,
}
CUSTOM_AR_DEFAULT_LIMIT = 8 * MiB  # CustomAllreduce(max_size=8192 * 1024)
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)  # _SUPPORTED_WORLD_SIZES lists 16 too; should_custom_ar refuses ws > 8

# 10.7 (Rubin) was added to vLLM by copying the 10.3 figures ("reuse 10.3 thresholds"), not by measuring.
_INHERITED = {"10.7": "10.3"}

DISPATCH = Dispatch(
    release=RELEASE,
    custom_ar=CUSTOM_AR_LIMITS,
    symm_mem=SYMM_MEM_LIMITS,
    multimem=MULTIMEM_WORLD_SIZES,
    fi_sizes_mb=FLASHINFER_MB,
    fi_tuned_mb=FLASHINFER_MNNVL_MB,
    custom_ar_max=CUSTOM_AR_DEFAULT_LIMIT,
    custom_ar_world_sizes=CUSTOM_AR_WORLD_SIZES,
    flashinfer_on=True,
    fi_multinode_cc=100,  # _resolve_fi_ar_backend: mnnvl across hosts on capability >= 10.0 only
    custom_ar_mnnvl_cc=100,  # _group_can_attempt_mnnvl: capability >= 10.0 and local multicast
)


def _provenance(arch: str) -> Provenance:
    parent = _INHERITED.get(arch, "")
    if parent:
        return Provenance(
            source="inherited",
            inherited_from=parent,
            tool="vllm",
            notes=f"{RELEASE}'s {arch} limits are the {parent} figures copied without measuring on {arch} "
            f"({SOURCE_FILE})",
        )
    return Provenance(
        source="published",
        tool="vllm",
        notes=f"what {RELEASE} runs by default on {arch} ({SOURCE_FILE} and the FlashInfer tables); "
        "dtype/alignment checks applied at run time",
    )


def figures() -> Figures:
    """The reference's tables as the vLLM reader's ``Figures`` of vLLM 0.33.0 (no file, so no lines)."""
    return Figures(
        custom_ar={arch: dict(rows) for arch, rows in CUSTOM_AR_LIMITS.items()},
        symm_mem={arch: dict(rows) for arch, rows in SYMM_MEM_LIMITS.items()},
        multimem={arch: list(sizes) for arch, sizes in MULTIMEM_WORLD_SIZES.items()},
        fi_fusion={arch: dict(rows) for arch, rows in FLASHINFER_MB.items()},
        fi_mnnvl=dict(FLASHINFER_MNNVL_MB),
    )


def findings() -> tuple[Finding, ...]:
    """What ``artune check vllm==0.33.0`` finds, on the reference's figures: the same messages, named
    ``reference:vllm`` where the release's name a file and line."""
    return reader_findings(figures(), DISPATCH, ORIGIN, "")


def table_set() -> TableSet:
    """vLLM 0.33.0's tables keyed by arch, with its unknown-arch behaviour as the default."""
    default = Provenance(
        source="published",
        tool="vllm",
        notes=f"what {RELEASE} runs on an arch missing from its tables: {default_path(DISPATCH)} ({SOURCE_FILE})",
    )
    return vllm_table_set(DISPATCH, ORIGIN, _provenance, default, name="vllm", across_hosts=rack_plans)
