"""TensorRT-LLM's strategy and fused-op enums, read from ``cpp/tensorrt_llm/kernels/customAllReduceKernels.h``.

The table cells are ``AllReduceStrategyType`` ints and the planes are keyed
by ``AllReduceFusionOp`` names, so the reader needs both enums of the same
revision. Only ``NAME = INT,`` members are read; any other member is a
``TableError`` naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from artune.errors import TableError
from artune.formats.files import SourceFile
from artune.formats.trtllm.cxx import CxxText, line_at, strip_comments

FILE = "cpp/tensorrt_llm/kernels/customAllReduceKernels.h"
#: artune's algorithm names for the strategies a table cell can hold (the others are not table values)
ALGORITHMS = {
    "NCCL": "nccl",
    "NCCL_SYMMETRIC": "nccl_symmetric",
    "ONESHOT": "trtllm_oneshot",
    "TWOSHOT": "trtllm_twoshot",
}
STRATEGIES = {name: enum for enum, name in ALGORITHMS.items()}


@dataclass(frozen=True)
class Enums:
    """Both enums: member name -> value, and the file they came from."""

    strategy: dict[str, int]
    fusion: dict[str, int]
    file: SourceFile

    def strategy_name(self, value: int) -> str | None:
        """The ``AllReduceStrategyType`` member with ``value`` (``None``: none has it)."""
        for name, number in self.strategy.items():
            if number == value:
                return name
        return None

    def fusion_name(self, value: int) -> str:
        """The ``AllReduceFusionOp`` member with ``value`` (its number when none has it)."""
        return next((name for name, number in self.fusion.items() if number == value), str(value))

    @property
    def by_type(self) -> dict[str, dict[str, int]]:
        """Both enums by their C++ names, as the header's code names their members."""
        return {"AllReduceStrategyType": self.strategy, "AllReduceFusionOp": self.fusion}


def parse_enums(file: SourceFile) -> Enums:
    """Read ``AllReduceStrategyType`` and ``AllReduceFusionOp``; ``TableError`` at the line of what is not read."""
    src = CxxText(file.label, strip_comments(file.text))
    return Enums(_enum(src, "AllReduceStrategyType"), _enum(src, "AllReduceFusionOp"), file)


def _enum(src: CxxText, name: str) -> dict[str, int]:
    found = re.search(rf"enum\s+class\s+{name}\s*:\s*\w+\s*\{{", src.text)
    if found is None:
        raise TableError(f"{src.name}: no 'enum class {name}' here; is this {FILE}?")
    begin, end = src.block(found.end() - 1)
    out: dict[str, int] = {}
    for item in src.text[begin:end].split(","):
        text = item.strip()
        if not text:
            continue
        member = re.fullmatch(r"(\w+)\s*=\s*(\d+)", text)
        if member is None:
            offset = begin + src.text[begin:end].find(text)
            raise TableError(
                f"{src.name}:{line_at(src.text, offset)}: {text!r} in enum {name}: artune reads "
                "'NAME = INT' members only"
            )
        out[member.group(1)] = int(member.group(2))
    return out
