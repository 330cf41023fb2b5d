"""An artune shape table as TensorRT-LLM's ``AllReduceBestStrategyTableSM<N>`` block, ready to paste.

The block has the shape the header's generator writes and the header's
``selectStrategyLookUpTable`` reads: ``[tp][fusion][hidden][tokens]``, TP
rows 2, 4, 8, the four fused-op planes in ``mapFusionOpToIndex``'s order,
hidden rows 128 to 8192 and token columns 1 to 16384 (powers of two). Each
cell is what the table decides at that row's shape (the smallest of its
column), before any workspace cap: the cap is the engine's, not the
table's. A cell the table has no plan for is written as its out-of-range
strategy and named on stderr.
"""

from __future__ import annotations

from artune.formats.header import Export, provenance_lines
from artune.formats.trtllm.enums import STRATEGIES
from artune.table.decide import decide
from artune.table.types import Table, TokenShape

TP_ROWS = (2, 4, 8)
PLANES = ("NONE", "RESIDUAL_RMS_NORM", "RESIDUAL_RMS_NORM_QUANT_FP8", "RESIDUAL_RMS_NORM_QUANT_NVFP4")
HIDDEN_ROWS = tuple(1 << k for k in range(7, 14))
TOKEN_COLUMNS = tuple(1 << k for k in range(15))
#: the enum ints of the strategies a cell holds (``AllReduceStrategyType``)
VALUES = {"NCCL": 0, "ONESHOT": 4, "TWOSHOT": 5, "NCCL_SYMMETRIC": 8}


def export_trtllm(table: Table, command: str, sm: int) -> Export:
    """The ``AllReduceBestStrategyTableSM<sm>`` block for ``table`` (a shape table: ``Table.by_shape``)."""
    dropped: list[str] = []
    fallback = table.shape_plans[0].fallback if table.shape_plans else "nccl_symmetric"
    lines = [*provenance_lines(table, command, "//")]
    lines.append(f"inline AllReduceBestStrategyTableType AllReduceBestStrategyTableSM{sm}")
    tp_rows = []
    for ws in TP_ROWS:
        planes = []
        for fusion in PLANES:
            rows = []
            for hidden in HIDDEN_ROWS:
                if table.shape_plan(ws, hidden, fusion) is None:
                    dropped.append(f"no plan for ws={ws} hidden={hidden} fusion={fusion}: {fallback} written")
                cells = [_cell(table, ws, tokens, hidden, fusion, dropped) for tokens in TOKEN_COLUMNS]
                rows.append("{" + ", ".join(map(str, cells)) + "}")
            planes.append(f"{{// Fusion={fusion}\n                " + ",\n                ".join(rows) + "}")
        tp_rows.append(f"{{    // TP={ws}\n            " + ",\n            ".join(planes) + "}")
    lines.append("    = {" + ",\n        ".join(tp_rows) + "};")
    return Export("\n".join(lines) + "\n", dropped)


def _cell(table: Table, ws: int, tokens: int, hidden: int, fusion: str, dropped: list[str]) -> int:
    decision = decide(table, 0, ws, shape=TokenShape(tokens, hidden, fusion))
    strategy = STRATEGIES.get(decision.algorithm)
    if strategy is None:
        dropped.append(
            f"ws={ws} hidden={hidden} {fusion} tokens {tokens}: {decision.algorithm} is no "
            "TensorRT-LLM strategy; NCCL written"
        )
        return VALUES["NCCL"]
    return VALUES[strategy]
