"""What vLLM runs when its tensor-parallel group spans hosts, as each release's code decides.

Across hosts in one NVLink domain (a rack, ``NVLinkDomain.RACK``), the paths
of ``artune.formats.vllm.rules.paths`` change as vLLM's code changes them:

- FlashInfer's all-reduce (on by default from vLLM 0.29) starts where
  ``FI_ALLREDUCE_FUSION_MAX_SIZE_MB`` has the arch and world size (its
  ``16: 64`` "mnnvl multi-node" rows included). ``_resolve_fi_ar_backend``
  picks ``mnnvl`` for a multi-node group, with no TRT-LLM fallback, and from
  0.32 only on capability >= 10.0 (no FlashInfer path below). The mnnvl
  workspace needs NVLink multicast across the domain; its size is
  ``FI_MNNVL_ALLREDUCE_MAX_SIZE_MB[(cc, ws, nodes)]`` where that row is
  written, else the fusion row. FlashInfer's ``is_buffer_size_sufficient``
  (flashinfer-python 0.7.2.post1, ``MNNVLAllReduceFusionWorkspace``) sizes
  each of its three Lamport slots for the workspace's whole token count, so
  every size up to the bound passes it.
- ``CustomAllreduce`` (vLLM 0.27 on) builds across hosts in its
  ``mnnvl_only`` mode, from 0.29 only where ``_group_can_attempt_mnnvl``
  (capability >= 10.0 and local multicast on every rank) and in every
  release only where the MNNVL buffer's rendezvous has multicast. Ranks on
  different hosts are never ``fully_connected``, so ``should_custom_ar``
  takes all-reduces only at world size 2.
- torch symmetric memory starts as on one host: vLLM does not ask the node
  count, and its rendezvous spans the domain.

Across hosts joined over a network (``NVLinkDomain.HOST``) none of these
start: FlashInfer's mnnvl workspace and custom all-reduce's MNNVL buffer fail
to map peer memory (vLLM catches both), and torch symmetric memory's
rendezvous raises, which vLLM 0.11.1 on catches; 0.11.0 does not, so it
raises at start-up where symmetric memory has a row (``network_errors``).
"""

from __future__ import annotations

from dataclasses import replace

from artune.formats.vllm.rules import FALLBACK, SYMM_NAMES, Dispatch, both_modes, paths, world_sizes
from artune.table.priority import SizeRule, bands_from_rules
from artune.table.types import Plan, Provenance


def rack_topologies(d: Dispatch, arch: str) -> list[tuple[int, int]]:
    """Every ``(world size, hosts)`` across hosts where some path of ``d`` may run on ``arch``: the world
    sizes any path has, each split over every number of hosts above one that divides it evenly, and the
    ``(ws, nodes)`` FlashInfer's tuning names."""
    sizes = set(world_sizes(d, arch))
    pairs = {(ws, h) for ws in sizes for h in range(2, ws + 1) if ws % h == 0}
    pairs |= {(ws, nodes) for a, ws, nodes in d.fi_tuned_mb if a == arch and nodes > 1 and ws in sizes}
    return sorted(pairs)


def rack_plans(d: Dispatch, arch: str, provenance: Provenance) -> tuple[Plan, ...]:
    """One plan per world size, hosts and mode where vLLM runs a path across hosts in one NVLink domain, and
    one more for machines without NVLink multicast where that changes what runs (there nothing but nccl).
    Each plan's provenance (``provenance``, the arch's) starts with the multi-node rule that decides it."""
    out: list[Plan] = []
    for ws, hosts in rack_topologies(d, arch):
        found = paths(d, arch, ws, True, hosts)
        if found.errors or not found.run:
            continue  # vLLM raises there (the reader says so), or runs nccl for every size: no plan
        written = bands_from_rules(found.written, FALLBACK)
        why = "; ".join((_why(d, ws, hosts, found.run), *found.notes, provenance.notes))
        # the arch's own provenance (inherited rows included) stays the table's, which check reports once
        rule = replace(provenance, source="published", inherited_from="", notes=why)
        out += both_modes(ws, found.run, written, found.notes, None, hosts, rule)
        bare = paths(d, arch, ws, False, hosts)
        if bands_from_rules(bare.run, FALLBACK) != bands_from_rules(
            tuple(r for r in found.run if r.algorithm not in SYMM_NAMES), FALLBACK
        ):
            why = (
                f"{d.release} across {hosts} hosts without NVLink multicast: FlashInfer's mnnvl workspace, custom "
                "all-reduce's MNNVL buffer and torch symmetric memory each need it, so none starts"
            )
            bare_rule = replace(provenance, source="published", inherited_from="", notes=why)
            out += both_modes(ws, bare.run, written, bare.notes, False, hosts, bare_rule)
    return tuple(out)


def _why(d: Dispatch, ws: int, hosts: int, run: tuple[SizeRule, ...]) -> str:
    """One sentence: the multi-node rule behind the plan's first path."""
    first = run[0].algorithm
    if first == "flashinfer_ar":
        cc = d.fi_multinode_cc
        gate = f" (capability >= {cc // 10}.{cc % 10})" if cc else ""
        return (
            f"{d.release} across {hosts} hosts in one NVLink domain: _resolve_fi_ar_backend picks FlashInfer's "
            f"mnnvl backend for a multi-node group{gate}, with no TRT-LLM fallback"
        )
    if first == "custom_ar":
        return (
            f"{d.release} across {hosts} hosts: CustomAllreduce runs in its mnnvl_only mode, and ranks on "
            "different hosts are not fully_connected, so it takes all-reduces at world size 2 only"
        )
    return (
        f"{d.release} across {hosts} hosts in one NVLink domain: torch symmetric memory starts as on one host "
        f"(vLLM does not ask the node count; its rendezvous spans the domain); FlashInfer and custom all-reduce "
        f"do not run at world size {ws} here"
    )


def network_errors(d: Dispatch, arch: str) -> list[int]:
    """The world sizes where ``d`` raises at start-up on ``arch`` across hosts joined over a network: those
    torch symmetric memory has a row for, where the release lets the rendezvous's RuntimeError through."""
    if d.symm_rendezvous_caught or not d.symm_mem_on:
        return []
    return sorted(ws for ws in d.symm_mem.get(arch, {}) if ws > 1)


def network_error(d: Dispatch, sizes: list[int]) -> str:
    """Why ``d`` raises at start-up across hosts joined over a network at world ``sizes`` (N103)."""
    listed = ", ".join(map(str, sizes))
    return (
        f"{d.release} raises at start-up across hosts joined over a network at world size"
        f"{'s' if len(sizes) > 1 else ''} {listed}: SymmMemCommunicator calls torch symmetric memory's rendezvous, "
        "which cannot map peer memory between NVLink domains, without catching its RuntimeError (vLLM 0.11.1 on "
        "catches it and runs nccl)"
    )
