"""Score a table on a sweep as its engine runs it: per size the choice, its kernel, its time and its regret.

At every size the sweep timed, at the sweep's world size and mode on one
host, the table decides as the engine does (``artune.table.decide`` with the
algorithms whose static conditions hold for the sweep's dtype and machine,
``artune.catalog``), the choice is taken down to the kernel that runs
(``artune.evidence.kernels``: vLLM's custom all-reduce runs 1-stage or
2-stage by world size and bytes), and that kernel's column gives the time.
The regret is that time over the fastest column's at the size (1.0: the
fastest measured). The score is the geometric mean of the regrets and the
worst one. A size whose kernel the sweep did not measure is *unscored* and
named, never filled from another column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from artune import catalog
from artune.evidence.kernels import kernel_of, why_kernel
from artune.evidence.sweep import BenchmarkSweep
from artune.measure.stats import geomean
from artune.sizes import format_size
from artune.table.decide import decide
from artune.table.types import Table


@dataclass(frozen=True)
class SizeScore:
    """One size: what the engine runs, the sweep's time for it and the fastest column's."""

    size: int
    algorithm: str  # the engine's choice
    kernel: str  # the kernel it runs
    why: str  # why that kernel (where the engine picks it below its table), else ""
    column: str  # the sweep's column for the kernel; "" when the sweep did not measure it
    time_us: float | None  # None: unscored
    fastest: str  # the fastest column at this size
    fastest_us: float

    @property
    def regret(self) -> float | None:
        """time / fastest time (>= 1), or ``None`` when the kernel was not measured here."""
        return None if self.time_us is None else self.time_us / self.fastest_us

    def describe(self) -> str:
        """One line for a report."""
        if self.time_us is None:
            return (
                f"{format_size(self.size)}: {self.algorithm} runs {self.kernel}, which the sweep did not measure "
                f"at this size (unscored)"
            )
        return (
            f"{format_size(self.size)}: {self.algorithm} -> {self.kernel} [{self.column}] {self.time_us:.1f} us, "
            f"fastest {self.fastest} {self.fastest_us:.1f} us, regret {self.regret:.3f}"
        )


@dataclass(frozen=True)
class EvidenceScore:
    """A table's row on one sweep, as run: every size's score, their geometric mean and the worst."""

    table: str
    arch: str
    world_size: int
    mode: str
    evidence: str  # the sweep's source
    sizes: tuple[SizeScore, ...]

    @property
    def scored(self) -> tuple[SizeScore, ...]:
        """The sizes whose kernel the sweep measured."""
        return tuple(s for s in self.sizes if s.time_us is not None)

    @property
    def unscored(self) -> tuple[SizeScore, ...]:
        """The sizes whose kernel the sweep did not measure (named in every report)."""
        return tuple(s for s in self.sizes if s.time_us is None)

    @property
    def geomean(self) -> float | None:
        """The geometric mean of the scored sizes' regrets; ``None`` when none was scored."""
        regrets = [s.regret for s in self.scored if s.regret is not None]
        return geomean(regrets) if regrets else None

    def geomean_at(self, sizes: set[int] | frozenset[int]) -> float | None:
        """The geometric mean of the regrets at ``sizes`` (those of them scored here); ``None`` when none is."""
        regrets = [s.regret for s in self.scored if s.size in sizes and s.regret is not None]
        return geomean(regrets) if regrets else None

    @property
    def worst(self) -> SizeScore | None:
        """The scored size with the largest regret."""
        return max(self.scored, key=lambda s: s.regret or 0.0, default=None)

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON (``geomean``/``worst`` are ``None`` when nothing was scored)."""
        worst = self.worst
        return {
            "table": self.table,
            "arch": self.arch,
            "world_size": self.world_size,
            "mode": self.mode,
            "evidence": self.evidence,
            "geomean": self.geomean,
            "worst": None if worst is None else worst.regret,
            "worst_size": None if worst is None else worst.size,
            "scored": len(self.scored),
            "unscored": [{"size": s.size, "algorithm": s.algorithm, "kernel": s.kernel} for s in self.unscored],
            "sizes": [
                {
                    "size": s.size,
                    "algorithm": s.algorithm,
                    "kernel": s.kernel,
                    "column": s.column or None,
                    "time_us": s.time_us,
                    "fastest": s.fastest,
                    "fastest_us": s.fastest_us,
                    "regret": s.regret,
                }
                for s in self.sizes
            ],
        }

    def summary(self) -> str:
        """One line: geomean and worst over the scored sizes, and how many were not scored."""
        geo, worst = self.geomean, self.worst
        head = f"{self.table} @ {self.arch} ws={self.world_size} {self.mode}"
        if geo is None or worst is None:
            return f"{head}: no size scored (the sweep measured none of the kernels the row runs)"
        text = (
            f"{head}: geomean regret {geo:.3f}, worst {worst.regret:.3f} at {format_size(worst.size)} "
            f"({worst.kernel} vs {worst.fastest}) over {len(self.scored)} sizes"
        )
        if self.unscored:
            text += f"; unscored: {', '.join(format_size(s.size) + ' ' + s.kernel for s in self.unscored)}"
        return text


def score_table(
    table: Table,
    evidence: BenchmarkSweep,
    arch: str | None = None,
    *,
    custom_ar_algo: str | None = None,
) -> EvidenceScore:
    """Score ``table`` on ``evidence`` as its engine runs it (see the module docstring).

    ``arch`` names the machine for the report (default: the sweep's, else the
    table's); ``custom_ar_algo`` is ``VLLM_CUSTOM_ALLREDUCE_ALGO`` as the
    deployment sets it (``None``: unset, vLLM's own switch).
    """
    ws, mode, multicast = evidence.world_size, evidence.mode, evidence.multicast
    scores = []
    for size in evidence.sizes:
        fastest = evidence.fastest(size)
        if fastest is None:
            continue  # no column printed a time here: nothing to weigh against
        available = catalog.available(ws, evidence.dtype, size, multicast)
        algorithm = decide(table, size, ws, mode, available, 1, multicast).algorithm
        kernel = kernel_of(algorithm, ws, size, multicast, custom_ar_algo)
        column = evidence.column(kernel)
        time = None if column is None else evidence.time(size, column)
        scores.append(
            SizeScore(
                size,
                algorithm,
                kernel,
                why_kernel(algorithm, ws, size, custom_ar_algo) if kernel.startswith("custom_ar/") else "",
                "" if column is None else column.name,
                time,
                fastest[0].name,
                fastest[1],
            )
        )
    return EvidenceScore(
        table.name, arch or evidence.arch or table.platform.arch, ws, mode, evidence.source, tuple(scores)
    )
