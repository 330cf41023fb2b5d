"""How a table fills the gaps between its plans: the gap policy that ``Table.rules`` names.

artune's own tables (``"artune"``) borrow a neighbour's plan the way
``artune.table.decide`` documents: the nearest smaller world size, the other
mode, fewer hosts, and between arches the family chain
(``artune.table.family``). An engine has none of those: a world size or
topology its file has no config for runs the engine's process group (NCCL),
and an arch without a row takes the engine's own default. The policies are
plain data, one per origin, so that ``decide`` stays engine-agnostic and the
table layer imports nothing above it; each engine's readers and dispatch
rules live in ``artune.formats.<engine>``.
"""

from __future__ import annotations

from dataclasses import dataclass

from artune.errors import TableError


@dataclass(frozen=True)
class GapPolicy:
    """How the tables of one origin decide a call that has no plan of its own.

    ``nearest``: the call borrows a neighbour's plan (artune's policy);
    otherwise ``fallback`` (``""``: the platform's process group) runs every
    size, and ``no_plan`` says why, formatted with ``world_size``, ``mode``
    and ``hosts``; across hosts, ``no_rack_plan`` (in one NVLink domain) or
    ``over_network`` (hosts joined over a network) says it in the engine's
    multi-node terms where given.
    """

    name: str
    engine: str  # how messages name whose policy this is: "artune", "vLLM", "SGLang"
    nearest: bool
    fallback: str = ""
    no_plan: str = ""
    no_rack_plan: str = ""
    over_network: str = ""
    #: shape plans: a call no plan answers runs the fallback the plans name (the revision's own out-of-range
    #: answer) rather than ``fallback``, which stays what a message over the table's ``cap`` runs
    plans_fallback: bool = False
    #: why a call out of range runs the fallback, formatted with ``world_size``, ``hidden`` and ``fusion``
    out_of_range: str = ""
    #: on an AMD GPU (a ``rocm`` table): why a call with no plan runs the process group (RCCL), any topology
    no_rocm_plan: str = ""

    def missing(self, world_size: int, mode: str, hosts: int, nvlink: str = "host", kind: str = "cuda") -> str:
        """Why a call with no plan runs the fallback, in the engine's terms (``nvlink``: the hosts' domain;
        ``kind``: the table's platform)."""
        text = self.no_plan
        if kind == "rocm" and self.no_rocm_plan:
            return self.no_rocm_plan.format(world_size=world_size, mode=mode, hosts=hosts)
        if hosts > 1:
            text = (self.no_rack_plan if nvlink == "rack" else self.over_network) or text
        return text.format(world_size=world_size, mode=mode, hosts=hosts)


ARTUNE = GapPolicy("artune", "artune", nearest=True)
VLLM = GapPolicy(
    "vllm",
    "vLLM",
    nearest=False,
    fallback="nccl",
    no_plan="vLLM runs none of FlashInfer, custom all-reduce or symmetric memory at world size {world_size} "
    "(hosts={hosts}): every size goes to nccl",
    no_rack_plan="across {hosts} hosts in one NVLink domain vLLM runs none of FlashInfer's mnnvl all-reduce, "
    "custom all-reduce or torch symmetric memory at world size {world_size}: every size goes to nccl",
    over_network="across {hosts} hosts joined over a network vLLM runs nccl for every size at world size "
    "{world_size}: FlashInfer's only multi-node backend (mnnvl), custom all-reduce's MNNVL buffer and torch "
    "symmetric memory each need one NVLink domain for every rank, and their set-up fails or declines without it",
    no_rocm_plan="on ROCm vLLM starts none of QuickReduce, AITER's custom all-reduce or its own at world size "
    "{world_size} (hosts={hosts}), under the switches read: every size goes to rccl",
)
SGLANG = GapPolicy(
    "sglang",
    "SGLang",
    nearest=False,
    fallback="nccl",
    no_plan="SGLang has no custom all-reduce v2 config for world size {world_size} (hosts={hosts}): "
    "it is disabled there and every size goes to nccl",
    no_rack_plan="SGLang does not build custom all-reduce v2 for world size {world_size} across {hosts} hosts "
    "(no config for that world size, or a release without multi-node v2): every size goes to nccl",
    over_network="across {hosts} hosts joined over a network SGLang runs nccl for every size: custom all-reduce "
    "v2 admits a multi-node group only when every GPU is in one NVLink clique (is_one_nvlink_clique), and its "
    "legacy custom all-reduce stays on one node",
)

TRTLLM = GapPolicy(
    "trtllm",
    "TensorRT-LLM",
    nearest=False,
    fallback="nccl",
    no_plan="TensorRT-LLM decides by shape (tokens x hidden x fused op), not by bytes: give the call's tokens and "
    "hidden size (explain --tokens N --hidden H)",
    plans_fallback=True,
    out_of_range="no plan answers world size {world_size}, hidden size {hidden} with fused op {fusion}: the "
    "revision's own code defines no strategy there",
)

POLICIES: dict[str, GapPolicy] = {policy.name: policy for policy in (ARTUNE, VLLM, SGLANG, TRTLLM)}
NAMES = tuple(POLICIES)


def gap_policy(name: str) -> GapPolicy:
    """The policy called ``name``; ``TableError`` naming the known ones otherwise."""
    policy = POLICIES.get(name)
    if policy is None:
        raise TableError(f"rules = {name!r} is not known; known: {', '.join(NAMES)}")
    return policy
