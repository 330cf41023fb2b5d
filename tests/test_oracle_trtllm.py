"""TensorRT-LLM's header, compiled with g++, decides; artune's reading of the same header must agree on every probe.

Two revisions of ``customAllReduceUtils.h`` are kept as fixtures with their
commits named (``tests/fixtures/trtllm-005b299``: out of range is
NCCL_SYMMETRIC, the workspace 16/8 MB; ``tests/fixtures/trtllm-3d56e29``: out
of range is NCCL, the workspace 64 MiB, other cells). The oracle
(``src/artune/oracles/trtllm.py``) compiles each header unchanged against stand-ins
for ``getSMVersion`` and the environment switches. Without g++ these tests skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from artune.errors import OracleUnavailable
from artune.formats.trtllm.enums import ALGORITHMS
from artune.formats.trtllm.read import arch_of, read_trtllm
from artune.oracles import trtllm as oracle
from artune.table.decide import decide
from artune.table.types import TokenShape

FIXTURES = Path(__file__).parent / "fixtures"
REVISIONS = ["trtllm-005b299", "trtllm-3d56e29"]


def artune_decisions(imported, probes: list[oracle.ShapeProbe]) -> list[str]:
    tables = {sm: imported.tables.resolve(arch_of(sm)) for sm in oracle.SMS}
    return [
        decide(tables[p.sm], p.nbytes, p.tp, shape=TokenShape(p.tokens, p.hidden, p.fusion)).algorithm for p in probes
    ]


@pytest.mark.parametrize("revision", REVISIONS)
def test_artune_decides_as_the_compiled_header_on_every_probe(revision: str) -> None:
    checkout = FIXTURES / revision
    imported = read_trtllm(str(checkout))
    enums = {f.path: f for f in imported.files}
    from artune.formats.trtllm.enums import parse_enums
    from artune.formats.trtllm.header import parse_header

    header = parse_header(imported.files[0])
    fusion_values = parse_enums(imported.files[1]).fusion
    probes = oracle.probes(header.fusion_index, fusion_values)
    try:
        engine = oracle.engine_decisions(checkout, probes)
    except OracleUnavailable as err:
        pytest.skip(str(err))
    del enums
    strategy = {v: k for k, v in parse_enums(imported.files[1]).strategy.items()}
    names = [ALGORITHMS[strategy[v]] for v in engine]
    mine = artune_decisions(imported, probes)
    assert len(probes) > 100_000
    differ = [(p, e, m) for p, e, m in zip(probes, names, mine, strict=True) if e != m]
    assert differ == [], differ[:5]
    # the probes reach every answer the header can give, the out-of-range one included
    assert set(names) == {"trtllm_oneshot", "trtllm_twoshot", "nccl", ALGORITHMS[header.fallback]} | {"nccl"}
