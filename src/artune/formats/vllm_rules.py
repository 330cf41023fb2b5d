"""How vLLM decides, as its released code does: the rules of every ``vllm:`` and ``reference:vllm`` table.

vLLM has no fallback between arches and no nearest world size: a world size
that none of its communicators takes runs NCCL (pynccl), and so does every
size that no communicator's limit admits.
"""

from __future__ import annotations

from artune.table.rules import Rules

RULES = Rules(
    "vllm",
    "vLLM",
    nearest=False,
    fallback="nccl",
    no_plan="vLLM has no custom all-reduce or symmetric-memory path at world size {world_size} (hosts={hosts}): "
    "every size goes to nccl",
)
