"""A figure written to a file: matplotlib on its Agg backend (no display needed), closed whatever happens.

Both towers draw (the tuner's report, the cost model's fit), so the one way
to open, lay out, save and close a figure lives here, in the low layer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

DPI = 110


@contextmanager
def saved_figure(path: Path, *grid: int, **subplots: Any) -> Iterator[tuple[Any, Any]]:
    """``(figure, axes)`` of ``plt.subplots(*grid, **subplots)``, saved to ``path`` when the block ends
    without an error; the figure is closed either way (matplotlib keeps every open one)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(*grid, **subplots)
    try:
        yield fig, axes
        fig.tight_layout()
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)
