"""Uncertainty by bootstrap: refit on measurements resampled with replacement.

Resampling is stratified by world size, so every replicate still sees each
world size the fit saw (the world-size dependence stays identified). The
spread of the replicates' parameters is the parameter uncertainty; the
spread of their predictions is the prediction uncertainty.
"""

from __future__ import annotations

import numpy as np

from artune.costmodel.fit import Points, solve
from artune.costmodel.forms import Context, Form

REPLICATES = 200
SEED = 20261201


def bootstrap(
    form: Form, points: Points, ctx: Context, free: np.ndarray, replicates: int = REPLICATES, seed: int = SEED
) -> np.ndarray:
    """Parameter vectors of ``replicates`` refits, shape ``(replicates, len(form.params))``."""
    rng = np.random.default_rng(seed)
    strata = [np.flatnonzero(points.p == p) for p in np.unique(points.p)]
    out = np.empty((replicates, len(form.params)))
    for i in range(replicates):
        index = np.concatenate([rng.choice(s, size=len(s), replace=True) for s in strata])
        out[i] = solve(form, points.take(index), ctx, free)
    return out


def interval(samples: np.ndarray, level: float = 0.9, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The central ``level`` interval of ``samples`` along ``axis`` (default 5th-95th percentile)."""
    tail = (1.0 - level) / 2 * 100
    return np.percentile(samples, tail, axis=axis), np.percentile(samples, 100 - tail, axis=axis)
