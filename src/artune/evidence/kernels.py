"""The kernel an engine's choice runs, in the evidence's vocabulary (``artune.evidence.sweep``).

vLLM's paths go through vLLM's rules (``artune.formats.vllm.rules.kernel``:
its custom all-reduce picks 1-stage or 2-stage per call in C++). SGLang's
algorithm names already name one kernel each (``1shot_push``, ``2shot_pull``
...: its dispatch picks them by table, with no switch below), as
``sglang/<name>``; the SGLang benchmarks artune reads time its communicators
as a whole (``sglang/custom_ar_v2``), not these kernels. ``nccl`` is
``ncclAllReduce`` with NCCL choosing. Other names (artune's CPU algorithms,
torch's one-shot) have no column in any GPU benchmark and map to themselves.
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
    if spec is not None and spec.engine == "sglang":
        return f"sglang/{algorithm}"
    return algorithm


def why_kernel(algorithm: str, world_size: int, nbytes: int, custom_ar_algo: str | None = None) -> str:
    """Why that kernel runs, where the engine picks it below its table (vLLM's custom all-reduce); else ''."""
    if algorithm == "custom_ar":
        return vllm_rules.custom_ar_kernel(world_size, nbytes, custom_ar_algo)[1]
    return ""
