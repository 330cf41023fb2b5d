"""Per device type: which table decides and which process-group algorithm is the baseline.

A Communicator on a ``"cpu:gloo,cuda:nccl"`` group serves CPU tensors with
the CPU table (gloo as baseline) and CUDA tensors with this host's CUDA table
(NCCL as baseline): each device type has its own routes. The CUDA table is
the one given (when its platform is ``cuda``), else this host's measured one
(``artune tune --device cuda`` installs it under the GPU fingerprint), else
the conservative default (NCCL for every size).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from artune import machine
from artune.algorithms.base import Algorithm
from artune.algorithms.torch_dist import ProcessGroupAlgorithm, backend_parts
from artune.settings import Settings
from artune.table.bundled import default_table
from artune.table.cache import cached_table_path, load_cached_table
from artune.table.overrides import apply_overrides, parse_overrides
from artune.table.types import Platform, Table


def wants_cuda(group: Any) -> bool:
    """True when ``group`` reduces CUDA tensors with NCCL and this process has a CUDA device."""
    import torch

    return backend_parts(group).get("cuda") == "nccl" and torch.cuda.is_available()


def cuda_table(chosen: Table, platform: Platform, fingerprint: str, settings: Settings) -> Table:
    """The table for CUDA tensors: ``chosen`` when it is a CUDA table, else the cached or the default one."""
    if chosen.platform.kind == "cuda":
        return chosen
    cached = load_cached_table(settings.cache_dir, fingerprint)
    if cached is not None:
        table = cached.with_changes(origin=f"{cached.name} (this machine's measured CUDA table)")
    else:
        missing = cached_table_path(settings.cache_dir, fingerprint)
        base = default_table(platform)
        table = base.with_changes(
            origin=f"{base.name} (no measured CUDA table at {missing}; run 'artune tune --device cuda')"
        )
    overrides = parse_overrides(settings.algorithm, settings.bounds, "ARTUNE_ALGORITHM/ARTUNE_BOUNDS")
    return apply_overrides(table, overrides)


def device_tables(chosen: Table, group: Any, settings: Settings) -> dict[str, Table]:
    """Device type -> table; ``chosen`` serves every device type not listed."""
    if not wants_cuda(group):
        return {"cpu": chosen}
    from artune.gpufacts import gpu_facts

    facts = gpu_facts()
    cuda = cuda_table(chosen, facts.platform(), facts.fingerprint(), settings)
    cpu = chosen if chosen.platform.kind != "cuda" else default_table(machine.cpu_platform())
    return {"cpu": cpu, "cuda": cuda}


def baselines(by_name: Mapping[str, Algorithm]) -> dict[str, str]:
    """Device type -> the process-group algorithm that reduces it (the first one listed wins)."""
    found: dict[str, str] = {}
    for name, algorithm in by_name.items():
        if isinstance(algorithm, ProcessGroupAlgorithm):
            for device in sorted(algorithm.devices or ("cpu",)):
                found.setdefault(device, name)
    return found
