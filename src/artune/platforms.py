"""What hardware a table is for, as data: a leaf of the low layer.

``artune.machine`` and ``artune.gpufacts`` say which platform they run on,
and the table model (``artune.table.types``) says which platform a table is
for; both import it from here, so neither layer reaches into the other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Platform:
    """What a table is for: ``kind`` cuda/rocm/cpu, ``arch`` ("10.7", "x86_64"), optional device."""

    kind: str
    arch: str
    device: str = ""

    def __str__(self) -> str:
        return f"{self.kind} arch={self.arch}" + (f" ({self.device})" if self.device else "")
