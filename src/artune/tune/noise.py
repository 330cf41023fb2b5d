"""The noise rule: when is one measurement really faster than another?

A measurement's *spread* is the width of its middle samples relative to its
median: ``(p80 - p20) / median``. Two measurements differ by more than noise
when the slower median exceeds the faster by more than the larger of the
two spreads, clamped to ``[floor, cap]``:

- the floor (default 5%) covers drift between calls that the samples of one
  call cannot show (a shared VM changes speed between calls);
- the cap (default 20%) says that a median difference larger than that is
  real whatever the spread: with many samples the median is far more stable
  than the spread of single samples, and a larger tie band would let the
  tuner keep algorithms that are clearly slower.

``margin(a, b)`` is how much faster ``a`` is than ``b`` (``t_b / t_a - 1``;
negative when slower). The tuner decides a crossover only when the margin
exceeds the noise, and reports ``margin / noise`` as the confidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from artune.measure.records import Candidate

NOISE_FLOOR = 0.05
NOISE_CAP = 0.20


class Timed(Protocol):
    """What the tuner reads of a measurement (``artune.measure.records.Measurement`` has it all)."""

    @property
    def candidate(self) -> Candidate: ...

    @property
    def size_bytes(self) -> int: ...

    @property
    def time_us(self) -> float: ...

    @property
    def p20_us(self) -> float: ...

    @property
    def p80_us(self) -> float: ...

    @property
    def nwrong(self) -> int: ...

    @property
    def status(self) -> str: ...


def usable(m: Timed) -> bool:
    """True when ``m`` ran, gave correct results and has a finite time: only these are ever chosen."""
    return m.status == "ok" and m.nwrong == 0 and math.isfinite(m.time_us) and m.time_us > 0


def wrong(m: Timed) -> bool:
    """True when ``m`` gave wrong numbers (``nwrong > 0`` or status ``invalid``): never choose it anywhere."""
    return m.nwrong > 0 or m.status == "invalid"


def spread(m: Timed) -> float:
    """``(p80 - p20) / median`` of ``m`` (``inf`` when ``m`` is not usable)."""
    if not usable(m):
        return math.inf
    return max(0.0, (m.p80_us - m.p20_us) / m.time_us)


def margin(a: Timed, b: Timed) -> float:
    """How much faster ``a`` is than ``b``: ``t_b / t_a - 1`` (``inf`` when only ``b`` failed)."""
    if not usable(a):
        return -math.inf if usable(b) else 0.0
    if not usable(b):
        return math.inf
    return b.time_us / a.time_us - 1.0


@dataclass(frozen=True)
class NoiseRule:
    """The tie band between two measurements: their larger spread, clamped to ``[floor, cap]``."""

    floor: float = NOISE_FLOOR
    cap: float = NOISE_CAP

    def noise(self, a: Timed, b: Timed) -> float:
        """The relative difference below which ``a`` and ``b`` count as equally fast."""
        worst = max(spread(a) if usable(a) else 0.0, spread(b) if usable(b) else 0.0)
        return min(self.cap, max(self.floor, worst))

    def beats(self, a: Timed, b: Timed) -> bool:
        """True when ``a`` is faster than ``b`` by more than noise (a failed ``b`` is always beaten)."""
        return usable(a) and margin(a, b) > self.noise(a, b)

    def tied(self, a: Timed, b: Timed) -> bool:
        """True when neither beats the other."""
        return not self.beats(a, b) and not self.beats(b, a)

    def confidence(self, a: Timed, b: Timed) -> float:
        """``margin(a, b) / noise(a, b)``: above 1 means ``a`` wins by more than noise."""
        return margin(a, b) / self.noise(a, b)
