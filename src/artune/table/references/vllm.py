"""vLLM's published all-reduce dispatch as artune tables (``reference:vllm``).

Figures from vLLM's ``vllm/distributed/device_communicators/all_reduce_utils.py``
(custom all-reduce and torch symmetric-memory size limits per compute
capability and world size) and the multimem world sizes of its symmetric-memory
communicator. vLLM's rule, first match wins: ``custom_ar`` below its limit,
then torch symmetric memory below its limit (``symm_mem_multimem`` for the
multimem world sizes, else ``symm_mem_two_shot``), then ``nccl``. Both limits
are exclusive (``nbytes < limit``).

Only the size limits are bands. vLLM's other checks (custom_ar: world size
2/4/6/8, fp32/fp16/bf16, ``nbytes % 16 == 0``; symmetric memory: bf16,
``nbytes % 4 == 0``, multicast for multimem) are the catalog's ``Conditions``
of those algorithms, applied at decide time through ``available``. vLLM
ignores the graph/eager mode, so both modes get the same bands.

An arch vLLM has no entry for keeps custom_ar below its 8 MiB default and has
no symmetric memory: that is the set's ``default`` table.
"""

from __future__ import annotations

from types import MappingProxyType

from artune.table.family import TableSet
from artune.table.model import MODES, Plan, Platform, Provenance, Table
from artune.table.references.rules import Rule, bands_from_rules, below

KiB = 1024
MiB = 1024 * KiB

ORIGIN = "reference:vllm"
SOURCE_FILE = "vllm/distributed/device_communicators/all_reduce_utils.py"
FALLBACK = "nccl"

# Exclusive upper bounds in bytes, per arch and world size.
CUSTOM_AR_LIMITS: dict[str, dict[int, int]] = {
    "9.0": {2: 64 * MiB, 4: 32 * MiB, 6: 512 * KiB, 8: 256 * KiB},
    "10.0": {2: 2 * MiB, 4: 2 * MiB, 6: 1 * MiB, 8: 1 * MiB},
    "10.3": {2: 4 * MiB, 4: 4 * MiB, 6: 8 * MiB, 8: 4 * MiB},
    "10.7": {2: 4 * MiB, 4: 4 * MiB, 6: 8 * MiB, 8: 4 * MiB},
}
SYMM_MEM_LIMITS: dict[str, dict[int, int]] = {
    "9.0": {2: 64 * MiB, 4: 32 * MiB, 6: 64 * MiB, 8: 64 * MiB},
    "10.0": {2: 8 * MiB, 4: 32 * MiB, 6: 128 * MiB, 8: 128 * MiB},
    "10.3": {2: 4 * MiB, 4: 32 * MiB, 6: 32 * MiB, 8: 64 * MiB},
    "10.7": {2: 4 * MiB, 4: 32 * MiB, 6: 32 * MiB, 8: 64 * MiB},
}
MULTIMEM_WORLD_SIZES: dict[str, frozenset[int]] = {
    "9.0": frozenset({4, 6, 8}),
    "10.0": frozenset({6, 8}),
    "10.3": frozenset({6, 8}),
    "10.7": frozenset({6, 8}),
}
# custom_ar's own buffer size when the arch has no entry (and no symmetric memory)
CUSTOM_AR_DEFAULT_LIMIT = 8 * MiB
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)

# 10.7 (Rubin) was added to vLLM by copying the 10.3 figures, not by measuring.
_INHERITED = {"10.7": "10.3"}


def _rules(arch: str, world_size: int) -> list[Rule]:
    rules = [below("custom_ar", CUSTOM_AR_LIMITS[arch][world_size])]
    symm = SYMM_MEM_LIMITS[arch].get(world_size)
    if symm is not None:
        name = "symm_mem_multimem" if world_size in MULTIMEM_WORLD_SIZES[arch] else "symm_mem_two_shot"
        rules.append(below(name, symm))
    return rules


def _plans(rules_for: dict[int, list[Rule]]) -> tuple[Plan, ...]:
    return tuple(
        Plan(world_size, mode, bands_from_rules(rules, FALLBACK), FALLBACK)
        for world_size, rules in sorted(rules_for.items())
        for mode in MODES
    )


def arch_table(arch: str) -> Table:
    """vLLM's table for one arch it lists ("9.0", "10.0", "10.3", "10.7")."""
    parent = _INHERITED.get(arch, "")
    if parent:
        provenance = Provenance(
            source="inherited",
            inherited_from=parent,
            tool="vllm",
            notes=(f"vLLM's {arch} limits are the {parent} figures copied without measuring on {arch} ({SOURCE_FILE})"),
        )
    else:
        provenance = Provenance(
            source="published",
            tool="vllm",
            notes=(
                f"vLLM's custom all-reduce and torch symmetric-memory limits for {arch} ({SOURCE_FILE}); "
                "exclusive bounds; dtype/alignment checks applied at run time"
            ),
        )
    rules = {ws: _rules(arch, ws) for ws in CUSTOM_AR_LIMITS[arch]}
    return Table(Platform("cuda", arch), provenance, _plans(rules), origin=ORIGIN)


def default_table() -> Table:
    """What vLLM does on an arch without an entry: custom_ar below 8 MiB, no symmetric memory."""
    provenance = Provenance(
        source="published",
        tool="vllm",
        notes=(
            "vLLM on an arch missing from its tables: custom all-reduce below its 8 MiB default "
            f"buffer, no torch symmetric memory ({SOURCE_FILE})"
        ),
    )
    rules = {ws: [below("custom_ar", CUSTOM_AR_DEFAULT_LIMIT)] for ws in CUSTOM_AR_WORLD_SIZES}
    return Table(Platform("cuda", "default"), provenance, _plans(rules), origin=ORIGIN)


def table_set() -> TableSet:
    """vLLM's tables keyed by arch, with its unknown-arch behaviour as the default."""
    tables = {arch: arch_table(arch) for arch in CUSTOM_AR_LIMITS}
    return TableSet("vllm", "cuda", MappingProxyType(tables), default_table())
