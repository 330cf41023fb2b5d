"""What one tuning run does: sizes, resolution, the rule for "faster" and the time budget split.

The budget is seconds of measuring, split across the phases by weight. What
a phase spent is counted from its measurements' samples (see
``artune.tune.measurer.call_cost``), never from a rank's wall clock, so every
rank computes the same budgets and runs the same sequence. A phase that
needs less (no tunables, no crossover, measurements already in the log)
leaves its share to the later phases; one that overran leaves less.

| phase | default share | what |
|---|---|---|
| sweep | 25% | every algorithm at the coarse sizes |
| probe | 10% | between two coarse sizes won by one algorithm: it and its rivals at the midpoint |
| settle | 10% | the sizes whose pick is unsure, the two candidates again |
| params | 10% | each declared tunable at up to three sizes the algorithm won |
| bisect | 15% | each crossover, two algorithms per midpoint (unsure midpoints again) |
| duel | 15% | the table against every fixed rule at fresh sizes, repaired where one wins (``duel``) |
| regret | 15% | held out: every algorithm and the rules' choices at sizes no other phase touched |

``TuneConfig.full()``: powers of 4 from 256 B to 64 MiB, crossovers to
within 2^(1/4) (19%), 8 duel sizes a round, 12 held-out sizes, 60 s.
``TuneConfig.quick_run()``: powers of 16 from 256 B to 16 MiB, within 2^(1/2),
6 duel sizes a round, 8 held-out sizes, 15 s.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from artune.grid import powers
from artune.tune.compare import LEVEL, SIZE_TIE, FasterRule

PHASES: tuple[tuple[str, float], ...] = (
    ("sweep", 0.25),
    ("probe", 0.10),
    ("settle", 0.10),
    ("params", 0.10),
    ("bisect", 0.15),
    ("duel", 0.15),
    ("regret", 0.15),
)
FULL_BUDGET_S = 60.0
#: the grain of a CUDA run: the symmetric-memory kernels take only multiples of 4 bytes (an odd bf16 count
#: would fail there and fall back in use), and an engine's messages are rows of a hidden size, so 16 costs nothing
CUDA_GRAIN = 16
QUICK_BUDGET_S = 15.0


@dataclass(frozen=True)
class TuneConfig:
    """The settings of one tuning run (identical on every rank)."""

    budget_s: float = FULL_BUDGET_S
    min_size: int = 256
    max_size: int = 64 << 20
    factor: int = 4
    resolution: float = 2**0.25
    regret_sizes: int = 12
    duel_sizes: int = 8
    seed: int = 0
    dtype: str = "float32"
    #: every size the run measures is a multiple of this many bytes: the element size, or more where a
    #: candidate needs it (``CUDA_GRAIN``)
    grain: int = 4
    rule: FasterRule = field(default_factory=FasterRule)
    phases: tuple[tuple[str, float], ...] = PHASES
    quick: bool = False

    @classmethod
    def full(cls, budget_s: float | None = None) -> TuneConfig:
        """The default run (``artune tune``)."""
        return cls(budget_s=FULL_BUDGET_S if budget_s is None else budget_s)

    @classmethod
    def quick_run(cls, budget_s: float | None = None) -> TuneConfig:
        """``artune tune --quick``: fewer sizes, coarser crossovers, a smaller budget."""
        return cls(
            budget_s=QUICK_BUDGET_S if budget_s is None else budget_s,
            max_size=16 << 20,
            factor=16,
            resolution=2**0.5,
            regret_sizes=8,
            duel_sizes=6,
            quick=True,
        )

    def with_changes(self, **changes: object) -> TuneConfig:
        """A copy with some fields replaced."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def sweep_sizes(self) -> list[int]:
        """The coarse sizes: ``min_size * factor**k`` up to ``max_size``."""
        return powers(self.min_size, self.max_size, self.factor)

    def to_dict(self) -> dict[str, object]:
        """The settings as plain data (a run's journal keeps them, for ``artune tune --replay``)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("rule", "phases")}
        return {**data, "tie": self.rule.tie, "level": self.rule.level, "phases": [list(p) for p in self.phases]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TuneConfig:
        """The settings ``to_dict`` wrote."""
        names = {f.name for f in fields(cls)} - {"rule", "phases"}
        data = {"grain" if k == "itemsize" else k: v for k, v in data.items()}  # journals before the rename
        kept = {k: v for k, v in data.items() if k in names}
        phases = tuple((str(n), float(w)) for n, w in data.get("phases", PHASES))
        rule = FasterRule(float(data.get("tie", SIZE_TIE)), float(data.get("level", LEVEL)))
        return cls(**kept, rule=rule, phases=phases)

    def describe(self) -> str:
        """One line for provenance notes and reports."""
        split = ", ".join(f"{name} {share:.0%}" for name, share in self.phases)
        return (
            f"budget {self.budget_s:g}s per world size ({split}); {self.rule.describe()}; "
            f"crossovers bisected to {self.resolution:.2f}x"
        )


class Budget:
    """Phase allowances from the seconds spent so far (see the module table)."""

    def __init__(self, total_s: float, phases: tuple[tuple[str, float], ...], spent: float = 0.0) -> None:
        self.total_s = total_s
        self.phases = phases
        self.spent_s = spent

    def allowance(self, phase: str, spent_s: float | None = None) -> float:
        """Seconds for ``phase``: what remains, shared by weight among it and the phases after it."""
        if spent_s is not None:
            self.spent_s = spent_s
        names = [name for name, _ in self.phases]
        if phase not in names:
            raise ValueError(f"Budget.allowance(): unknown phase {phase!r}; phases: {', '.join(names)}")
        index = names.index(phase)
        rest = sum(weight for _, weight in self.phases[index:])
        weight = self.phases[index][1]
        remaining = max(0.0, self.total_s - self.spent_s)
        return remaining * weight / rest if rest > 0 else 0.0
