"""What measurements say of the moved rows: the sweeps they cover, and the losses they show.

A measurement is an artune log (``--measured``: ``artune tune``'s
``measurements-ws<N>[-graph].jsonl``). Its noise is the run's own spread:
the median, over its measurements, of the half interquartile range of a
measurement's samples over their median. A moved row loses (X201) when its
measured regret over the moved sizes exceeds the other side's by more than
that noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

from artune.errors import ArtuneError
from artune.review.asks import SweepCover
from artune.review.regret import log_times
from artune.review.types import Move, Question, RegretEvidence
from artune.sizes import format_span


def log_sweep(path: str) -> SweepCover:
    """What an artune measurement log covers (``ArtuneError`` naming the file when it cannot be read)."""
    try:
        arch, ws, mode, times = log_times(path)
    except (OSError, ArtuneError) as err:
        raise ArtuneError(f"--measured {path}: {err}") from None
    return SweepCover(arch, ws, mode, tuple(sorted(times)), path)


@cache
def log_noise(path: str) -> float:
    """The log's relative noise: the median half-IQR / median of its measurements' samples (0 with none)."""
    import numpy as np

    from artune.measure.records import MeasurementLog

    spreads = []
    for m in MeasurementLog(path).read():
        if m.ok and len(m.samples_us) >= 2:
            q1, mid, q3 = np.percentile(m.samples_us, [25, 50, 75])
            if mid > 0:
                spreads.append((q3 - q1) / (2 * mid))
    return float(np.median(spreads)) if spreads else 0.0


def routes(moved: Sequence[Move], arch: str, ws: int, mode: str, side: str) -> str:
    """``SPAN route; ...`` of one side over the moves at ``(arch, ws, mode)``."""
    rows = [
        f"{format_span(m.lo, m.hi)} {' > '.join(getattr(m, side))}"
        for m in moved
        if arch in m.arch.split(", ") and ws in m.world_sizes and (mode in m.modes)
    ]
    return "; ".join(dict.fromkeys(rows))


def measured_losses(regret: Sequence[RegretEvidence], moved: Sequence[Move]) -> tuple[Question, ...]:
    """X201 for each measured regret row (from a log) where AFTER loses to BEFORE beyond the log's noise."""
    out: list[Question] = []
    for r in regret:
        if r.basis != "measured":
            continue
        noise = log_noise(r.source)
        if r.after > r.before * (1 + noise):
            message = (
                f"measured on {r.sizes} sizes in {format_span(r.lo, r.hi)}, AFTER's rows "
                f"({routes(moved, r.arch, r.world_size, r.mode, 'after')}) have regret {r.after:.2f} against "
                f"BEFORE's {r.before:.2f}, beyond the run's noise ({noise:.1%}); the better row is BEFORE's: "
                f"{routes(moved, r.arch, r.world_size, r.mode, 'before')}"
            )
            scope = f"ws {r.world_size} ({r.mode})"
            out.append(
                Question("error", Path(r.source).name, r.arch, scope, message, "X201", (r.world_size,), (r.mode,))
            )
    return tuple(out)
