"""The kernel an engine's choice runs, in the evidence's vocabulary (``artune.evidence.sweep``).

The catalog names each algorithm's kernels (``artune.catalog.KERNELS``); an
algorithm of one kernel runs it. Where vLLM picks one per call (its custom
all-reduce: 1-stage or 2-stage in C++; FlashInfer's backend by the machine),
vLLM's rules say which (``artune.formats.vllm.rules.kernel``). SGLang's
names run one kernel each, ``sglang/<name>`` (its dispatch picks them by
table, with no switch below); the SGLang benchmarks artune reads time its
communicators as a whole (``sglang/custom_ar_v2``), not these kernels.
Names the catalog gives no kernel (``hier_shm``) or does not know map to
themselves.
"""

from __future__ import annotations

from artune import catalog
from artune.formats.vllm import rules as vllm_rules


def kernel_of(algorithm: str, world_size: int, nbytes: int, multicast: bool, custom_ar_algo: str | None = None) -> str:
    """The kernel ``algorithm`` runs for one message; ``custom_ar_algo`` is ``VLLM_CUSTOM_ALLREDUCE_ALGO``."""
    found = vllm_rules.kernel(algorithm, world_size, nbytes, multicast, custom_ar_algo)
    if found is not None:
        return found
    spec = catalog.SPECS.get(algorithm)
    return spec.kernels[0].name if spec is not None and spec.kernels else algorithm


def why_kernel(algorithm: str, world_size: int, nbytes: int, custom_ar_algo: str | None = None) -> str:
    """Why that kernel runs, where the engine picks it below its table (vLLM's custom all-reduce); else ''."""
    if algorithm == "custom_ar":
        return vllm_rules.custom_ar_kernel(world_size, nbytes, custom_ar_algo)[1]
    return ""
