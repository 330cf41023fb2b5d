"""The kernel an engine's choice runs, in the evidence's vocabulary (``artune.evidence.sweep``).

The catalog names each algorithm's kernels (``artune.catalog.KERNELS``); an
algorithm of one kernel runs it. Where vLLM picks one per call (its custom
all-reduce: 1-stage or 2-stage in C++; FlashInfer's backend by the machine),
the engine says which (``EnginePlugin.kernel``; vLLM's rules). SGLang's
names run one kernel each, ``sglang/<name>`` (its dispatch picks them by
table, with no switch below); the SGLang benchmarks artune reads time its
communicators as a whole (``sglang/custom_ar_v2``), not these kernels.
Names the catalog gives no kernel (``hier_shm``) or does not know map to
themselves.
"""

from __future__ import annotations

from artune import catalog
from artune.formats.registry import engines


def _picked(
    algorithm: str, world_size: int, nbytes: int, multicast: bool, forced: str | None
) -> tuple[str, str] | None:
    """The kernel an engine picks below its table for ``algorithm``, and why; None where none does."""
    for engine in engines("kernel"):
        assert engine.kernel is not None
        found = engine.kernel(algorithm, world_size, nbytes, multicast, forced)
        if found is not None:
            return found
    return None


def kernel_of(algorithm: str, world_size: int, nbytes: int, multicast: bool, custom_ar_algo: str | None = None) -> str:
    """The kernel ``algorithm`` runs for one message; ``custom_ar_algo`` is ``VLLM_CUSTOM_ALLREDUCE_ALGO``."""
    found = _picked(algorithm, world_size, nbytes, multicast, custom_ar_algo)
    if found is not None:
        return found[0]
    spec = catalog.SPECS.get(algorithm)
    return spec.kernels[0].name if spec is not None and spec.kernels else algorithm


def why_kernel(algorithm: str, world_size: int, nbytes: int, custom_ar_algo: str | None = None) -> str:
    """Why that kernel runs, where the engine picks it below its table (vLLM's custom all-reduce); else ''."""
    found = _picked(algorithm, world_size, nbytes, True, custom_ar_algo)
    return found[1] if found is not None else ""
