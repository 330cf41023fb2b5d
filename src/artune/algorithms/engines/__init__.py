"""Engine kernels (vLLM, SGLang) as optional candidates, under the names the reference tables use.

The adapters are written against the engines' public sources (vLLM
``CustomAllreduce``, SGLang ``CustomAllReduceV2``) and tested on CPU against
stand-ins for those classes (where they have run: docs/status.md).

``open_engine_algorithms`` is collective and runs only when CUDA algorithms
are opened. Per engine, when every rank has it installed, it imports the
adapter module (``vllm.py``, ``sglang.py``), which imports the engine and
builds its class on a gloo group over the same ranks; every name it cannot
offer gets a reason naming what is missing (the same text on every rank).
FlashInfer's all-reduce appears in vLLM's tables only fused with RMSNorm,
not as a plain all-reduce, so it has no name here.
"""

from __future__ import annotations

import importlib
import importlib.util
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from artune.algorithms.base import Algorithm

#: engine module -> (catalog names it runs, artune's adapter module)
ENGINES: dict[str, tuple[tuple[str, ...], str]] = {
    "vllm": (("custom_ar",), "artune.algorithms.engines.vllm"),
    "sglang": (
        ("1shot_push", "1shot_pull", "2shot_push", "2shot_pull", "2shot_pull_mc"),
        "artune.algorithms.engines.sglang",
    ),
}


def installed(module: str) -> bool:
    """True when ``module`` can be imported here (checked without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def engine_reasons() -> dict[str, str]:
    """Catalog name -> why that engine kernel is not a candidate before anything is opened (local check)."""
    reasons: dict[str, str] = {}
    for module, (names, _) in ENGINES.items():
        why = (
            f"{module} is installed; its adapter is opened only with the CUDA algorithms (a NCCL group)"
            if installed(module)
            else f"{module} is not installed"
        )
        reasons.update(dict.fromkeys(names, why))
    return reasons


def current_cuda_device() -> torch.device:
    """The CUDA device this rank uses (the one the engines' classes are bound to)."""
    return torch.device("cuda", torch.cuda.current_device())


def gather(value: object, group: Any) -> list[object]:
    """``value`` from every rank of ``group``, by rank (collective)."""
    out: list[object] = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, value, group=group)
    return out


def agreed_problem(problem: str, group: Any) -> str:
    """The first rank's problem (prefixed with its rank unless every rank has one), or ``""`` (collective)."""
    found = [(rank, str(p)) for rank, p in enumerate(gather(problem, group)) if p]
    if not found:
        return ""
    if len(found) == dist.get_world_size(group):
        return found[0][1]
    return f"rank {found[0][0]}: {found[0][1]}"


def cpu_group(group: Any, timeout: float) -> tuple[Any, bool]:
    """A gloo group over the ranks of ``group`` (the engines exchange IPC handles on one) and whether it is new.

    ``group`` itself when its CPU backend is gloo (``"cpu:gloo,cuda:nccl"``);
    otherwise a new gloo group over the same ranks, created by its members
    only (``use_local_synchronization``), so collective over ``group``.
    """
    from artune.algorithms.torch_dist import backend_parts

    if backend_parts(group).get("cpu") == "gloo":
        return group, False
    ranks = dist.get_process_group_ranks(group if group is not None else dist.group.WORLD)
    made = dist.new_group(
        ranks=sorted(ranks), backend="gloo", timeout=timedelta(seconds=timeout), use_local_synchronization=True
    )
    return made, True


def open_engine_algorithms(group: Any, *, timeout: float) -> tuple[dict[str, Algorithm], dict[str, str]]:
    """The engine kernels that can run on ``group`` here, and why each other catalog name cannot.

    Collective: every rank calls it. An engine missing on any rank is not
    imported on any rank.
    """
    found: dict[str, Algorithm] = {}
    reasons: dict[str, str] = {}
    for module, (names, adapter) in ENGINES.items():
        missing = [rank for rank, ok in enumerate(gather(installed(module), group)) if not ok]
        if missing:
            where = "" if len(missing) == dist.get_world_size(group) else f" on rank {missing[0]}"
            reasons.update(dict.fromkeys(names, f"{module} is not installed{where}"))
            continue
        opened, why = importlib.import_module(adapter).open_engine(group, timeout=timeout)
        found.update(opened)
        reasons.update(why)
    return found, reasons
