"""TensorRT-LLM's own header as the oracle: ``selectStrategyLookUpTable`` compiled with g++ decides each probe.

The header (``cpp/tensorrt_llm/common/customAllReduceUtils.h``) and its enums
(``cpp/tensorrt_llm/kernels/customAllReduceKernels.h``) are compiled
unchanged, from the checkout's ``cpp/`` folder. What they include from the
rest of TensorRT-LLM is answered by stand-ins written here: ``cudaUtils.h``
declares ``getSMVersion()`` (the driver answers each probe's SM version),
``envUtils.h`` the forced-deterministic switches (off), ``config.h`` the
namespace macros. The driver reads probes on stdin, one
``SM TOKENS HIDDEN FUSION_INT TP BYTES`` per line, and answers what
``AllreduceOp``'s AUTO path runs with the table: NCCL when ``BYTES`` is over
``getMaxRequiredWorkspaceSize(TP)`` (its ``ifFallbackToNCCL``), otherwise the
int ``selectStrategyLookUpTable`` returns. The build is cached by the hash of
its inputs in the temporary folder; without g++ the caller skips.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from artune.errors import OracleGap, OracleUnavailable

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
        if ((size_t) bytes > cu::getMaxRequiredWorkspaceSize((int) tp)) {
            answer = (int) tensorrt_llm::kernels::AllReduceStrategyType::NCCL;
        } else {
            answer = (int) cu::selectStrategyLookUpTable((size_t) tokens, (size_t) hidden,
                static_cast<tensorrt_llm::kernels::AllReduceFusionOp>(fusion), (int) tp);
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


def build(checkout: Path) -> Path:
    """The compiled driver for ``checkout``'s header, built once per content in the temporary folder."""
    compiler = shutil.which("g++")
    if compiler is None:
        raise OracleUnavailable("g++ is not installed; install it to run the TensorRT-LLM oracle")
    sources = [(checkout / HEADER).read_bytes(), (checkout / ENUMS).read_bytes(), _DRIVER.encode()]
    sources += [text.encode() for text in _STANDINS.values()]
    key = hashlib.sha256(b"\0".join(sources)).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "artune-trtllm-oracle" / key
    binary = folder / "oracle"
    if binary.is_file():
        return binary
    work = Path(tempfile.mkdtemp(prefix="build-", dir=folder.parent if folder.parent.exists() else None))
    try:
        for rel, text in _STANDINS.items():
            (work / "standins" / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / "standins" / rel).write_text(text)
        (work / "driver.cpp").write_text(_DRIVER)
        command = [
            compiler,
            "-std=c++17",
            "-O1",
            "-I",
            str(work / "standins"),
            "-I",
            str(checkout / "cpp"),
            str(work / "driver.cpp"),
            "-o",
            str(work / "oracle"),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise OracleGap(f"the header does not compile against the stand-ins: {done.stderr[-2000:]}")
        folder.mkdir(parents=True, exist_ok=True)
        shutil.move(str(work / "oracle"), binary)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


def engine_decisions(checkout: Path, probes: Sequence[ShapeProbe]) -> list[int]:
    """The compiled header's answer (a strategy enum int) for each probe."""
    binary = build(checkout)
    lines = "".join(f"{p.sm} {p.tokens} {p.hidden} {p.fusion_value} {p.tp} {p.nbytes}\n" for p in probes)
    done = subprocess.run([str(binary)], input=lines, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=True)
    answers = [int(v) for v in done.stdout.split()]
    if len(answers) != len(probes):
        raise OracleGap(f"the oracle answered {len(answers)} of {len(probes)} probes")
    return answers


SMS = (80, 89, 90, 100, 103, 107, 120)
WORLD_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32)
BF16 = 2


def probes(fusion_ops: dict[str, int], fusion_values: dict[str, int]) -> list[ShapeProbe]:
    """Every cell (each power of two, one below and one above), the truncations (TP 3, 5, 6, 7, 12; hidden
    5120, 6144, 7168, 12288 and others), and out-of-range values (TP 1, 16, 32; hidden 64, 16384 up; tokens
    32768 up), for every fused op ``mapFusionOpToIndex`` maps, at bf16's bytes (the workspace cap decides too)."""
    hidden_sizes = sorted({*(1 << k for k in range(6, 16)), 100, 1000, 3000, 5120, 6144, 7168, 12288, 13000})
    tokens = sorted({t for k in range(17) for t in ((1 << k) - 1, 1 << k, (1 << k) + 1) if t >= 1} | {100, 3000})
    out: list[ShapeProbe] = []
    for sm in SMS:
        for tp in WORLD_SIZES:
            for fusion in fusion_ops:
                for hidden in hidden_sizes:
                    for t in tokens:
                        out.append(ShapeProbe(sm, t, hidden, fusion, fusion_values[fusion], tp, t * hidden * BF16))
    return out
