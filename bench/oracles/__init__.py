"""Oracles: the engines' own released code, run on their own configs, as the truth artune's readers must match.

Each module (``sglang``, ``vllm``) downloads nothing itself: it takes the
folder ``artune.formats.releases.fetch_release`` unpacked, and answers probes
with the engine's code and with artune's reader, side by side. Only tests and
benches import these; the product never runs an engine's code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    """One all-reduce call to decide: the engine's answer and artune's must be equal."""

    arch: str
    world_size: int
    mode: str
    multicast: bool
    nbytes: int
    dtype: str = "bfloat16"
