"""Which message sizes get measured or modelled: the tuner's coarse sweep, bisection midpoints and off-grid
sizes, and the cost model's log-spaced grids.

Sizes are byte counts that are whole multiples of the element size. Sizes
artune picks itself (midpoints, a log-spaced grid) are *quantized* to at
most 4 significant bits (``1.125MiB``, ``1.375MiB``, ...), so tables carry
tidy bounds. Off-grid
sizes for the regret check are deliberately untidy: log-spaced, jittered by a
seeded generator, never a power of two and never a size already measured.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable

SIGNIFICANT_BITS = 4


def powers(start: int, stop: int, factor: int) -> list[int]:
    """``start, start*factor, ...`` up to and including ``stop``."""
    if start <= 0 or factor < 2:
        raise ValueError(f"powers(): need start > 0 and factor >= 2, got {start}, {factor}")
    out = []
    size = start
    while size <= stop:
        out.append(size)
        size *= factor
    return out


def quantize(nbytes: float, itemsize: int = 4) -> int:
    """``nbytes`` rounded to the nearest size with at most 4 significant bits, a multiple of ``itemsize``."""
    if nbytes <= itemsize:
        return itemsize
    step = max(itemsize, 1 << max(0, math.floor(math.log2(nbytes)) - (SIGNIFICANT_BITS - 1)))
    return max(itemsize, round(nbytes / step) * step)


def log_spaced(lo: int, hi: int, per_octave: int = 4, itemsize: int = 4) -> list[int]:
    """Sizes from ``lo`` to ``hi`` bytes, ``per_octave`` per doubling, quantized (both ends included)."""
    count = max(2, round(math.log2(hi / lo) * per_octave) + 1)
    return sorted({quantize(lo * (hi / lo) ** (i / (count - 1)), itemsize) for i in range(count)})


def midpoint(lo: int, hi: int, itemsize: int = 4) -> int:
    """The quantized geometric midpoint of ``lo`` and ``hi``; may equal one of them when they are close."""
    return quantize(math.sqrt(lo * hi), itemsize)


def off_grid_sizes(lo: int, hi: int, count: int, seed: int, itemsize: int = 4, avoid: Iterable[int] = ()) -> list[int]:
    """``count`` sorted sizes log-spaced over ``[lo, hi]``, each jittered within its slot.

    Every size is a multiple of ``itemsize``, not a power of two, distinct,
    and not in ``avoid`` (sizes already measured).
    """
    if count < 1 or lo <= 0 or hi <= lo:
        raise ValueError(f"off_grid_sizes(): need count >= 1 and 0 < lo < hi, got {count}, {lo}, {hi}")
    rng = random.Random(seed)
    taken = set(avoid)
    span = math.log(hi / lo)
    out: list[int] = []
    for i in range(count):
        fraction = (i + rng.uniform(0.15, 0.85)) / count
        size = max(itemsize, int(lo * math.exp(span * fraction)) // itemsize * itemsize)
        while size in taken or size & (size - 1) == 0:
            size += itemsize
        taken.add(size)
        out.append(size)
    return sorted(out)
