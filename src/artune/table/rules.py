"""The rules a table decides by where it has no plan for a call, named by ``Table.rules``.

artune's own tables (``"artune"``) fill gaps the way ``artune.table.decide``
documents: the nearest smaller world size, the other mode, fewer hosts, and
between arches the family chain (``artune.table.family``). An engine's
tables decide as that engine does, and an engine has none of those: a world
size or topology its file has no config for runs the engine's process group
(NCCL), and an arch without a row takes the engine's own default. Each
engine's rules live beside its reader (``artune.formats.vllm_rules``,
``artune.formats.sglang_rules``) and are found here by name, so that the
table model stays plain data and ``decide`` stays engine-agnostic.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from artune.errors import TableError


@dataclass(frozen=True)
class Rules:
    """How the tables of one origin fill the gaps between their plans.

    ``nearest``: a call without its own plan borrows a neighbour's (artune's
    rules); otherwise ``fallback`` (``""``: the platform's process group) runs
    every size, and ``no_plan`` says why, formatted with ``world_size``,
    ``mode`` and ``hosts``.
    """

    name: str
    engine: str  # how messages name whose rules these are: "artune", "vLLM", "SGLang"
    nearest: bool
    fallback: str = ""
    no_plan: str = ""

    def missing(self, world_size: int, mode: str, hosts: int) -> str:
        """Why a call with no plan runs the fallback, in the engine's terms."""
        return self.no_plan.format(world_size=world_size, mode=mode, hosts=hosts)


ARTUNE = Rules("artune", "artune", nearest=True)

# the engines' rules: module path -> its ``RULES``; imported on first use
_ENGINES = {"vllm": "artune.formats.vllm_rules", "sglang": "artune.formats.sglang_rules"}
NAMES = ("artune", *_ENGINES)


def rules_for(name: str) -> Rules:
    """The rules called ``name``; ``TableError`` naming the known ones otherwise."""
    if name == ARTUNE.name:
        return ARTUNE
    module = _ENGINES.get(name)
    if module is None:
        raise TableError(f"rules = {name!r} is not known; known: {', '.join(NAMES)}")
    rules: Rules = importlib.import_module(module).RULES
    return rules
