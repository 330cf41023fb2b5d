"""TensorRT-LLM's own header as the oracle: ``selectStrategyLookUpTable`` compiled with g++ decides each probe.

The header (``cpp/tensorrt_llm/common/customAllReduceUtils.h``) and its enums
(``cpp/tensorrt_llm/kernels/customAllReduceKernels.h``) are compiled
unchanged. What they include from the rest of TensorRT-LLM is answered by
stand-ins written here: ``cudaUtils.h`` declares ``getSMVersion()`` (the
driver answers each probe's SM version), ``envUtils.h`` the
forced-deterministic switches (off), ``config.h`` the namespace macros. The
driver reads probes on stdin, one ``SM TOKENS HIDDEN FUSION_INT TP BYTES``
per line, and answers what ``AllreduceOp``'s AUTO path runs with the table:
NCCL when ``BYTES`` is over ``getMaxRequiredWorkspaceSize(TP)`` (its
``ifFallbackToNCCL``), otherwise the int ``selectStrategyLookUpTable``
returns, or -1 where it throws. The build is cached by the hash of its
inputs in the temporary folder; without g++ ``OracleUnavailable``.

The module answers ``artune verify-engine trtllm:PATH`` (``RELEASES``,
``probes``, ``engine_decisions``, ``artune_decisions``, ``evaluated``): the
probes cover every SM version TensorRT-LLM's archs have, TP 1 to 32, every
fused op artune's reading has a plan for, hidden sizes around every row
and the models' sizes, and token counts around every power of two.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from artune.errors import OracleGap, OracleUnavailable
from artune.formats.engine import Oracle
from artune.formats.fingerprints import Evaluated
from artune.oracles import RAISES

if TYPE_CHECKING:
    from artune.formats.trtllm.read import Reading

HEADER = "cpp/tensorrt_llm/common/customAllReduceUtils.h"
ENUMS = "cpp/tensorrt_llm/kernels/customAllReduceKernels.h"
BUILD_TIMEOUT_S = 300
RUN_TIMEOUT_S = 300

_STANDINS = {
    "tensorrt_llm/common/cudaUtils.h": """#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <unordered_map>
#include <utility>
#include <vector>
namespace tensorrt_llm::common { int getSMVersion(); }
""",
    "tensorrt_llm/common/envUtils.h": """#pragma once
#include <cstddef>
namespace tensorrt_llm::common { bool getEnvForceDeterministicAllReduce(); size_t getEnvAllReduceWorkspaceSize(); }
""",
    "tensorrt_llm/common/config.h": """#pragma once
#define TRTLLM_NAMESPACE_BEGIN namespace tensorrt_llm {
#define TRTLLM_NAMESPACE_END }
""",
}

_DRIVER = """#include "tensorrt_llm/common/customAllReduceUtils.h"
#include <cstdio>
static int g_sm = 90;
namespace tensorrt_llm::common {
int getSMVersion() { return g_sm; }
bool getEnvForceDeterministicAllReduce() { return false; }
size_t getEnvAllReduceWorkspaceSize() { return 0; }
}
namespace cu = tensorrt_llm::utils::customAllReduceUtils;
int main() {
    long long sm, tokens, hidden, fusion, tp, bytes;
    while (std::scanf("%lld %lld %lld %lld %lld %lld", &sm, &tokens, &hidden, &fusion, &tp, &bytes) == 6) {
        g_sm = (int) sm;
        int answer;
        try {
            if ((size_t) bytes > cu::getMaxRequiredWorkspaceSize((int) tp)) {
                answer = (int) tensorrt_llm::kernels::AllReduceStrategyType::NCCL;
            } else {
                answer = (int) cu::selectStrategyLookUpTable((size_t) tokens, (size_t) hidden,
                    static_cast<tensorrt_llm::kernels::AllReduceFusionOp>(fusion), (int) tp);
            }
        } catch (...) {
            answer = -1;
        }
        std::printf("%d\\n", answer);
    }
    return 0;
}
"""


@dataclass(frozen=True)
class ShapeProbe:
    """One call: SM version, tokens, hidden size, fused op (its enum int and name), TP size and bytes."""

    sm: int
    tokens: int
    hidden: int
    fusion: str
    fusion_value: int
    tp: int
    nbytes: int

    @property
    def topology(self) -> str:
        """How ``verify-engine`` counts probes: by the SM version (``"SM 90"``)."""
        return f"SM {self.sm}"

    def __str__(self) -> str:
        return f"SM {self.sm} tp={self.tp} hidden={self.hidden} {self.fusion} tokens={self.tokens} ({self.nbytes} B)"


RELEASES: tuple[str, ...] = ()  # TensorRT-LLM's table is compiled into its wheel: a checkout is read, not a release


def _files(root: Path) -> tuple[Path, Path]:
    """The header and the enum file of ``root`` (a checkout, or the header in one)."""
    if root.is_file():
        return root, root.parent.parent / "kernels" / Path(ENUMS).name
    return root / HEADER, root / ENUMS


def build(root: Path) -> Path:
    """The compiled driver for ``root``'s header and enums, built once per content in the temporary folder."""
    compiler = shutil.which("g++")
    if compiler is None:
        raise OracleUnavailable("g++ is not installed; install it to run the TensorRT-LLM oracle")
    header, enums = _files(root)
    sources = [header.read_bytes(), enums.read_bytes(), _DRIVER.encode()]
    sources += [text.encode() for text in _STANDINS.values()]
    key = hashlib.sha256(b"\0".join(sources)).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "artune-trtllm-oracle" / key
    binary = folder / "oracle"
    if binary.is_file():
        return binary
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=folder.parent))
    try:
        tree = {
            **_STANDINS,
            HEADER.removeprefix("cpp/"): header.read_text(),
            ENUMS.removeprefix("cpp/"): enums.read_text(),
        }
        for rel, text in tree.items():
            (work / "include" / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / "include" / rel).write_text(text)
        (work / "driver.cpp").write_text(_DRIVER)
        command = [compiler, "-std=c++17", "-O1", "-I", str(work / "include"), str(work / "driver.cpp"), "-o"]
        done = subprocess.run(
            [*command, str(work / "oracle")], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
        )
        if done.returncode != 0:
            raise OracleGap(f"the header does not compile against the stand-ins: {done.stderr[-2000:]}")
        folder.mkdir(parents=True, exist_ok=True)
        shutil.move(str(work / "oracle"), binary)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


