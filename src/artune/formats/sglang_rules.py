"""How SGLang decides, as its released code does: the rules of every ``sglang:`` and ``reference:sglang`` table.

SGLang has no fallback between arches and no nearest world size: custom
all-reduce v2 is disabled at a world size its configs do not list
(``get_supported_world_sizes``), and the communicator runs NCCL there.
"""

from __future__ import annotations

from artune.table.rules import Rules

RULES = Rules(
    "sglang",
    "SGLang",
    nearest=False,
    fallback="nccl",
    no_plan="SGLang has no custom all-reduce v2 config for world size {world_size} (hosts={hosts}): "
    "it is disabled there and every size goes to nccl",
)
