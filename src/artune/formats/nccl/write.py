"""Write a table as lines of NCCL's example tuner plugin CSV (``plugins/tuner/example/nccl_tuner.conf``).

Line format: ``allreduce,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks``;
the plugin takes the first line whose inclusive ``[min, max]`` holds the
size. Only NCCL's own algorithms can be written: a band whose first
candidate is named ``nccl_<algorithm>[_<protocol>]`` (``nccl_ring``,
``nccl_tree_ll``, ``nccl_nvls_simple``; the protocol defaults to simple)
becomes a line, with the plan's ``channels`` parameter (``-1`` when none).
The projection, stated on stderr: the CSV has no arch key (the lines apply
on every GPU), no graph/eager split (eager plans are written; graph plans
that differ are dropped), and sizes that an engine kernel or the plain
``nccl`` choice takes get no line (NCCL never sees the former; for the
latter NCCL chooses). Beware the example plugin's channel caveat: where no
line matches it limits the collective to one channel.
"""

from __future__ import annotations

import re

from artune.formats.export import Export, provenance_lines
from artune.sizes import format_span
from artune.table.types import Table

ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = ("ll", "ll128", "simple")
MAX_BYTES = 4294967295  # what the example's docs write for "no upper end"
_NAME = re.compile(rf"^nccl_({'|'.join(sorted(ALGORITHMS, key=len, reverse=True))})(?:_({'|'.join(PROTOCOLS)}))?$")


def nccl_algorithm(name: str) -> tuple[str, str] | None:
    """``("ring", "ll")`` for ``nccl_ring_ll``; ``None`` for a name that is not one of NCCL's algorithms."""
    match = _NAME.match(name)
    return (match.group(1), match.group(2) or "simple") if match else None


def export_nccl(table: Table, command: str, nodes: int = 1) -> Export:
    """CSV lines for every eager plan of ``table``."""
    lines = provenance_lines(table, command)
    lines.append(f"# nNodes = {nodes}; the CSV has no arch key: these lines apply on every GPU")
    dropped = [f"the CSV has no per-arch key: arch {table.platform.arch} is not recorded in the lines"]
    for ws in sorted({p.world_size for p in table.plans}):
        plan = table.plan(ws, "eager") or table.plan(ws, "graph")
        assert plan is not None
        other = table.plan(ws, "graph")
        if other is not None and other is not plan and (other.bands, other.fallback) != (plan.bands, plan.fallback):
            dropped.append(f"ws={ws} graph: the CSV has no graph/eager split; the graph plan is dropped")
        pieces = [(lo, MAX_BYTES if hi is None else hi, cands[0]) for lo, hi, cands in plan.spans()]
        for lo, hi, name in pieces:
            if lo > MAX_BYTES:
                continue
            found = nccl_algorithm(name)
            if found is None:
                if name != "nccl":
                    dropped.append(
                        f"ws={ws} {format_span(lo, hi)}: {name} is not an NCCL algorithm; no line (NCCL never "
                        "sees these sizes when the engine runs them itself)"
                    )
                continue
            channels = plan.params_for(name).get("channels", -1)
            lines.append(f"allreduce,{lo},{hi},{found[0]},{found[1]},{channels},{nodes},{ws}")
    return Export("\n".join(lines) + "\n", dropped)
