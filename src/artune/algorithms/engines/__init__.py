"""Engine kernels (vLLM, SGLang, FlashInfer) as candidates: why each is not offered here.

The reference tables name these algorithms (``custom_ar``; SGLang's
``1shot_push``, ``2shot_pull_mc``, ...), so a measured table and a published
one speak the same language. Their classes are built inside the engine's own
parallel state (vLLM's ``CustomAllreduce`` wants the engine's CPU group and
device set-up; SGLang's v2 kernels its JIT module and IPC handles), so no
adapter builds them from a plain process group yet. Rather than fake one,
``engine_reasons`` says, per name, whether the engine is installed and why it
is not a candidate; the Communicator lists these in ``unavailable``.
"""

from __future__ import annotations

import importlib.util

#: engine module -> (catalog names it runs, why no adapter builds them from a plain process group)
ENGINES: dict[str, tuple[tuple[str, ...], str]] = {
    "vllm": (
        ("custom_ar",),
        "vLLM's CustomAllreduce is built inside vLLM's parallel state (its CPU group, device and IPC "
        "buffers); artune has no adapter that builds it from a plain process group yet",
    ),
    "sglang": (
        ("1shot_push", "1shot_pull", "2shot_push", "2shot_pull", "2shot_pull_mc"),
        "SGLang's custom_all_reduce_v2 kernels are built by its JIT module inside SGLang's parallel "
        "state; artune has no adapter that builds them from a plain process group yet",
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
