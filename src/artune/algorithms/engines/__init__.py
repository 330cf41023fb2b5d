"""Engine kernels (vLLM, SGLang) as candidates: why each is not offered here.

The reference tables name these algorithms (``custom_ar``; SGLang's
``1shot_push``, ``2shot_pull_mc``, ...), so a measured table and a published
one speak the same language. artune has no adapter for them yet: each engine
sets its kernels up inside its own parallel state (IPC buffers exchanged over
its CPU group, and for CUDA graphs a registration of the captured buffers
around every capture, which the Communicator does not drive). Rather than
fake one, ``engine_reasons`` says, per name, whether the engine is installed
and why it is not a candidate; the Communicator lists these in
``unavailable``. FlashInfer's all-reduce appears in vLLM's tables only fused
with RMSNorm, not as a plain all-reduce, so it has no name here.
"""

from __future__ import annotations

import importlib.util

#: engine module -> (catalog names it runs, why no adapter builds them from a plain process group)
ENGINES: dict[str, tuple[tuple[str, ...], str]] = {
    "vllm": (
        ("custom_ar",),
        "artune has no adapter yet that sets up vLLM's CustomAllreduce (IPC buffers, graph-buffer "
        "registration around captures) on a plain process group",
    ),
    "sglang": (
        ("1shot_push", "1shot_pull", "2shot_push", "2shot_pull", "2shot_pull_mc"),
        "artune has no adapter yet that sets up SGLang's custom_all_reduce_v2 kernels (JIT module, IPC "
        "buffers, block counts) on a plain process group",
    ),
}


def engine_reasons() -> dict[str, str]:
    """Catalog name -> why that engine kernel is not a candidate here (not installed, or no adapter)."""
    reasons: dict[str, str] = {}
    for module, (names, no_adapter) in ENGINES.items():
        installed = importlib.util.find_spec(module) is not None
        why = f"{module} is installed, but {no_adapter}" if installed else f"{module} is not installed"
        reasons.update(dict.fromkeys(names, why))
    return reasons
