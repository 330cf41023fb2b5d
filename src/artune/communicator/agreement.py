"""Construction-time agreement: every rank must run the same table with the same settings.

Ranks that disagree would choose different algorithms for the same message
and hang; so the Communicator compares, once, what each rank loaded and
refuses to start (on every rank, with the same message) when they differ.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch.distributed as dist

from artune.errors import AgreementError


@dataclass(frozen=True)
class RankFacts:
    """What one rank brings to the group."""

    version: str
    table_digest: str
    table_name: str
    forced: str
    mode: str
    buffer_bytes: int
    host: str
    #: torch intra-op threads and the CPUs this rank may run on: what the oversubscription warning needs
    threads: int = 1
    cpus: tuple[int, ...] = ()


def agree(facts: RankFacts, group: dist.ProcessGroup | None) -> list[RankFacts]:
    """All ranks' facts (by group rank); ``AgreementError`` on every rank when the shared ones differ.

    ``host``, ``threads`` and ``cpus`` may differ: they only decide whether
    shared memory can be offered and whether to warn of oversubscription.
    """
    gathered: list[dict[str, object] | None] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, asdict(facts), group=group)
    everyone = [RankFacts(**f) for f in gathered if f is not None]
    for field in ("version", "table_digest", "forced", "mode", "buffer_bytes"):
        values = {getattr(f, field) for f in everyone}
        if len(values) > 1:
            per_rank = ", ".join(
                f"rank {r}: {getattr(f, field)!r}" + (f" ({f.table_name})" if field == "table_digest" else "")
                for r, f in enumerate(everyone)
            )
            raise AgreementError(
                f"Communicator(): ranks disagree on {field}: {per_rank}; give every rank the same "
                "table (table= or ARTUNE_TABLE), overrides and artune version"
            )
    return everyone
