"""A shape table from measurements: per (world size, fused op, hidden) the winner of each token count.

TensorRT-LLM decides by shape (tokens x hidden x fused op), and its own
generator takes the argmin time of every cell. Here each cell is picked by
the tuner's rule (``artune.tune.compare``): the previous token count's winner
keeps the cell unless the rounds show another faster. The measurements come
from anywhere, for example TensorRT-LLM's generator CSV read by
``artune.formats.trtllm.generator.read_csv`` (the command line joins the two).
"""

from __future__ import annotations

from collections.abc import Sequence

from artune.measure.records import Measurement, ShapeMeasurement
from artune.table.types import Band, Platform, Provenance, ShapePlan, Table, pow2_ranges
from artune.tune.compare import FasterRule
from artune.tune.derive import pick_all


def derive_shape_table(
    measurements: Sequence[ShapeMeasurement], arch: str, preference: Sequence[str], fallback: str = "nccl_symmetric"
) -> Table:
    """A shape table from measurements: per (world size, fused op, hidden) the winner of each token count by
    the tuner's rule, the previous count's winner kept unless the rounds overturn it. Each plan answers the
    world sizes and hidden sizes that TensorRT-LLM's truncated ``log2`` index reads from its row
    (``pow2_ranges``); rows the measurements lack are out of range (``fallback``)."""
    groups: dict[tuple[int, str, int], dict[int, list[Measurement]]] = {}
    for sm in measurements:
        groups.setdefault((sm.world_size, sm.fusion, sm.hidden), {}).setdefault(sm.tokens, []).append(sm.measurement)
    plans = []
    ws_ranges = pow2_ranges(ws for ws, _fusion, _hidden in groups)
    hidden_ranges = pow2_ranges(hidden for _ws, _fusion, hidden in groups)
    rule = FasterRule()
    for (ws, fusion, hidden), by_tokens in sorted(groups.items()):
        picks = pick_all(by_tokens, rule, preference)
        bands: list[Band] = []
        for pick in picks:
            upto = _column_end(pick.size)
            if bands and bands[-1].candidates == (pick.winner.algorithm,):
                bands[-1] = Band(upto, bands[-1].candidates)
            else:
                bands.append(Band(upto, (pick.winner.algorithm,)))
        plans.append(ShapePlan(*ws_ranges[ws], *hidden_ranges[hidden], (fusion,), tuple(bands), fallback))
    provenance = Provenance(
        "measured",
        tool="artune (TensorRT-LLM generator CSV)",
        notes="cells by artune's evidence rule over the CSV's rounds",
    )
    return Table(Platform("cuda", arch), provenance, (), rules="trtllm", shape_plans=tuple(plans))


def _column_end(tokens: int) -> int:
    """The last token count of the column ``tokens`` falls in (``[2**k, 2**(k+1) - 1]``)."""
    return (1 << tokens.bit_length()) - 1