def engine_answers(root: Path, probes: Sequence[ShapeProbe]) -> list[int]:
    """The compiled header's answer per probe: a strategy enum int, -1 where it throws."""
    binary = build(root)
    lines = "".join(f"{p.sm} {p.tokens} {p.hidden} {p.fusion_value} {p.tp} {p.nbytes}\n" for p in probes)
    try:
        done = subprocess.run(
            [str(binary)], input=lines, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise OracleGap(f"the compiled header did not answer {len(probes)} probes in {RUN_TIMEOUT_S} s") from None
    answers = [int(v) for v in done.stdout.split()]
    if done.returncode != 0 or len(answers) != len(probes):
        raise OracleGap(
            f"the compiled header answered {len(answers)} of {len(probes)} probes and exited {done.returncode} "
            "(undefined behaviour in the header?)"
        )
    return answers


def engine_decisions(root: Path, probes: Sequence[ShapeProbe]) -> list[str]:
    """The compiled header's answer per probe, in artune's names (``RAISES`` where it throws)."""
    from artune.formats.trtllm.tables import algorithm

    enums = reading(root).enums
    return [RAISES if v == -1 else (algorithm(enums, v) or str(v)) for v in engine_answers(root, probes)]


def artune_decisions(root: Path, probes: Sequence[ShapeProbe]) -> list[str]:
    """artune's answer per probe: the product's reader on ``root``, then ``decide`` on the SM's table."""
    from artune.formats.trtllm.read import arch_of, read_trtllm
    from artune.table.decide import decide
    from artune.table.types import TokenShape

    imported = read_trtllm(str(root))
    tables = {sm: imported.tables.resolve(arch_of(sm), quiet=True) for sm in {p.sm for p in probes}}
    return [
        decide(tables[p.sm], p.nbytes, p.tp, shape=TokenShape(p.tokens, p.hidden, p.fusion)).algorithm for p in probes
    ]


def evaluated(root: Path) -> list[Evaluated]:
    """The functions artune's reading of ``root`` ran, fingerprinted (what ``fingerprints.record`` keeps)."""
    return list(reading(root).evaluated)


def reading(root: Path) -> Reading:
    """artune's reading of the header and enums of ``root`` (a checkout, or the header in one)."""
    from artune.formats.files import read_source
    from artune.formats.trtllm.read import read_files

    header, enums = _files(root)
    return read_files(read_source(header), read_source(enums))


SMS = (80, 89, 90, 100, 103, 107, 120)
WORLD_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32)
BF16 = 2
HIDDEN_SIZES = tuple(sorted({*(1 << k for k in range(6, 16)), 100, 1000, 3000, 5120, 6144, 7168, 12288, 13000}))
TOKENS = tuple(sorted({t for k in range(17) for t in ((1 << k) - 1, 1 << k, (1 << k) + 1) if t >= 1} | {100, 3000}))


def probes(root: Path) -> list[ShapeProbe]:
    """Every cell of the tables (each power of two, one below and one above), the truncations (TP 3, 5, 6, 7,
    12; hidden 5120, 6144, 7168, 12288 and others), and out-of-range values (TP 1, 16, 32; hidden 64, 16384
    up; tokens 32768 up), for every fused op artune's reading of ``root`` has a plan for (a fused op the
    header's code is undefined for has none, and is not asked), at bf16's bytes (the workspace cap decides
    too)."""
    read = reading(root)
    planned = sorted({f for t in read.tables.values() for f in t.fusions})
    fusions = {name: read.enums.fusion[name] for name in planned if name in read.enums.fusion}
    return [
        ShapeProbe(sm, t, hidden, fusion, value, tp, t * hidden * BF16)
        for sm in SMS
        for tp in WORLD_SIZES
        for fusion, value in fusions.items()
        for hidden in HIDDEN_SIZES
        for t in TOKENS
    ]


def within_workspace(root: Path, probes: Sequence[ShapeProbe]) -> list[bool]:
    """Per probe, whether its bytes are within ``getMaxRequiredWorkspaceSize`` at its TP (as artune reads it)."""
    read = reading(root)
    caps = next(iter(read.tables.values())).caps if read.tables else ()
    if not caps:
        return [True] * len(probes)
    return [p.nbytes <= next(b for most, b in caps if most is None or p.tp <= most) for p in probes]


ORACLE = Oracle(
    runs="TensorRT-LLM's own selectStrategyLookUpTable, compiled with g++",
    releases=RELEASES,
    probes=probes,
    engine_decisions=engine_decisions,
    artune_decisions=artune_decisions,
    evaluated=evaluated,
)
